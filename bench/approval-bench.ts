/**
 * `npm run bench`: approvals. On the real Temporal server with a real TurnKit worker in this
 * process (one clock), per run:
 *   approval_to_tool_start: from `run.approve()` returning (the Update completed) until the
 *     approved tool's `execute` starts;
 *   approve_update: the `approve` Update's round trip (validator, authorization, result); the
 *     result travels with the workflow task that also schedules the tool, so the tool starts
 *     about when the caller hears back (approve_sent_to_tool_start is the whole path);
 *   baseline, same session: tool_dispatch, from the model returning a tool call that needs no
 *     approval until that tool's `execute` starts.
 * The ratio of the two medians is the figure to watch; the milliseconds depend on the machine.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { defineTool } from '../src/agents/tool.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import type { ModelClient } from '../src/models/types.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { mergeBenchResults, percentile } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const runs = Number(process.env['BENCH_APPROVAL_RUNS'] ?? 30);
const warmup = 3;

let toolStarted: (at: number) => void = () => undefined;
let modelAnswered = 0;
const tool = (name: string, needsApproval: boolean) =>
  defineTool({
    name,
    description: `${name} (bench)`,
    input: z.object({}),
    needsApproval,
    execute: () => {
      toolStarted(performance.now());
      return { ok: true };
    },
  });
const model: ModelClient = {
  chat(request) {
    const done = request.messages.some((m) => m.role === 'tool');
    const name = request.metadata.agentName === 'approval_bench' ? 'approved' : 'plain';
    if (!done) modelAnswered = performance.now();
    return Promise.resolve({
      parts: done
        ? [{ type: 'text', text: 'done' }]
        : [{ type: 'tool_call', id: 'call_1', name, arguments: {} }],
      usage: { inputTokens: 1, outputTokens: 1 },
    });
  },
};

const dir = mkdtempSync(join(tmpdir(), 'turnkit-approval-bench-'));
const store = await openStore(join(dir, 'approval-bench.sqlite'));
const agents = new AgentRegistry([
  defineAgent({ name: 'approval_bench', tools: [tool('approved', true)] }),
  defineAgent({ name: 'dispatch_bench', tools: [tool('plain', false)] }),
]);
const taskQueue = `turnkit-approval-bench-${Date.now()}`;
const connection = await NativeConnection.connect({ address });
const temporal = new Client({ connection: await Connection.connect({ address }) });
const worker = await createWorker({ store, agents, model, connection, taskQueue });
const client = new TurnKitClient({ store, agents, temporal, taskQueue });

const started = () => new Promise<number>((resolve) => (toolStarted = resolve));

async function approvalOnce(i: number): Promise<{ toToolMs: number; updateMs: number; sentMs: number }> {
  const run = await client.run('approval_bench', `approve #${i}`);
  while ((await run.pendingApprovals()).length === 0) await new Promise((r) => setTimeout(r, 5));
  const start = started();
  const sent = performance.now();
  await run.approve('call_1', { principal: 'bench' });
  const returned = performance.now();
  const toolAt = await start;
  await run.result();
  return { toToolMs: toolAt - returned, updateMs: returned - sent, sentMs: toolAt - sent };
}

async function dispatchOnce(i: number): Promise<number> {
  const start = started();
  const run = await client.run('dispatch_bench', `dispatch #${i}`);
  const toolAt = await start;
  await run.result();
  return toolAt - modelAnswered;
}

const results = await worker.worker.runUntil(async () => {
  for (let i = 0; i < warmup; i++) {
    await approvalOnce(-1 - i);
    await dispatchOnce(-1 - i);
  }
  const toTool: number[] = [];
  const update: number[] = [];
  const dispatch: number[] = [];
  const fromSent: number[] = [];
  for (let i = 0; i < runs; i++) {
    const once = await approvalOnce(i);
    toTool.push(once.toToolMs);
    update.push(once.updateMs);
    fromSent.push(once.sentMs);
    dispatch.push(await dispatchOnce(i));
  }
  const approval = percentile(toTool, 50);
  const baseline = percentile(dispatch, 50);
  return {
    approval_runs: runs,
    approval_to_tool_start_p50_ms: approval,
    approval_to_tool_start_p99_ms: percentile(toTool, 99),
    approve_sent_to_tool_start_p50_ms: percentile(fromSent, 50),
    approve_update_p50_ms: percentile(update, 50),
    approve_update_p99_ms: percentile(update, 99),
    tool_dispatch_baseline_p50_ms: baseline,
    approval_to_tool_start_vs_dispatch_p50: approval / baseline,
  };
});

console.log(`\nTurnKit approval benchmark (n=${runs}, after ${warmup} warm-up runs)\n`);
for (const [key, value] of Object.entries(results))
  console.log(key.padEnd(44), (Number.isInteger(value) ? String(value) : value.toFixed(2)).padStart(10));
mergeBenchResults({ approval_measuredAt: new Date().toISOString(), ...results });
await store.close();
await connection.close();
await temporal.connection.close();
