/**
 * A worker process for bench/recovery-bench.ts. Its model hangs on the first call of each
 * turn (until aborted or the process is killed) and answers every later one; each call's start
 * is reported to the bench over IPC as `{ turnId, pid, at }` (wall clock, shared by both).
 *
 * Environment: TURNKIT_BENCH_DATABASE_URL, TURNKIT_BENCH_TASK_QUEUE, TURNKIT_BENCH_DIR.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import type { ModelClient } from '../src/models/types.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`recovery-worker: ${name} is required`);
  return value;
};
const dir = env('TURNKIT_BENCH_DIR');

/** True for the first call of a turn across all processes (an exclusive create of a file). */
function firstCall(turnId: string): boolean {
  try {
    writeFileSync(join(dir, `${turnId}.first`), String(process.pid), { flag: 'wx' });
    return true;
  } catch {
    return false;
  }
}

const model: ModelClient = {
  async chat(request, { signal }) {
    const { turnId } = request.metadata;
    process.send?.({ turnId, pid: process.pid, at: Date.now() });
    if (firstCall(turnId)) {
      await new Promise((_, reject) =>
        signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }),
      );
    }
    return { parts: [{ type: 'text', text: 'recovered' }], usage: { inputTokens: 1, outputTokens: 1 } };
  },
};

const store = await openStore(env('TURNKIT_BENCH_DATABASE_URL'));
const worker = await createWorker({
  store,
  agents: new AgentRegistry([defineAgent({ name: 'recover', model: 'bench-model' })]),
  model,
  taskQueue: env('TURNKIT_BENCH_TASK_QUEUE'),
  worker: { identity: `recovery-worker-${process.pid}`, shutdownGraceTime: '1 second' },
});
process.on('SIGTERM', () => worker.shutdown());
console.log('recovery-worker ready');
await worker.run();
await store.close();
process.disconnect?.();
