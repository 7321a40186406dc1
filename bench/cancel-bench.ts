/**
 * `npm run bench` (second part): cancel latency on the real Temporal server with a real
 * TurnKit worker. The agent talks to a local HTTP server speaking the OpenAI Chat Completions
 * API through the AI SDK adapter; the server never answers. Per run, from the moment the app
 * sends the `cancel` signal (`TurnKitClient.cancel`):
 *   (a) until the server sees the in-flight request's socket close (the AbortSignal reached fetch);
 *   (b) until the store says `cancelled` (polled every 5 ms).
 * Server, worker and client share this process, so both clocks are the same. Merges its
 * figures into bench-results.json, keeping whatever the turn bench wrote there.
 */
import { mkdtempSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { createModelClient } from '../src/models/providers.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { mergeBenchResults, percentile } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const runs = Number(process.env['BENCH_CANCEL_RUNS'] ?? 30);
const warmup = 3;
const perRunTimeoutMs = 20_000;
const TARGETS = { cancel_abort_p50_ms: 1_000, cancel_status_p50_ms: 2_000 } as const;

function within<T>(promise: Promise<T>, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`cancel bench: ${what} not seen in ${perRunTimeoutMs} ms`)),
      perRunTimeoutMs,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** The never-answering OpenAI endpoint: reports each request's arrival and its socket closing. */
interface Pending {
  arrived: (at: number) => void;
  closed: (at: number) => void;
}
const waiting: Pending[] = [];
let unexpected = 0;
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  const pending = waiting.shift();
  if (!pending || req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
    unexpected += 1;
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'cancel bench: unexpected request' } }));
    return;
  }
  // Closing before the response ended means the client aborted the request.
  res.on('close', () => {
    if (!res.writableEnded) pending.closed(performance.now());
  });
  req.resume();
  pending.arrived(performance.now());
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;

const dir = mkdtempSync(join(tmpdir(), 'turnkit-cancel-bench-'));
const store = await openStore(join(dir, 'cancel-bench.sqlite'));
const agent = defineAgent({ name: 'cancel_bench', model: 'bench-model' });
const agents = new AgentRegistry([agent]);
const taskQueue = `turnkit-cancel-bench-${Date.now()}`;
const connection = await NativeConnection.connect({ address });
const temporal = new Client({ connection: await Connection.connect({ address }) });
const worker = await createWorker({
  store,
  agents,
  // maxRetries 0: an aborted request is never re-sent by the SDK.
  model: createModelClient({ provider: 'openai', apiKey: 'sk-bench', baseURL, maxRetries: 0 }),
  connection,
  taskQueue,
});
const client = new TurnKitClient({ store, agents, temporal, taskQueue });

async function once(i: number): Promise<{ abortMs: number; statusMs: number }> {
  let arrived!: (at: number) => void;
  let closed!: (at: number) => void;
  const arrival = new Promise<number>((resolve) => (arrived = resolve));
  const closing = new Promise<number>((resolve) => (closed = resolve));
  waiting.push({ arrived, closed });
  const run = await client.run('cancel_bench', `Never answered #${i}`);
  await within(arrival, 'the model request');

  const sent = performance.now();
  await client.cancel(run.turnId);
  const cancelledAt = (async () => {
    for (;;) {
      if ((await store.loadTurn(run.turnId)).status === 'cancelled') return performance.now();
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  const [closedAt, statusAt] = await Promise.all([
    within(closing, 'the socket close'),
    within(cancelledAt, 'the cancelled status'),
  ]);
  const turn = await run.result();
  if (turn.status !== 'cancelled') throw new Error(`cancel bench: turn ended ${turn.status}`);
  return { abortMs: closedAt - sent, statusMs: statusAt - sent };
}

const results = await worker.worker.runUntil(async () => {
  for (let i = 0; i < warmup; i++) await once(-1 - i);
  const abort: number[] = [];
  const status: number[] = [];
  for (let i = 0; i < runs; i++) {
    const { abortMs, statusMs } = await once(i);
    abort.push(abortMs);
    status.push(statusMs);
  }
  return {
    cancel_runs: runs,
    cancel_abort_p50_ms: percentile(abort, 50),
    cancel_abort_p99_ms: percentile(abort, 99),
    cancel_abort_max_ms: Math.max(...abort),
    cancel_status_p50_ms: percentile(status, 50),
    cancel_status_p99_ms: percentile(status, 99),
    cancel_status_max_ms: Math.max(...status),
  };
});
if (unexpected > 0) throw new Error(`cancel bench: the model server saw ${unexpected} unexpected request(s)`);

console.log(`\nTurnKit cancel benchmark (n=${runs}, after ${warmup} warm-up runs)\n`);
console.log('metric'.padEnd(30), 'value'.padStart(12), '  target');
const verdicts: Record<string, string> = {};
for (const [key, value] of Object.entries(results)) {
  const target = TARGETS[key as keyof typeof TARGETS];
  const verdict = target === undefined ? '' : value <= target ? 'met' : 'missed';
  if (target !== undefined) verdicts[`${key}_target`] = `<= ${target} ms: ${verdict}`;
  console.log(
    key.padEnd(30),
    (key === 'cancel_runs' ? String(value) : value.toFixed(1)).padStart(12),
    target === undefined ? '' : `  <= ${target} ms ${verdict.toUpperCase()}`,
  );
}

// The turn bench writes the file first; its figures are kept.
mergeBenchResults({ cancel_measuredAt: new Date().toISOString(), ...results, ...verdicts });
await new Promise<void>((resolve) => {
  server.closeAllConnections();
  server.close(() => resolve());
});
await store.close();
await connection.close();
await temporal.connection.close();
