/**
 * `npm run bench` (long conversations): one conversation of `BENCH_LONG_TURNS` (500) turns, each
 * a 2 KB user message answered by a 2 KB reply, on SQLite with the default compaction policy
 * (the summarizer is the same offline model). Reports `long_conversation_latency_ratio`: the
 * p50 latency of the last ten turns over that of the first ten, from `ask` to the stored
 * result, after ten warm-up turns in another conversation. A turn that read and projected the
 * whole conversation would grow with it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import type { ModelClient } from '../src/models/types.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { countingMessageReads, mergeBenchResults, percentile } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const turns = Number(process.env['BENCH_LONG_TURNS'] ?? 500);
const window = 10;
const TARGET = 1.1;

const text = (label: string) => `${label} `.padEnd(2048, 'lorem ipsum dolor sit amet ');
let summaries = 0;
// An offline model that records nothing (a recording one would itself grow with the history).
const model: ModelClient = {
  chat(request) {
    const compaction = request.metadata.purpose === 'compaction';
    if (compaction) summaries += 1;
    return Promise.resolve({
      parts: [{ type: 'text', text: text(compaction ? `summary ${summaries}` : 'reply') }],
      usage: { inputTokens: 0, outputTokens: 0 },
    });
  },
};

const dir = mkdtempSync(join(tmpdir(), 'turnkit-long-bench-'));
const opened = await openStore(join(dir, 'long.sqlite'));
// Counts the message rows the worker and client read, to show what a turn reads, not only its time.
const reads = countingMessageReads(opened);
const store = reads.store;
const agents = new AgentRegistry([defineAgent({ name: 'long_bench', model: 'offline' })]);
const taskQueue = `turnkit-long-bench-${Date.now()}`;
const connection = await NativeConnection.connect({ address });
const temporal = new Client({ connection: await Connection.connect({ address }) });
const worker = await createWorker({ store, agents, model, connection, taskQueue });
const client = new TurnKitClient({ store, agents, temporal, taskQueue });

const controlTimes: number[] = [];
let controlRows = 0;
const rowsAtStart: number[] = [];
const rowsAtEnd: number[] = [];
const latencies = await worker.worker.runUntil(async () => {
  // Warm up (bundle, caches, JIT) in a conversation of its own, so turns 1–10 are not cold.
  const warmup = await client.conversation('long_bench');
  for (let i = 0; i < window; i++) await (await warmup.ask(text(`warm-up ${i + 1}`))).result();
  const conversation = await client.conversation('long_bench');
  const control = await client.conversation('long_bench');
  const times: number[] = [];
  for (let i = 0; i < turns; i++) {
    if (i === 0 || i === turns - window) rowsAtStart.push(reads.rows());
    if (i === window) rowsAtEnd.push(reads.rows());
    const start = performance.now();
    const run = await conversation.ask(text(`question ${i + 1}`));
    const turn = await run.result();
    times.push(performance.now() - start);
    // Beside each of the last ten turns, a turn of a fresh conversation: turns 1–10 measured in
    // the same minute, under the same load as turns 491–500 (the shared machine is noisy).
    if (i >= turns - window) {
      const [started, rowsBefore] = [performance.now(), reads.rows()];
      await (await control.ask(text(`control ${i + 1}`))).result();
      controlTimes.push(performance.now() - started);
      controlRows += reads.rows() - rowsBefore;
    }
    if (turn.status !== 'completed') throw new Error(`long bench: turn ${i + 1} ended ${turn.status}`);
  }
  rowsAtEnd.push(reads.rows());
  return times;
});

const first = percentile(latencies.slice(0, window), 50);
const last = percentile(latencies.slice(-window), 50);
const results = {
  long_conversation_turns: turns,
  long_conversation_summaries: summaries,
  long_conversation_first_p50_ms: first,
  long_conversation_last_p50_ms: last,
  long_conversation_latency_ratio: last / first,
  long_conversation_control_p50_ms: percentile(controlTimes, 50),
  // Turns 491–500 over turns 1–10 of another conversation run alongside them.
  long_conversation_latency_ratio_interleaved: last / percentile(controlTimes, 50),
  // Message rows read per turn (client and worker), last ten turns over the first ten.
  long_conversation_rows_first: (rowsAtEnd[0]! - rowsAtStart[0]!) / window,
  long_conversation_rows_last: (rowsAtEnd[1]! - rowsAtStart[1]! - controlRows) / window,
  long_conversation_rows_ratio:
    (rowsAtEnd[1]! - rowsAtStart[1]! - controlRows) / (rowsAtEnd[0]! - rowsAtStart[0]!),
};
console.log(`\nTurnKit long-conversation benchmark (${turns} turns of 2 KB messages)\n`);
for (const [key, value] of Object.entries(results))
  console.log(key.padEnd(36), value.toFixed(3).padStart(12));
console.log(
  `long_conversation_latency_ratio <= ${TARGET}: ${results.long_conversation_latency_ratio <= TARGET ? 'met' : 'MISSED'}`,
);
mergeBenchResults({
  long_conversation_measuredAt: new Date().toISOString(),
  ...results,
  long_conversation_latency_ratio_target: `<= ${TARGET}: ${results.long_conversation_latency_ratio <= TARGET ? 'met' : 'missed'}`,
});
await opened.close();
await connection.close();
await temporal.connection.close();
