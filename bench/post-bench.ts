/**
 * `npm run bench`: the conversation inbox (decision 41). On the real Temporal server with a
 * real TurnKit worker in this process (one clock), per run, alternating:
 *   post_idle_round_trip: `client.post()` to a fresh conversation whose lane is not running,
 *     until the receipt returns: one Update-with-Start that starts the lane, whose `acceptPost`
 *     activity writes the message and the turn and starts the turn's workflow;
 *   post_open_lane_round_trip: a second post to the same conversation once its turn finished,
 *     while its lane is still open (the Update alone);
 *   run_round_trip (the baseline): `client.run()` until it returns: the rows written by the
 *     client, then the turn workflow's start.
 * Each also to the turn's end (the bench turn: a model call, a terminal tool, output).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { benchAgent, benchModel } from './bench-agent.js';
import { mergeBenchResults, percentile } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const runs = Number(process.env['BENCH_POST_RUNS'] ?? 30);
const warmup = 3;

const dir = mkdtempSync(join(tmpdir(), 'turnkit-post-bench-'));
const store = await openStore(join(dir, 'post-bench.sqlite'));
const agents = new AgentRegistry([benchAgent]);
const taskQueue = `turnkit-post-bench-${Date.now()}`;
const connection = await NativeConnection.connect({ address });
const temporal = new Client({ connection: await Connection.connect({ address }) });
const worker = await createWorker({ store, agents, model: benchModel, connection, taskQueue });
const client = new TurnKitClient({ store, agents, temporal, taskQueue });

interface Once {
  returnMs: number;
  doneMs: number;
}

async function postOnce(i: number): Promise<{ idle: Once; open: Once }> {
  const conversation = await client.conversation('bench');
  const measure = async (text: string): Promise<Once> => {
    const start = performance.now();
    const receipt = await conversation.post(text);
    const returned = performance.now();
    await (await client.handle(receipt.turnId!)).result();
    return { returnMs: returned - start, doneMs: performance.now() - start };
  };
  const idle = await measure(`post #${i}`);
  const open = await measure(`post again #${i}`);
  return { idle, open };
}

async function runOnce(i: number): Promise<Once> {
  const start = performance.now();
  const run = await client.run('bench', `run #${i}`);
  const returned = performance.now();
  await run.result();
  return { returnMs: returned - start, doneMs: performance.now() - start };
}

const results = await worker.worker.runUntil(async () => {
  for (let i = 0; i < warmup; i++) {
    await postOnce(-1 - i);
    await runOnce(-1 - i);
  }
  const idle: Once[] = [];
  const open: Once[] = [];
  const run: Once[] = [];
  for (let i = 0; i < runs; i++) {
    const posted = await postOnce(i);
    idle.push(posted.idle);
    open.push(posted.open);
    run.push(await runOnce(i));
  }
  const p = (list: Once[], key: keyof Once, at: number) =>
    percentile(
      list.map((once) => once[key]),
      at,
    );
  return {
    post_runs: runs,
    post_idle_round_trip_p50_ms: p(idle, 'returnMs', 50),
    post_idle_round_trip_p99_ms: p(idle, 'returnMs', 99),
    post_open_lane_round_trip_p50_ms: p(open, 'returnMs', 50),
    run_round_trip_p50_ms: p(run, 'returnMs', 50),
    run_round_trip_p99_ms: p(run, 'returnMs', 99),
    post_idle_round_trip_vs_run_p50: p(idle, 'returnMs', 50) / p(run, 'returnMs', 50),
    post_idle_to_turn_end_p50_ms: p(idle, 'doneMs', 50),
    run_to_turn_end_p50_ms: p(run, 'doneMs', 50),
    post_idle_to_turn_end_vs_run_p50: p(idle, 'doneMs', 50) / p(run, 'doneMs', 50),
  };
});

console.log(`\nTurnKit post benchmark (n=${runs}, after ${warmup} warm-up runs)\n`);
for (const [key, value] of Object.entries(results))
  console.log(key.padEnd(44), (Number.isInteger(value) ? String(value) : value.toFixed(2)).padStart(10));
mergeBenchResults({ post_measuredAt: new Date().toISOString(), ...results });
await store.close();
await connection.close();
await temporal.connection.close();
