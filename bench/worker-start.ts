/**
 * A worker process for bench/worker-start-bench.ts: loads TurnKit from TURNKIT_BENCH_MODULES
 * (the compiled `dist/`, run by plain node; or `src/`, run with tsx), opens a SQLite store,
 * creates a worker (TURNKIT_BENCH_BUNDLES=boot: bundling the workflow code at boot) and prints
 * `worker-start {…}` with its phases (ms since the process started) once the worker polls.
 *
 * Environment: TURNKIT_BENCH_MODULES, TURNKIT_BENCH_DATABASE_URL, TURNKIT_BENCH_TASK_QUEUE,
 * TURNKIT_BENCH_BUNDLES (`prebuilt` or `boot`).
 */
import type * as IndexModule from '../src/index.js';
import type * as StoreModule from '../src/store/index.js';
import type * as TestingModule from '../src/testing.js';
import type * as WorkerModule from '../src/worker.js';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`worker-start: ${name} is required`);
  return value;
};
const modules = env('TURNKIT_BENCH_MODULES');
const phases: Record<string, number> = {};
const mark = (name: string) => (phases[name] = Math.round(performance.now()));

const { createWorker } = (await import(`${modules}/worker.js`)) as typeof WorkerModule;
const { defineAgent, AgentRegistry } = (await import(`${modules}/index.js`)) as typeof IndexModule;
const { openStore } = (await import(`${modules}/store/index.js`)) as typeof StoreModule;
const { ScriptedModel } = (await import(`${modules}/testing.js`)) as typeof TestingModule;
mark('imported');
const store = await openStore(env('TURNKIT_BENCH_DATABASE_URL'));
mark('storeOpen');
const worker = await createWorker({
  store,
  agents: new AgentRegistry([defineAgent({ name: 'assistant' })]),
  model: new ScriptedModel({ assistant: () => 'hello' }),
  taskQueue: env('TURNKIT_BENCH_TASK_QUEUE'),
  ...(process.env['TURNKIT_BENCH_BUNDLES'] === 'boot' ? { workflowBundles: false as const } : {}),
});
mark('created');
const running = worker.run();
while (worker.worker.getState() !== 'RUNNING') await new Promise((r) => setImmediate(r));
mark('polling');
console.log(`worker-start ${JSON.stringify(phases)}`);
process.on('SIGTERM', () => worker.shutdown());
await running;
await store.close();
