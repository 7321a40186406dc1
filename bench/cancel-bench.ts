/**
 * `npm run bench` (second part): cancel latency on the real Temporal server with a real
 * TurnKit worker. The agent talks to a local HTTP server speaking the OpenAI Chat Completions
 * API through the AI SDK adapter; the server never answers. Per run, from the moment the app
 * sends the `cancel` signal (`TurnKitClient.cancel`):
 *   (a) until the server sees the in-flight request's socket close (the AbortSignal reached fetch);
 *   (b) until the store says `cancelled` (polled every 5 ms).
 * Server, worker and client share this process, so both clocks are the same. Merges its
 * figures into bench-results.json, keeping whatever the turn bench wrote there.
 *
 * How the cancel reaches the attempt depends on the server: pushed to the worker (worker
 * commands, on with ./temporal-dev.sh) or on a heartbeat's reply. `BENCH_CANCEL_DELIVERY=heartbeat`
 * turns the SDK's worker heartbeating off, so the worker cannot receive pushed cancels, and
 * writes its keys as `cancel_heartbeat_*`: `npm run bench` measures both paths.
 */
import { mkdtempSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime } from '@temporalio/worker';
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
const heartbeatOnly = process.env['BENCH_CANCEL_DELIVERY'] === 'heartbeat';
const prefix = heartbeatOnly ? 'cancel_heartbeat_' : 'cancel_';
const TARGETS: Record<string, number> = heartbeatOnly
  ? {}
  : { cancel_abort_p50_ms: 150, cancel_status_p50_ms: 2_000 };
// Without worker heartbeating the SDK never polls for the cancels a server pushes.
if (heartbeatOnly) Runtime.install({ workerHeartbeatInterval: 0 });

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

async function once(i: number): Promise<{ abortMs: number; statusMs: number; inFlightMs: number }> {
  let arrived!: (at: number) => void;
  let closed!: (at: number) => void;
  const arrival = new Promise<number>((resolve) => (arrived = resolve));
  const closing = new Promise<number>((resolve) => (closed = resolve));
  waiting.push({ arrived, closed });
  const run = await client.run('cancel_bench', `Never answered #${i}`);
  const arrivedAt = await within(arrival, 'the model request');

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
  return { abortMs: closedAt - sent, statusMs: statusAt - sent, inFlightMs: closedAt - arrivedAt };
}

const results = await worker.worker.runUntil(async () => {
  for (let i = 0; i < warmup; i++) await once(-1 - i);
  const abort: number[] = [];
  const status: number[] = [];
  let inFlightMs = 0;
  const heartbeatsBefore = worker.heartbeats.sent;
  for (let i = 0; i < runs; i++) {
    const run = await once(i);
    abort.push(run.abortMs);
    status.push(run.statusMs);
    inFlightMs += run.inFlightMs;
  }
  return {
    [`${prefix}runs`]: runs,
    [`${prefix}delivery`]: worker.heartbeats.delivery,
    [`${prefix}abort_p50_ms`]: percentile(abort, 50),
    [`${prefix}abort_p99_ms`]: percentile(abort, 99),
    [`${prefix}abort_max_ms`]: Math.max(...abort),
    [`${prefix}status_p50_ms`]: percentile(status, 50),
    [`${prefix}status_p99_ms`]: percentile(status, 99),
    [`${prefix}status_max_ms`]: Math.max(...status),
    // The heartbeat cost of one model call in flight (one at a time here: the pacer's fastest).
    [`${prefix}heartbeats_per_call_second`]:
      ((worker.heartbeats.sent - heartbeatsBefore) * 1000) / inFlightMs,
  };
});
if (unexpected > 0) throw new Error(`cancel bench: the model server saw ${unexpected} unexpected request(s)`);

console.log(`\nTurnKit cancel benchmark (n=${runs}, after ${warmup} warm-up runs)\n`);
console.log('metric'.padEnd(36), 'value'.padStart(14), '  target');
const verdicts: Record<string, string> = {};
for (const [key, value] of Object.entries(results)) {
  const target = TARGETS[key];
  const verdict = target === undefined || typeof value !== 'number' ? '' : value <= target ? 'met' : 'missed';
  if (target !== undefined) verdicts[`${key}_target`] = `<= ${target} ms: ${verdict}`;
  console.log(
    key.padEnd(36),
    (typeof value === 'number' && !key.endsWith('runs') ? value.toFixed(1) : String(value)).padStart(14),
    target === undefined ? '' : `  <= ${target} ms ${verdict.toUpperCase()}`,
  );
}

// The turn bench writes the file first; its figures are kept.
mergeBenchResults({ [`${prefix}measuredAt`]: new Date().toISOString(), ...results, ...verdicts });
await new Promise<void>((resolve) => {
  server.closeAllConnections();
  server.close(() => resolve());
});
await store.close();
await connection.close();
await temporal.connection.close();
