/**
 * Prompt caching over the transcript (issue 43, audit #9; decision 54) on the real dev server:
 * a 20-call tool loop against a local server speaking Anthropic's Messages API that counts the
 * input tokens it could read from its cache by the breakpoints it receives
 * (`test/helpers/anthropic-cache.ts`); the same through a routed fallback chain; and OpenAI's
 * `promptCacheKey`, one per conversation.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { customProvider } from 'ai';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ProviderRegistryModel } from '../../src/models/provider-registry.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { anthropicCacheServer, toolLoopAnswer } from '../helpers/anthropic-cache.js';
import { providerServer, sendReply } from '../helpers/openai-sse.js';
import { connectClient, connectNative, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const LOOP_CALLS = 20;
const readPage = defineTool({
  name: 'read_page',
  description: 'Reads one page of the report.',
  input: z.object({ page: z.number() }),
  readOnly: true,
  execute: ({ page }) => `Page ${page}: ${'the durable record of what was decided. '.repeat(30)}`,
});
const reader = defineAgent({
  name: 'reader',
  instructions: 'Read the report page by page, then summarize it.',
  tools: [readPage],
  limits: { maxIterations: 40 },
});
const talker = defineAgent({ name: 'talker', instructions: 'Be brief.', model: 'oai:keyed' });

const anthropic = anthropicCacheServer((body, call) =>
  String(body['model']) === 'busy' ? { status: 529 } : toolLoopAnswer('read_page', LOOP_CALLS)(body, call),
);
const keys: unknown[] = [];
const openaiServer = providerServer((body, res) => {
  keys.push(body['prompt_cache_key']);
  sendReply(res, body, 200, {
    id: 'chatcmpl-key',
    object: 'chat.completion',
    created: 1,
    model: 'keyed',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello.' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  });
});

describe.skipIf(!(await requireTemporal()))('prompt caching over the transcript', () => {
  let store: Store;
  let worker: TurnKitWorker;
  let running: Promise<void>;
  let client: TurnKitClient;
  const agents = new AgentRegistry([reader, talker]);

  beforeAll(async () => {
    const claudeURL = await anthropic.listen();
    await new Promise<void>((resolve) => openaiServer.listen(0, '127.0.0.1', resolve));
    const openaiURL = `http://127.0.0.1:${(openaiServer.address() as AddressInfo).port}/v1`;
    store = await openStore(tempSqliteUrl());
    const taskQueue = uniqueTaskQueue('prompt-cache');
    const claude = createAnthropic({ baseURL: claudeURL, apiKey: 'sk-ant-local' });
    const oai = createOpenAI({ baseURL: openaiURL, apiKey: 'sk-local' });
    worker = await createWorker({
      store,
      agents,
      connection: await connectNative(),
      taskQueue,
      model: new ProviderRegistryModel({
        providers: {
          claude,
          routed: claude,
          oai: customProvider({ languageModels: { keyed: oai.chat('keyed') } }),
        },
      }),
      // The `routed` provider's calls run on a queue of their own (decision 43).
      models: { routed: {} },
    });
    running = worker.run();
    client = new TurnKitClient({
      store,
      agents,
      temporal: await connectClient(),
      taskQueue,
      turnSettings: { maxProviderAttempts: 1 },
    });
  });

  afterAll(async () => {
    worker?.shutdown();
    await running;
    await store?.close();
    await anthropic.close();
    openaiServer.closeAllConnections();
    await new Promise<void>((resolve) => openaiServer.close(() => resolve()));
  });

  it('audit: #9 a 20-call tool loop reads each previous call from the cache: at most 4 breakpoints, two on the transcript, ≥ 80 % of the input of calls 2–20 cached', async () => {
    anthropic.calls.length = 0;
    const run = await client.run('reader', 'Summarize the report.', { model: 'claude:claude-local' });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe(`Read ${LOOP_CALLS - 1} pages.`);
    const calls = anthropic.calls;
    expect(calls).toHaveLength(LOOP_CALLS);
    // The first call: the last tool, the stable system prompt, the user's message.
    expect(calls[0]!.breakpoints).toEqual(['tools', 'system', 'message:0']);
    calls.slice(1).forEach((call, index) => {
      const messages = (call.body['messages'] as unknown[]).length;
      // Each later call: the previous call's last message (where it wrote) and its own last.
      expect(call.breakpoints).toEqual([
        'tools',
        'system',
        `message:${messages - 3}`,
        `message:${messages - 1}`,
      ]);
      expect(call.cachedTokens, `call ${index + 2}`).toBeGreaterThan(0);
    });
    const share = anthropic.cachedShare(calls.slice(1));
    expect(share).toBeGreaterThanOrEqual(0.8);
    // What the provider reported as read from its cache is on the turn's usage.
    const cached = calls.reduce((sum, call) => sum + call.cachedTokens, 0);
    expect(turn.usage?.cached_tokens).toBe(cached);
  }, 120_000);

  it('audit: #9 the routed path and a fallback carry the same breakpoints: the fallback model reads its own previous calls from the cache', async () => {
    anthropic.calls.length = 0;
    const run = await client.run('reader', 'Summarize the report.', {
      model: ['routed:busy', 'routed:steady'],
    });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const steady = anthropic.calls.filter((call) => call.model === 'steady');
    expect(steady).toHaveLength(LOOP_CALLS);
    expect(anthropic.calls.filter((call) => call.model === 'busy').length).toBeGreaterThan(0);
    for (const call of anthropic.calls) expect(call.breakpoints.length).toBeGreaterThanOrEqual(3);
    for (const call of steady.slice(1)) expect(call.breakpoints).toHaveLength(4);
    expect(anthropic.cachedShare(steady.slice(1))).toBeGreaterThanOrEqual(0.8);
    expect((await run.events()).some((event) => event.type === 'model.fallback')).toBe(true);
  }, 120_000);

  it('audit: #9 OpenAI gets one promptCacheKey per conversation: the same across its turns, another for another conversation of the agent', async () => {
    keys.length = 0;
    const first = await client.conversation('talker');
    for (const question of ['Hi.', 'And again?'])
      expect((await (await first.ask(question)).result()).status).toBe('completed');
    const second = await client.conversation('talker');
    expect((await (await second.ask('Hi.')).result()).status).toBe('completed');
    expect(keys).toHaveLength(3);
    for (const key of keys) expect(key).toMatch(/^turnkit-[0-9a-f]{32}$/);
    expect(keys[1]).toBe(keys[0]);
    expect(keys[2]).not.toBe(keys[0]);
  }, 60_000);
});
