/**
 * The model gateway (issue 30) on the real dev server: fallback chains, the provider's
 * `retry-after`, and errors of every kind, against a local server speaking OpenAI's wire
 * format whose answer depends on the model asked: 429 with `retry-after`, 529, 500, 400, a
 * reset connection, a hang, or a completion.
 */
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { customProvider } from 'ai';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ProviderRegistryModel } from '../../src/models/provider-registry.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { stateQuery } from '../../src/workflows/contract.js';
import { connectClient, connectNative, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';
import { providerServer, sendError, sendReply } from '../helpers/openai-sse.js';

/** What the server does for a model: each call takes the next behaviour; the last one repeats. */
type Behaviour = 'ok' | '429' | '429-after-2' | '529' | '500' | '400' | 'reset' | 'hang';
const plans = new Map<string, Behaviour[]>();
const received: { model: string; at: number; body: Record<string, unknown> }[] = [];

function answer(res: ServerResponse, body: Record<string, unknown>, model: string, behaviour: Behaviour) {
  const error = (status: number, message: string, headers: Record<string, string> = {}) =>
    sendError(res, status, message, headers);
  switch (behaviour) {
    case '429':
      return error(429, `rate limited (${model})`, { 'retry-after-ms': '50' });
    case '429-after-2':
      return error(429, `rate limited (${model})`, { 'retry-after': '2' });
    case '529':
      return error(529, `overloaded (${model})`);
    case '500':
      return error(500, `internal error (${model})`);
    case '400':
      return error(400, `bad request (${model})`);
    case 'reset':
      return res.socket?.destroy();
    case 'hang':
      return; // never answers; the client's timeout gives up
    case 'ok':
      if (req(body) === 'anthropic')
        return sendReply(res, body, 200, {
          id: `msg_${received.length}`,
          type: 'message',
          role: 'assistant',
          model,
          content: [{ type: 'text', text: `Answered by ${model}.` }],
          stop_reason: 'end_turn',
          usage: { input_tokens: 10, output_tokens: 5 },
        });
      return sendReply(res, body, 200, {
        id: `chatcmpl-${received.length}`,
        object: 'chat.completion',
        created: 1,
        model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: `Answered by ${model}.` },
            finish_reason: 'stop',
          },
        ],
        usage: { prompt_tokens: 1_000, completion_tokens: 1_000, total_tokens: 2_000 },
      });
  }
}

/** Which wire format a request body is in: Anthropic's Messages API sends `max_tokens` and a `system` field. */
const req = (body: Record<string, unknown>) =>
  'system' in body || 'anthropic_version' in body ? 'anthropic' : 'openai';

const server = providerServer((body, res) => {
  const model = String(body['model']);
  received.push({ model, at: Date.now(), body });
  const plan = plans.get(model) ?? ['ok'];
  answer(res, body, model, plan.length > 1 ? plan.shift()! : plan[0]!);
});

const helper = defineAgent({ name: 'helper', instructions: 'Be brief.' });
const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  input: z.object({ word: z.string() }),
  execute: ({ word }) => ({ meaning: word }),
});
const note = defineTool({
  name: 'note',
  description: 'Takes a note.',
  input: z.object({ text: z.string() }),
  execute: () => 'noted',
});
const cached = defineAgent({ name: 'cached', instructions: 'Answer from the notes.', tools: [lookup, note] });
const chained = defineAgent({ name: 'chained', instructions: 'Be brief.', model: ['gw:flaky', 'gw:steady'] });

