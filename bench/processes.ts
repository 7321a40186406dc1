/** What the multi-process benchmarks share: worker processes (node + tsx) with an IPC channel. */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';

/**
 * Spawns `script` as a worker process; resolves once its output shows `ready` (rejects if it
 * exits first). `onMessage` receives what the process sends over IPC.
 */
export function spawnBenchWorker(
  script: string,
  env: Record<string, string>,
  ready: string,
  onMessage: (message: unknown, child: ChildProcess) => void = () => undefined,
): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  child.on('message', (message) => onMessage(message, child));
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(ready)) resolve(child);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', () => reject(new Error(`${script} exited before it was ready:\n${output}`)));
  });
}

/** Stops worker processes: SIGTERM, then SIGKILL after `graceMs`. */
export function stopBenchWorkers(children: Iterable<ChildProcess>, graceMs = 8_000): Promise<void> {
  return Promise.all(
    [...children].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
          setTimeout(() => child.kill('SIGKILL'), graceMs).unref();
        }),
    ),
  ).then(() => undefined);
}
