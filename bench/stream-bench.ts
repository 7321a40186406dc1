/**
 * `npm run bench`: live-stream latency, from the provider emitting a delta to `run.stream()`
 * yielding it, on the real Temporal server with a real TurnKit worker, on SQLite and on
 * PostgreSQL. The provider is the AI SDK's MockLanguageModelV4 streaming numbered tokens, one
 * every `BENCH_STREAM_GAP_MS` (20 ms); the time each token is handed to the SDK is kept, and
 * when a part carrying it reaches the reader, the difference is one sample. Worker, provider
 * and reader share this process, so both clocks are the same. Writes stream_delta_p50_ms and
 * stream_delta_p99_ms (SQLite), the same keys suffixed _sqlite and _postgres, and the number
 * of delta parts per provider delta (the batching).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { MockLanguageModelV4 } from 'ai/test';
import pg from 'pg';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { AiSdkModel } from '../src/models/ai-sdk-model.js';
import { openStore } from '../src/store/index.js';
import { PostgresStore } from '../src/store/postgres-store.js';
import type { Store } from '../src/store/types.js';
import { createWorker } from '../src/worker.js';
import { mergeBenchResults, percentile } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const runs = Number(process.env['BENCH_STREAM_RUNS'] ?? 6);
const tokensPerRun = Number(process.env['BENCH_STREAM_TOKENS'] ?? 50);
const gapMs = Number(process.env['BENCH_STREAM_GAP_MS'] ?? 20);
const pgUrl =
  process.env['BENCH_DATABASE_URL'] ??
  process.env['TURNKIT_TEST_DATABASE_URL'] ??
  'postgres://postgres@127.0.0.1:5432/turnkit_test';

/** When each token was handed to the SDK, by token. */
const emitted = new Map<string, number>();
let runTag = '';

const model = new MockLanguageModelV4({
  doStream: async () => {
    const tag = runTag;
    let i = 0;
    const stream = new ReadableStream<LanguageModelV4StreamPart>({
      start(controller) {
        controller.enqueue({ type: 'stream-start', warnings: [] });
        controller.enqueue({ type: 'text-start', id: 't' });
      },
      async pull(controller) {
        await new Promise((resolve) => setTimeout(resolve, gapMs));
        if (i < tokensPerRun) {
          const token = `<${tag}.${i++}>`;
          emitted.set(token, performance.now());
          controller.enqueue({ type: 'text-delta', id: 't', delta: token });
          return;
        }
        controller.enqueue({ type: 'text-end', id: 't' });
        controller.enqueue({
          type: 'finish',
          finishReason: { unified: 'stop', raw: 'stop' },
          usage: {
            inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
            outputTokens: { total: tokensPerRun, text: tokensPerRun, reasoning: 0 },
          },
        });
        controller.close();
      },
    });
    return { stream };
  },
});

async function measure(store: Store, label: string): Promise<{ latencies: number[]; parts: number }> {
  const agent = defineAgent({ name: 'stream_bench', model: 'bench-model' });
  const agents = new AgentRegistry([agent]);
  const taskQueue = `turnkit-stream-bench-${label}-${Date.now()}`;
  const connection = await NativeConnection.connect({ address });
  const temporal = new Client({ connection: await Connection.connect({ address }) });
  const worker = await createWorker({
    store,
    agents,
    model: new AiSdkModel({ provider: () => model, maxRetries: 0 }),
    connection,
    taskQueue,
  });
  const client = new TurnKitClient({ store, agents, temporal, taskQueue });
  const latencies: number[] = [];
  let parts = 0;
  try {
    await worker.worker.runUntil(async () => {
      for (let r = -1; r < runs; r++) {
        runTag = `${label}${r}`;
        const run = await client.run('stream_bench', `stream #${r}`);
        for await (const part of run.stream()) {
          if (part.type !== 'text.delta') continue;
          const now = performance.now();
          if (r >= 0) parts += 1;
          for (const token of part.text.match(/<[^>]+>/g) ?? []) {
            const at = emitted.get(token);
            // Run -1 warms the worker up and is not counted.
            if (at !== undefined && r >= 0) latencies.push(now - at);
          }
        }
        const turn = await run.turn();
        if (turn.status !== 'completed') throw new Error(`stream bench: turn ended ${turn.status}`);
      }
    });
  } finally {
    await connection.close();
    await temporal.connection.close();
  }
  if (latencies.length !== runs * tokensPerRun)
    throw new Error(`stream bench: ${latencies.length} of ${runs * tokensPerRun} deltas reached the reader`);
  return { latencies, parts };
}

function keys(suffix: string, result: { latencies: number[]; parts: number }): Record<string, number> {
  const round = (value: number) => Math.round(value * 10) / 10;
  return {
    [`stream_delta_p50_ms${suffix}`]: round(percentile(result.latencies, 50)),
    [`stream_delta_p99_ms${suffix}`]: round(percentile(result.latencies, 99)),
    [`stream_parts_per_delta${suffix}`]: Math.round((result.parts / result.latencies.length) * 1000) / 1000,
  };
}

const results: Record<string, number> = {
  stream_runs: runs,
  stream_tokens_per_run: tokensPerRun,
  stream_gap_ms: gapMs,
};

const sqlite = await openStore(join(mkdtempSync(join(tmpdir(), 'turnkit-stream-bench-')), 'stream.sqlite'));
try {
  const measured = await measure(sqlite, 's');
  Object.assign(results, keys('', measured), keys('_sqlite', measured));
} finally {
  await sqlite.close();
}

const schema = `turnkit_stream_bench_${randomBytes(4).toString('hex')}`;
let postgres: PostgresStore | null = null;
try {
  postgres = await PostgresStore.open(pgUrl, { schema });
} catch (error) {
  console.warn(
    `stream bench: PostgreSQL unreachable at ${pgUrl}, its keys are left out:`,
    (error as Error).message,
  );
}
if (postgres) {
  try {
    Object.assign(results, keys('_postgres', await measure(postgres, 'p')));
  } finally {
    await postgres.close();
    const admin = new pg.Client({ connectionString: pgUrl });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

console.log(results);
const target = 50;
for (const key of ['stream_delta_p50_ms', 'stream_delta_p50_ms_postgres']) {
  if (key in results)
    console.log(
      `${key}: ${results[key]} ms (target ≤ ${target} ms): ${results[key]! <= target ? 'met' : 'NOT met'}`,
    );
}
mergeBenchResults(results);