describe.skipIf(!(await requireTemporal()))('gateway', () => {
  let store: Store;
  let worker: TurnKitWorker;
  let running: Promise<void>;
  let client: TurnKitClient;
  const agents = new AgentRegistry([helper, chained, cached]);

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    store = await openStore(tempSqliteUrl());
    const taskQueue = uniqueTaskQueue('gateway');
    const gw = createOpenAICompatible({ name: 'gw', baseURL, apiKey: 'sk-local', includeUsage: true });
    // OpenAI's own provider on its Chat Completions path, and Anthropic's Messages API.
    const openai = createOpenAI({ baseURL, apiKey: 'sk-local' });
    const oai = customProvider({ languageModels: { 'cache-model': openai.chat('cache-model') } });
    const claude = createAnthropic({ baseURL, apiKey: 'sk-ant-local' });
    worker = await createWorker({
      store,
      agents,
      connection: await connectNative(),
      taskQueue,
      defaultModel: 'gw:steady',
      model: new ProviderRegistryModel({ providers: { gw, oai, claude }, timeoutMs: 1_500 }),
      cost: { costRates: { flaky: { input: 100, output: 100 }, steady: { input: 1, output: 2 } } },
    });
    running = worker.run();
    client = new TurnKitClient({
      store,
      agents,
      temporal: await connectClient(),
      taskQueue,
      turnSettings: { maxProviderAttempts: 2 },
    });
  });

  afterAll(async () => {
    worker?.shutdown();
    await running;
    await store?.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('gateway: after the first model used up its attempts on 429s, the second serves the step, recorded on the message, in events, usage, cost and the UI', async () => {
    received.length = 0;
    plans.set('flaky', ['429']);
    const run = await client.run('chained', 'Say hello.');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Answered by steady.');
    // Two attempts on flaky (maxProviderAttempts), then steady at once.
    expect(received.map((r) => r.model)).toEqual(['flaky', 'flaky', 'steady']);
    const events = await run.events();
    const fallback = events.filter((e) => e.type === 'model.fallback');
    expect(fallback.map((e) => [e.payload['from'], e.payload['to']])).toEqual([['gw:flaky', 'gw:steady']]);
    expect(String(fallback[0]!.payload['error'])).toContain('429');
    const completed = events.filter((e) => e.type === 'model.completed');
    expect(completed.map((e) => e.payload['requested_model'])).toEqual(['gw:steady']);
    const assistant = (await store.listMessages(turn.conversationId)).filter((m) => m.role === 'assistant');
    expect(assistant.map((m) => m.metadata['model'])).toEqual(['gw:steady']);
    // Charged at steady's rates: 1,000 × $1 + 1,000 × $2 per million tokens.
    expect(turn.cost).toBeCloseTo(0.003, 9);
    const state = (turn.options['state'] ?? {}) as Record<string, unknown>;
    expect(state['model_usage']).toEqual({
      'gw:steady': { calls: 1, input_tokens: 1_000, output_tokens: 1_000, cost: expect.closeTo(0.003, 9) },
    });
    // The Temporal UI's current details and the state query name the model that served.
    const handle = client.temporal.workflow.getHandle(run.workflowId);
    expect((await handle.query(stateQuery)).model).toBe('gw:steady');
    const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toContain('gw:steady');
  });

  it('gateway: a 400 fails the step at once; the next model is never asked', async () => {
    received.length = 0;
    plans.set('flaky', ['400']);
    const run = await client.run('chained', 'Say hello.');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error?.class).toBe('TurnKit::ModelError');
    expect(turn.error?.message).toContain('400');
    expect(received.map((r) => r.model)).toEqual(['flaky']);
    expect((await run.events()).some((e) => e.type === 'model.fallback')).toBe(false);
  });

  it('gateway: a retry-after: 2 is honoured: the next attempt starts 2 s or more after the 429', async () => {
    received.length = 0;
    plans.set('patient', ['429-after-2', 'ok']);
    const run = await client.run('helper', 'Say hello.', { model: 'gw:patient' });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const requested = (await run.events()).filter((e) => e.type === 'model.requested');
    expect(requested).toHaveLength(2);
    const gap = Date.parse(requested[1]!.createdAt) - Date.parse(requested[0]!.createdAt);
    expect(gap).toBeGreaterThanOrEqual(2_000);
    // The SDK retried nothing itself: one request per engine attempt.
    expect(received.map((r) => r.model)).toEqual(['patient', 'patient']);
  });

  it('gateway: a 529, a 500, a reset connection and a hang each hand the step to the next model', async () => {
    received.length = 0;
    for (const [model, behaviour] of [
      ['overloaded', '529'],
      ['broken', '500'],
      ['resetting', 'reset'],
      ['hanging', 'hang'],
    ] as const)
      plans.set(model, [behaviour]);
    const chain = ['gw:overloaded', 'gw:broken', 'gw:resetting', 'gw:hanging', 'gw:steady'];
    const run = await client.run('helper', 'Say hello.', { model: chain });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Answered by steady.');
    expect(turn.model).toBe('gw:overloaded');
    const fallback = (await run.events()).filter((e) => e.type === 'model.fallback');
    expect(fallback.map((e) => e.payload['to'])).toEqual(chain.slice(1));
    expect(String(fallback[3]!.payload['error'])).toContain('timed out');
  }, 60_000);

  it('gateway: a chain naming an unknown provider fails the turn with a ConfigError before any request', async () => {
    received.length = 0;
    const run = await client.run('helper', 'Say hello.', { model: ['gw:steady', 'nowhere:model'] });
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error?.class).toBe('TurnKit::ConfigError');
    expect(turn.error?.message).toContain('nowhere');
    expect(received).toHaveLength(0);
  });

  it('gateway: a provider that answers 429 for ever ends the step with a ModelError naming every model tried', async () => {
    received.length = 0;
    plans.set('limited-a', ['429']);
    plans.set('limited-b', ['429']);
    const run = await client.run('helper', 'Say hello.', { model: ['gw:limited-a', 'gw:limited-b'] });
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error?.class).toBe('TurnKit::ModelError');
    expect(turn.error?.message).toMatch(
      /every model failed: gw:limited-a \(.*429.*\); gw:limited-b \(.*429.*\)/,
    );
    expect(received.map((r) => r.model)).toEqual(['limited-a', 'limited-a', 'limited-b', 'limited-b']);
  });

  it('gateway: the stable prefix is marked for the provider cache on the registry path, byte-identical across three turns of one conversation', async () => {
    received.length = 0;
    const conversation = await client.conversation('cached', { model: 'oai:cache-model' });
    for (const question of ['What is durable?', 'And lasting?', 'And resilient?'])
      expect((await (await conversation.ask(question)).result()).status).toBe('completed');
    expect(received).toHaveLength(3);
    const prefix = received.map(({ body }) => {
      const messages = body['messages'] as { role: string; content: unknown }[];
      return JSON.stringify({ system: messages[0], tools: body['tools'], key: body['prompt_cache_key'] });
    });
    expect(new Set(prefix).size).toBe(1);
    expect(received[0]!.body['prompt_cache_key']).toMatch(/^turnkit-[0-9a-f]{32}$/);
    // The conversation itself grows behind the prefix.
    expect((received[2]!.body['messages'] as unknown[]).length).toBeGreaterThan(
      (received[0]!.body['messages'] as unknown[]).length,
    );

    received.length = 0;
    const run = await client.run('cached', 'What is durable?', { model: 'claude:claude-local' });
    expect((await run.result()).status).toBe('completed');
    const body = received[0]!.body as {
      system: { cache_control?: unknown }[];
      tools: { name: string; cache_control?: unknown }[];
    };
    expect(body.system[0]!.cache_control).toEqual({ type: 'ephemeral' });
    expect(body.tools.at(-1)!.cache_control).toEqual({ type: 'ephemeral' });
    expect(body.tools.slice(0, -1).every((tool) => tool.cache_control === undefined)).toBe(true);
  });
});
