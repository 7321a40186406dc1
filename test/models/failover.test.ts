/**
 * Failover without waiting on the provider that failed (issue 43, audit #7; decision 55), and
 * queue time on a rate-limited provider queue (audit #21; decision 56), on the real dev server
 * against a local server speaking OpenAI's wire format: a rate limit asking for a long wait
 * moves to the next model at once, inside the same activity attempt (or, routed, to the next
 * model's queue), and a backlog on a provider queue waits instead of failing the turn.
 */
import type { AddressInfo } from 'node:net';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ProviderRegistryModel } from '../../src/models/provider-registry.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { providerServer, sendError, sendReply } from '../helpers/openai-sse.js';
import { connectClient, connectNative, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const received: { model: string; at: number }[] = [];
const server = providerServer((body, res) => {
  const model = String(body['model']);
  received.push({ model, at: Date.now() });
  if (model === 'limited') return sendError(res, 429, 'rate limited', { 'retry-after': '600' });
  if (model === 'broken') return sendError(res, 500, 'internal error');
  sendReply(res, body, 200, {
    id: 'chatcmpl-failover',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [
      { index: 0, message: { role: 'assistant', content: `Answered by ${model}.` }, finish_reason: 'stop' },
    ],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  });
});

const helper = defineAgent({ name: 'helper', instructions: 'Be brief.' });

/** The attempts of each `modelStep` activity of the run, in order, and the queue it ran on. */
async function modelAttempts(handle: WorkflowHandle) {
  const events = (await handle.fetchHistory()).events ?? [];
  // On 0.6 runs a turn's first model call is its claim step (decision 82); one whose models
  // have queues of their own only claims (its result has no `step`), and is not counted.
  const claimOnly = new Set(
    events.flatMap((event) => {
      const completed = event.activityTaskCompletedEventAttributes;
      const data = completed?.result?.payloads?.[0]?.data;
      if (!completed || !data) return [];
      const result = JSON.parse(Buffer.from(data).toString('utf8')) as { claim?: unknown; step?: unknown };
      return result.claim && !result.step ? [String(completed.scheduledEventId)] : [];
    }),
  );
  const scheduled = new Map<string, string>();
  const attempts: { queue: string; attempt: number }[] = [];
  for (const event of events) {
    const attributes = event.activityTaskScheduledEventAttributes;
    const name = attributes?.activityType?.name;
    if ((name === 'modelStep' || name === 'claimStep') && !claimOnly.has(String(event.eventId)))
      scheduled.set(String(event.eventId), attributes?.taskQueue?.name ?? '');
    const started = event.activityTaskStartedEventAttributes;
    if (started && scheduled.has(String(started.scheduledEventId)))
      attempts.push({
        queue: scheduled.get(String(started.scheduledEventId))!,
        attempt: started.attempt ?? 0,
      });
  }
  return attempts;
}

describe.skipIf(!(await requireTemporal()))('failover and provider queues', () => {
  let store: Store;
  let worker: TurnKitWorker;
  let running: Promise<void>;
  let client: TurnKitClient;
  const taskQueue = uniqueTaskQueue('failover');
  const agents = new AgentRegistry([helper]);

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    store = await openStore(tempSqliteUrl());
    const provider = (name: string) => createOpenAICompatible({ name, baseURL, apiKey: 'sk-local' });
    worker = await createWorker({
      store,
      agents,
      connection: await connectNative(),
      taskQueue,
      defaultModel: 'gw:steady',
      model: new ProviderRegistryModel({
        providers: { gw: provider('gw'), rq: provider('rq'), slow: provider('slow') },
      }),
      // `rq` and `slow` run on queues of their own; `slow` takes one call every 2 s.
      models: { rq: {}, slow: { perSecond: 0.5 } },
    });
    running = worker.run();
    client = new TurnKitClient({ store, agents, temporal: await connectClient(), taskQueue });
  });

  afterAll(async () => {
    worker?.shutdown();
    await running;
    await store?.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('audit: #7 a 429 asking to wait 600 s moves to the fallback at once, in the same activity attempt; the turn completes on the fallback', async () => {
    received.length = 0;
    const run = await client.run('helper', 'Say hello.', { model: ['gw:limited', 'gw:steady'] });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Answered by steady.');
    // Not five 429s waited out: one, then the fallback.
    expect(received.map((r) => r.model)).toEqual(['limited', 'steady']);
    const fallback = (await run.events()).filter((e) => e.type === 'model.fallback');
    expect(fallback.map((e) => [e.payload['from'], e.payload['to'], e.payload['retry_after_ms']])).toEqual([
      ['gw:limited', 'gw:steady', 600_000],
    ]);
    // No Temporal retry: the step's one activity ran once.
    const handle = client.temporal.workflow.getHandle(run.workflowId);
    expect(await modelAttempts(handle)).toEqual([{ queue: taskQueue, attempt: 1 }]);
  }, 60_000);

  it('audit: #7 a model that used up its attempts on 5xx hands the step over without a Temporal retry', async () => {
    received.length = 0;
    const runner = new TurnKitClient({
      store,
      agents,
      temporal: client.temporal,
      taskQueue,
      turnSettings: { maxProviderAttempts: 1 },
    });
    const run = await runner.run('helper', 'Say hello.', { model: ['gw:broken', 'gw:steady'] });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(received.map((r) => r.model)).toEqual(['broken', 'steady']);
    const handle = client.temporal.workflow.getHandle(run.workflowId);
    expect(await modelAttempts(handle)).toEqual([{ queue: taskQueue, attempt: 1 }]);
  }, 60_000);

  it("audit: #7 routed: a 429 asking to wait 600 s on a provider queue moves to the fallback's queue at once", async () => {
    received.length = 0;
    const run = await client.run('helper', 'Say hello.', { model: ['rq:limited', 'gw:steady'] });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(received.map((r) => r.model)).toEqual(['limited', 'steady']);
    const handle = client.temporal.workflow.getHandle(run.workflowId);
    expect(await modelAttempts(handle)).toEqual([
      { queue: `${taskQueue}-model-rq`, attempt: 1 },
      { queue: taskQueue, attempt: 1 },
    ]);
  }, 60_000);

  it("audit: #21 a backlog on a rate-limited provider queue waits: queue time does not count against the model call's schedule-to-close", async () => {
    received.length = 0;
    // One call every 2 s on the `slow` queue, and a model call allowed 3 s from schedule to close.
    const hurried = new TurnKitClient({
      store,
      agents,
      temporal: client.temporal,
      taskQueue,
      turnSettings: { model: { startToCloseTimeout: '3 seconds', scheduleToCloseTimeout: '3 seconds' } },
    });
    const runs = await Promise.all(
      Array.from({ length: 5 }, (_, i) => hurried.run('helper', `Question ${i}.`, { model: 'slow:steady' })),
    );
    const turns = await Promise.all(runs.map((run) => run.result()));
    expect(turns.map((turn) => turn.error?.message ?? turn.status)).toEqual(Array(5).fill('completed'));
    // The queue's limit held them back: the last call reached the provider well after the first.
    const times = received.map((r) => r.at);
    expect(times).toHaveLength(5);
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(3_000);
  }, 60_000);
});
