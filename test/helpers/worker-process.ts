import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('../fixtures/worker-process.ts', import.meta.url));

export interface WorkerProcess {
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
  stop(): Promise<void>;
}

/**
 * Spawns test/fixtures/worker-process.ts (or another fixture that prints `worker-process
 * ready`) as a real OS process (node + tsx).
 */
export function spawnWorker(env: Record<string, string>, fixture = script): WorkerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.includes('worker-process ready')) markReady();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      markReady();
      resolve({ code, signal });
    }),
  );
  return {
    child,
    ready,
    exited,
    output: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
