/**
 * The gateway's model queues (issue 30, decision 43) on the real dev server, with two worker
 * processes: a provider's calls run on its own task queue, whose rate limit the Temporal
 * server enforces for both processes together; the tenant's fairness key rides with each call;
 * a chain whose next model has no queue of its own falls over to the turn's own queue.
 */
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { connectClient, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';
import { providerServer, sendError, sendReply } from '../helpers/openai-sse.js';
import type { WorkerProcess } from '../helpers/worker-process.js';
import { spawnWorker } from '../helpers/worker-process.js';

const arrivals: { model: string; at: number }[] = [];
const server = providerServer((body, res) => {
  const model = String(body['model']);
  arrivals.push({ model, at: Date.now() });
  if (model === 'flaky') return sendError(res, 429, 'rate limited');
  // A 'limited' call is held 3 s: at two calls a second a process with four slots cannot hold
  // them all, so both processes take calls however the server hands out the first ones.
  setTimeout(() => reply(res, body, model), model === 'limited' ? 3_000 : 0);
});

function reply(res: Parameters<typeof sendReply>[0], body: Record<string, unknown>, model: string) {
  sendReply(res, body, 200, {
    id: 'chatcmpl-q',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [
      { index: 0, message: { role: 'assistant', content: `Answered by ${model}.` }, finish_reason: 'stop' },
    ],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  });
}

// The client's view of the agents the worker processes run (the client never calls a model).
const agents = new AgentRegistry([
  defineAgent({ name: 'limited', model: 'gw:limited' }),
  defineAgent({ name: 'spilling', model: ['gw:flaky', 'alt:steady'] }),
]);
const PER_SECOND = 2;

describe.skipIf(!(await requireTemporal()))('gateway model queues', () => {
  let store: Store;
  let client: TurnKitClient;
  let workers: WorkerProcess[] = [];
  const taskQueue = uniqueTaskQueue('gateway-queues');

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = tempSqliteUrl();
    store = await openStore(url);
    const fixture = fileURLToPath(new URL('../fixtures/gateway-worker.ts', import.meta.url));
    workers = ['w1', 'w2'].map((identity) =>
      spawnWorker(
        {
          TURNKIT_DATABASE_URL: url,
          TURNKIT_TEST_TASK_QUEUE: taskQueue,
          GATEWAY_BASE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
          GATEWAY_PER_SECOND: String(PER_SECOND),
          GATEWAY_IDENTITY: identity,
        },
        fixture,
      ),
    );
    await Promise.all(workers.map((w) => w.ready));
    client = new TurnKitClient({
      store,
      agents,
      temporal: await connectClient(),
      taskQueue,
      turnSettings: { maxProviderAttempts: 1 },
    });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await store?.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("gateway: a provider queue's rate limit is shared by two worker processes, and each call carries the tenant's fairness key", async () => {
    arrivals.length = 0;
    const runs = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        client.run('limited', `Question ${i}.`, { principal: { tenant: 'acme', id: `user-${i}` } }),
      ),
    );
    const turns = await Promise.all(runs.map((run) => run.result()));
    expect(turns.every((turn) => turn.status === 'completed')).toBe(true);
    // Ten calls at two a second, whichever process ran them: about 4 s (5 s less a burst);
    // unlimited, the two processes answer all ten in well under a second.
    const times = arrivals.filter((a) => a.model === 'limited').map((a) => a.at);
    expect(times).toHaveLength(10);
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(3_000);
    const identities = new Set<string>();
    for (const run of runs) {
      const events = (await client.temporal.workflow.getHandle(run.workflowId).fetchHistory()).events ?? [];
      const scheduled = events.filter(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'modelStep',
      );
      expect(scheduled).toHaveLength(1);
      const attributes = scheduled[0]!.activityTaskScheduledEventAttributes!;
      expect(attributes.taskQueue?.name).toBe(`${taskQueue}-model-gw`);
      expect(attributes.priority?.fairnessKey).toBe('acme');
      for (const e of events)
        if (e.activityTaskStartedEventAttributes?.identity)
          identities.add(e.activityTaskStartedEventAttributes.identity);
    }
    expect([...identities].sort()).toEqual(['w1', 'w2']);
  }, 60_000);

  it('gateway: a routed chain falls over from the provider queue to the turn queue when the next model has none', async () => {
    arrivals.length = 0;
    const run = await client.run('spilling', 'Say hello.');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Answered by steady.');
    expect(arrivals.map((a) => a.model)).toEqual(['flaky', 'steady']);
    const events = (await client.temporal.workflow.getHandle(run.workflowId).fetchHistory()).events ?? [];
    const queues = events
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'modelStep')
      .map((e) => e.activityTaskScheduledEventAttributes!.taskQueue?.name);
    expect(queues).toEqual([`${taskQueue}-model-gw`, taskQueue]);
    const fallback = (await run.events()).filter((e) => e.type === 'model.fallback');
    expect(fallback.map((e) => e.payload['to'])).toEqual(['alt:steady']);
  }, 60_000);
});
