/**
 * `npm run bench` (gateway part, issue 30): turns against a provider that answers 429 (with
 * `retry-after: 3`) to 30 % of calls, on the real dev server with a real worker, through the
 * AI SDK's OpenAI-compatible provider to a local server. Two runs of BENCH_GATEWAY_TURNS turns
 * (BENCH_GATEWAY_WIDTH at a time): the flaky model alone, whose 429s are retried after the
 * wait the provider asked for; and the chain [flaky, steady] with one attempt per model, whose
 * 429s fall over to the steady model at once. Per run: turns completed, p50 and p90 latency
 * from `run()` to the turn's end, and how many steps failed over. The 429s follow a seeded
 * sequence, so both runs see the same one. Then what a provider's own queue costs (decision
 * 43): BENCH_GATEWAY_TURNS turns one at a time with the model on the turn's queue, and as many
 * with it on a provider queue (`createWorker({ models })`), no 429s: p50 of each.
 */
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { ProviderRegistryModel } from '../src/models/provider-registry.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { providerServer, sendError, sendReply } from '../test/helpers/openai-sse.js';
import { mergeBenchResults, percentile } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const TURNS = Number(process.env['BENCH_GATEWAY_TURNS'] ?? 40);
const WIDTH = Number(process.env['BENCH_GATEWAY_WIDTH'] ?? 4);
const LIMITED_SHARE = 0.3;

/** A seeded sequence (mulberry32), so both runs meet the same 429s. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
let random = seeded(30);
let limited = 0;

const server = providerServer((body, res) => {
  const model = String(body['model']);
  if (model === 'flaky' && random() < LIMITED_SHARE) {
    limited += 1;
    return sendError(res, 429, 'rate limited', { 'retry-after': '3' });
  }
  sendReply(res, body, 200, {
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: 'Done.' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
  });
});

await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;

const alone = defineAgent({ name: 'alone', instructions: 'Be brief.', model: 'gw:flaky' });
const chained = defineAgent({ name: 'chained', instructions: 'Be brief.', model: ['gw:flaky', 'gw:steady'] });
const direct = defineAgent({ name: 'direct', instructions: 'Be brief.', model: 'gw:steady' });
const queued = defineAgent({ name: 'queued', instructions: 'Be brief.', model: 'gwq:steady' });
const agents = new AgentRegistry([alone, chained, direct, queued]);
const store = await openStore(join(mkdtempSync(join(tmpdir(), 'turnkit-gateway-bench-')), 'turnkit.sqlite'));
const taskQueue = `turnkit-gateway-bench-${Date.now()}`;
const gw = createOpenAICompatible({ name: 'gw', baseURL, apiKey: 'sk-local', includeUsage: true });
// The same server as a provider whose calls run on a queue of their own.
const gwq = createOpenAICompatible({ name: 'gwq', baseURL, apiKey: 'sk-local', includeUsage: true });
const worker = await createWorker({
  store,
  agents,
  connection: await NativeConnection.connect({ address }),
  taskQueue,
  model: new ProviderRegistryModel({ providers: { gw, gwq } }),
  models: { gwq: {} },
});
const running = worker.run();
const connection = await Connection.connect({ address });
const temporal = new Client({ connection });

async function bench(agent: string, maxProviderAttempts: number, width = WIDTH) {
  random = seeded(30);
  limited = 0;
  const client = new TurnKitClient({
    store,
    agents,
    temporal,
    taskQueue,
    turnSettings: { maxProviderAttempts },
  });
  const latencies: number[] = [];
  let completed = 0;
  let failovers = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < TURNS) {
        next += 1;
        const start = performance.now();
        const run = await client.run(agent, 'Answer.');
        const turn = await run.result();
        latencies.push(performance.now() - start);
        if (turn.status === 'completed') completed += 1;
        failovers += (await run.events()).filter((e) => e.type === 'model.fallback').length;
      }
    }),
  );
  return {
    completed,
    p50: Math.round(percentile(latencies, 50)),
    p90: Math.round(percentile(latencies, 90)),
    failovers,
    limited,
  };
}

await bench('chained', 1); // warm-up: the worker's caches and the first workflow tasks
const without = await bench('alone', 5);
const withFallback = await bench('chained', 1);
await bench('queued', 1, 1); // warm-up of the provider queue's poller
const onTurnQueue = await bench('direct', 1, 1);
const onProviderQueue = await bench('queued', 1, 1);
const figures = {
  gateway_turns: TURNS,
  gateway_429_share: LIMITED_SHARE,
  gateway_no_fallback_completed: without.completed,
  gateway_no_fallback_p50_ms: without.p50,
  gateway_no_fallback_p90_ms: without.p90,
  gateway_no_fallback_429s: without.limited,
  gateway_fallback_completed: withFallback.completed,
  gateway_fallback_p50_ms: withFallback.p50,
  gateway_fallback_p90_ms: withFallback.p90,
  gateway_fallback_failovers: withFallback.failovers,
  gateway_fallback_429s: withFallback.limited,
  gateway_turn_queue_p50_ms: onTurnQueue.p50,
  gateway_provider_queue_p50_ms: onProviderQueue.p50,
};
console.log(figures);
worker.shutdown();
await running;
await connection.close();
await store.close();
server.close();
mergeBenchResults(figures);
