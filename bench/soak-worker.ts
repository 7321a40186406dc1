/**
 * A worker process for bench/soak-bench.ts: a TurnKit worker (createWorker, default settings)
 * for the soak agents (soak-agents.ts) on one task queue, and beside it, on the same
 * connection, a bare Temporal worker for the floor workflow (bench/workflows.ts) on another.
 * Answers `{ type: 'memory' }` over IPC with its RSS and heap after a full GC, and where the
 * RSS is: V8's heap as reserved (`heapTotal`), memory outside it that V8 tracks (`external`:
 * buffers), and the rest (native code and allocations: the SDK's Rust core, stacks).
 *
 * Environment: SOAK_DATABASE_URL, SOAK_TASK_QUEUE, SOAK_FLOOR_TASK_QUEUE.
 */
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { AgentRegistry } from '../src/agents/registry.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { soakFixture } from './soak-agents.js';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`soak-worker: ${name} is required`);
  return value;
};

export interface SoakMemory {
  type: 'memory';
  pid: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
}

const connection = await NativeConnection.connect({
  address: process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233',
});
const store = await openStore(env('SOAK_DATABASE_URL'));
const fixture = soakFixture();
const turnkit = await createWorker({
  connection,
  store,
  agents: new AgentRegistry(fixture.agents),
  model: fixture.model,
  taskQueue: env('SOAK_TASK_QUEUE'),
  worker: { identity: `soak-worker-${process.pid}`, shutdownGraceTime: '1 second' },
});
const floor = await Worker.create({
  connection,
  taskQueue: env('SOAK_FLOOR_TASK_QUEUE'),
  workflowBundle: await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error },
  }),
  activities: { noop: async () => undefined },
  identity: `soak-floor-${process.pid}`,
  shutdownGraceTime: '1 second',
});

process.on('message', (message) => {
  if ((message as { type?: string }).type !== 'memory') return;
  (globalThis as { gc?: () => void }).gc?.();
  const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
  process.send?.({
    type: 'memory',
    pid: process.pid,
    rss,
    heapUsed,
    heapTotal,
    external,
  } satisfies SoakMemory);
});
process.on('SIGTERM', () => {
  turnkit.shutdown();
  floor.shutdown();
});
const running = Promise.all([turnkit.run(), floor.run()]);
console.log('soak-worker ready');
await running;
await store.close();
await connection.close();
process.disconnect?.();
