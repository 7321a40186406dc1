/**
 * The `turnkit` CLI as an operator runs it: a spawned `node --import tsx src/cli/bin.ts`
 * process, with its exit code, stdout and stderr.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../../src/cli/bin.ts', import.meta.url));
// The commands may run in a scratch directory, so tsx is named by its resolved URL.
const tsx = import.meta.resolve('tsx');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `turnkit <args>` with exactly `env` (callers spread `process.env` when they want it). */
export function runCli(args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', tsx, bin, ...args], {
      ...(cwd ? { cwd } : {}),
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
