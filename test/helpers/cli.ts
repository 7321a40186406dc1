/**
 * The `turnkit` CLI as an operator runs it: a spawned `node --import tsx src/cli/bin.ts`
 * process, with its exit code, stdout and stderr.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';

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

/** What `cliSession` gives a test file: its scratch directory, env, store and `turnkit` command. */
export interface CliSession {
  readonly dir: string;
  readonly env: Record<string, string>;
  readonly store: Store;
  readonly worker: ChildProcess;
  turnkit(args: string[], extraEnv?: Record<string, string>): Promise<CliResult>;
}

/**
 * A scratch directory with a SQLite store and `test/fixtures/cli-agents.ts`, and a
 * `turnkit worker` started there before the file's tests (stopped, and the directory removed,
 * after them), as a person runs the CLI.
 */
export function cliSession(name: string): CliSession {
  const dir = mkdtempSync(join(tmpdir(), `turnkit-${name}-`));
  const env: Record<string, string> = {
    TURNKIT_DATABASE_URL: join(dir, 'cli.sqlite'),
    TURNKIT_TASK_QUEUE: `turnkit-${name}-${process.pid}-${Date.now()}`,
    TURNKIT_AGENTS: fileURLToPath(new URL('../fixtures/cli-agents.ts', import.meta.url)),
    TEMPORAL_ADDRESS: process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233',
    NO_COLOR: '1',
  };
  let store: Store | undefined;
  let worker: ChildProcess | undefined;
  beforeAll(async () => {
    const spawned = spawnCliWorker({ ...process.env, ...env }, dir);
    worker = spawned.child;
    await spawned.ready('turnkit worker: agents helper, slow');
    store = await openStore(env['TURNKIT_DATABASE_URL']!);
  });
  afterAll(async () => {
    await store?.close();
    if (worker) await stopCliWorker(worker);
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir,
    env,
    get store() {
      if (!store) throw new Error('cliSession: the store opens in beforeAll');
      return store;
    },
    get worker() {
      if (!worker) throw new Error('cliSession: the worker starts in beforeAll');
      return worker;
    },
    turnkit: (args, extraEnv = {}) => runCli(args, { ...process.env, ...env, ...extraEnv }, dir),
  };
}

/** `turnkit worker` as a child process; `ready(text)` resolves once its output shows `text`. */
export function spawnCliWorker(env: NodeJS.ProcessEnv, cwd: string) {
  const child = spawn(process.execPath, ['--import', tsx, bin, 'worker'], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const ready = (text: string) =>
    new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes(text)) resolve();
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      void exited.then((code) => reject(new Error(`turnkit worker exited ${code}: ${output}`)));
    });
  return { child, exited, ready, output: () => output };
}

/** SIGTERM, then waits for the exit (a no-op for a worker that has exited). */
export async function stopCliWorker(worker: ChildProcess): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return;
  const exited = new Promise((resolve) => worker.on('exit', resolve));
  worker.kill('SIGTERM');
  await exited;
}
