/**
 * `npm run bench` (failover, issue 43 #7, decision 55): BENCH_FAILOVER_TURNS turns, one at a
 * time, on the real dev server with a real worker, whose chain's first model answers every
 * call with 429 and `retry-after: 600` from a local server speaking OpenAI's wire format, and
 * whose second answers at once. `failover_ms_p50`: from the moment the server sent the
 * primary's error to the moment the fallback's request arrived, on the turn's own queue (the
 * next model is asked inside the same activity attempt); `failover_routed_ms_p50`: the same
 * when the primary runs on a provider queue of its own (decision 43) and the fallback is
 * scheduled on the turn's queue.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
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
const TURNS = Number(process.env['BENCH_FAILOVER_TURNS'] ?? 20);

let errorSentAt: number | undefined;
const gaps: number[] = [];
const server = providerServer((body, res) => {
  const model = String(body['model']);
  if (model === 'limited') {
    sendError(res, 429, 'rate limited', { 'retry-after': '600' });
    errorSentAt = performance.now();
    return;
  }
  if (errorSentAt !== undefined) gaps.push(performance.now() - errorSentAt);
  errorSentAt = undefined;
  sendReply(res, body, 200, {
    id: 'chatcmpl-failover',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: 'Done.' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
const provider = (name: string) => createOpenAICompatible({ name, baseURL, apiKey: 'sk-local' });

const agents = new AgentRegistry([
  defineAgent({ name: 'direct', instructions: 'Be brief.', model: ['gw:limited', 'gw:steady'] }),
  defineAgent({ name: 'routed', instructions: 'Be brief.', model: ['rq:limited', 'gw:steady'] }),
]);
const store = await openStore(join(mkdtempSync(join(tmpdir(), 'turnkit-failover-bench-')), 'turnkit.sqlite'));
const taskQueue = `turnkit-failover-bench-${Date.now()}`;
const worker = await createWorker({
  store,
  agents,
  connection: await NativeConnection.connect({ address }),
  taskQueue,
  model: new ProviderRegistryModel({ providers: { gw: provider('gw'), rq: provider('rq') } }),
  models: { rq: {} },
});
const running = worker.run();
const connection = await Connection.connect({ address });
const client = new TurnKitClient({ store, agents, temporal: new Client({ connection }), taskQueue });

/** The failover gaps of `TURNS` turns of `agent`, after two warm-up turns; and how many completed. */
async function failovers(agent: string) {
  for (let i = 0; i < 2; i += 1) await (await client.run(agent, 'Answer.')).result();
  gaps.length = 0;
  let completed = 0;
  for (let i = 0; i < TURNS; i += 1)
    if ((await (await client.run(agent, 'Answer.')).result()).status === 'completed') completed += 1;
  return { completed, p50: Math.round(percentile(gaps, 50)), p90: Math.round(percentile(gaps, 90)) };
}

const direct = await failovers('direct');
const routed = await failovers('routed');
const figures = {
  failover_turns: TURNS,
  failover_completed: direct.completed,
  failover_ms_p50: direct.p50,
  failover_ms_p90: direct.p90,
  failover_routed_completed: routed.completed,
  failover_routed_ms_p50: routed.p50,
  failover_routed_ms_p90: routed.p90,
};
console.log(figures);
worker.shutdown();
await running;
await connection.close();
await store.close();
server.close();
mergeBenchResults(figures);
