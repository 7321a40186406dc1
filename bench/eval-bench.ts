/**
 * An evaluation of EVAL_CASES (100) recorded cases with replayed tools, on one in-process
 * worker against the dev server, with a scripted model that takes EVAL_MODEL_DELAY_MS (300)
 * per call (two calls per case). For each concurrency in EVAL_CONCURRENCY (8,16,32): the wall
 * time, the most cases that ran at once, and the floor the model's delays set alone. Not in CI:
 * `npx tsx bench/eval-bench.ts` (docs/decisions/049-replay-model.md).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { defineTool } from '../src/agents/tool.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { evaluate } from '../src/eval/evaluate.js';
import { ScriptedModel } from '../src/models/scripted-model.js';
import type { ModelRequest } from '../src/models/types.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const cases = Number(process.env['EVAL_CASES'] ?? 100);
const delayMs = Number(process.env['EVAL_MODEL_DELAY_MS'] ?? 300);
const concurrencies = (process.env['EVAL_CONCURRENCY'] ?? '8,16,32').split(',').map(Number);

const lookup = defineTool({
  name: 'lookup_order',
  description: 'Looks an order up.',
  input: z.object({ orderId: z.number() }),
  execute: ({ orderId }) => ({ orderId, status: 'shipped' }),
});
const agent = defineAgent({ name: 'bench_eval', instructions: 'Look the order up.', tools: [lookup] });

function answer(request: ModelRequest) {
  const last = request.messages.at(-1);
  const orderId = Number(/order (\d+)/.exec(request.messages[0]?.content ?? '')?.[1] ?? 0);
  const usage = { inputTokens: 100, outputTokens: 20, cost: 0.001 };
  if (last?.role === 'tool') return { text: `Order ${orderId} is shipped.`, usage, delayMs };
  return { toolCalls: [{ name: 'lookup_order', arguments: { orderId } }], usage, delayMs };
}

async function main(): Promise<void> {
  const store = await openStore(join(mkdtempSync(join(tmpdir(), 'turnkit-eval-bench-')), 'bench.sqlite'));
  const agents = new AgentRegistry([agent]);
  const taskQueue = `turnkit-eval-bench-${process.pid}`;
  const worker = await createWorker({
    store,
    agents,
    model: new ScriptedModel({ '*': answer }),
    connection: await NativeConnection.connect({ address }),
    taskQueue,
    worker: { maxConcurrentActivityTaskExecutions: 200, maxConcurrentWorkflowTaskExecutions: 200 },
  });
  const running = worker.run();
  const connection = await Connection.connect({ address });
  const client = new TurnKitClient({ store, agents, temporal: new Client({ connection }), taskQueue });
  const recordStart = Date.now();
  const handles = await Promise.all(
    Array.from({ length: cases }, (_, i) => client.run(agent, `Where is order ${i + 1}?`)),
  );
  await Promise.all(handles.map((handle) => handle.result()));
  console.log(`recorded ${cases} runs in ${Date.now() - recordStart} ms`);
  const rows = [];
  for (const concurrency of concurrencies) {
    const cpu = process.cpuUsage();
    const report = await evaluate({ client, agent, cases: { recorded: { limit: cases } }, concurrency });
    const used = process.cpuUsage(cpu);
    const floorMs = Math.ceil(cases / concurrency) * 2 * delayMs;
    rows.push({
      concurrency,
      cases: report.cases.length,
      passed: report.summary[0]!.passed,
      wall_ms: report.wallMs,
      max_parallel: report.maxParallel,
      floor_ms: floorMs,
      wall_vs_floor: Number((report.wallMs / floorMs).toFixed(2)),
      cases_per_s: Number((report.cases.length / (report.wallMs / 1000)).toFixed(2)),
      process_cpu_ms: Math.round((used.user + used.system) / 1000),
      latency_p50_ms: report.summary[0]!.latencyP50Ms,
    });
  }
  console.table(rows);
  console.log(JSON.stringify({ cases, model_delay_ms: delayMs, runs: rows }));
  worker.shutdown();
  await running;
  await connection.close();
  await store.close();
}

await main();
