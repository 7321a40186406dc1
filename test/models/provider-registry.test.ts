/**
 * Any AI SDK provider by id, on the real dev server: model ids `provider:model` resolve through
 * the AI SDK's provider registry; providers speak their own wire format to a local server.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ConfigError } from '../../src/errors.js';
import { ProviderRegistryModel } from '../../src/models/provider-registry.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { connectClient, connectNative, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';
import { sendReply } from '../helpers/openai-sse.js';

type Reply = { status: number; body: unknown };
const replies: Reply[] = [];
const received: { path: string; auth: string; body: Record<string, unknown> }[] = [];
let baseUrl = '';
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  let raw = '';
  req.on('data', (chunk) => (raw += chunk));
  req.on('end', () => {
    const body = JSON.parse(raw || '{}') as Record<string, unknown>;
    received.push({
      path: req.url ?? '',
      auth: String(req.headers['authorization'] ?? req.headers['x-api-key'] ?? ''),
      body,
    });
    const reply = replies.shift() ?? { status: 500, body: { error: { message: 'no scripted reply' } } };
    // A turn's model step streams: the reply goes out in the provider's SSE format.
    sendReply(res, body, reply.status, reply.body);
  });
});

const chatCompletion = (model: string, message: Record<string, unknown>, finish: string) => ({
  status: 200,
  body: {
    id: `chatcmpl-${received.length}`,
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
    usage: { prompt_tokens: 1_000_000, completion_tokens: 1_000_000, total_tokens: 2_000_000 },
  },
});
const anthropicMessage = (model: string, content: unknown[], stop: string) => ({
  status: 200,
  body: {
    id: `msg_${received.length}`,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: stop,
    usage: { input_tokens: 10, output_tokens: 5 },
  },
});

const lookups: string[] = [];
const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  input: z.object({ word: z.string() }),
  execute: ({ word }) => {
    lookups.push(word);
    return { meaning: `meaning of ${word}` };
  },
});
const helper = defineAgent({ name: 'helper', instructions: 'Be brief.', tools: [lookup] });

describe.skipIf(!(await requireTemporal()))('provider registry', () => {
  let store: Store;
  let worker: TurnKitWorker;
  let running: Promise<void>;
  let client: TurnKitClient;
  const agents = new AgentRegistry([helper]);

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    store = await openStore(tempSqliteUrl());
    const taskQueue = uniqueTaskQueue('provider-registry');
    worker = await createWorker({
      store,
      agents,
      connection: await connectNative(),
      taskQueue,
      defaultModel: 'local:small-model',
      providers: {
        local: createOpenAICompatible({
          name: 'local',
          baseURL: baseUrl,
          apiKey: 'sk-local',
          includeUsage: true,
        }),
        claude: createAnthropic({ baseURL: baseUrl, apiKey: 'sk-ant-local' }),
      },
      cost: { costRates: { 'small-model': { input: 1, output: 2 } } },
    });
    running = worker.run();
    client = new TurnKitClient({ store, agents, temporal: await connectClient(), taskQueue });
  });

  afterAll(async () => {
    worker?.shutdown();
    await running;
    await store?.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('provider registry: the default provider:model id runs a turn with a tool through the registered provider, priced by the bare model id', async () => {
    received.length = 0;
    lookups.length = 0;
    replies.push(
      chatCompletion(
        'small-model',
        {
          content: null,
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'lookup', arguments: '{"word":"durable"}' } },
          ],
        },
        'tool_calls',
      ),
      chatCompletion('small-model', { content: 'Durable: lasting.' }, 'stop'),
    );
    const run = await client.run('helper', 'Define durable.');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Durable: lasting.');
    expect(lookups).toEqual(['durable']);
    expect(received.map((r) => r.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions']);
    // The provider got the bare model id and its own key; the tool result went back to it.
    expect(received[0]!.body['model']).toBe('small-model');
    expect(received[0]!.auth).toBe('Bearer sk-local');
    expect(JSON.stringify(received[1]!.body['messages'])).toContain('meaning of durable');
    // 2 calls × (1M input × $1 + 1M output × $2) from the rates of "small-model".
    expect(turn.cost).toBeCloseTo(6, 6);
    const completed = (await run.events()).filter((e) => e.type === 'model.completed');
    expect(completed.map((e) => e.payload['model'])).toEqual(['local:small-model', 'local:small-model']);
  });

  it('provider registry: a run naming another registered provider speaks that provider’s wire format', async () => {
    received.length = 0;
    replies.push(
      anthropicMessage('claude-local', [{ type: 'text', text: 'Hello from Messages.' }], 'end_turn'),
    );
    const run = await client.run('helper', 'Say hello.', { model: 'claude:claude-local' });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Hello from Messages.');
    expect(received.map((r) => r.path)).toEqual(['/v1/messages']);
    expect(received[0]!.body['model']).toBe('claude-local');
    expect(received[0]!.auth).toBe('sk-ant-local');
    // No rate for claude-local: the cost is unknown, not zero-priced by another model's rates.
    expect(turn.usage?.cost_details?.total).toBeNull();
  });

  it('provider registry: an unknown provider prefix fails the turn with a ConfigError and sends nothing', async () => {
    received.length = 0;
    const run = await client.run('helper', 'Say hello.', { model: 'nosuchvendor:model-1' });
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error?.message).toContain('unknown model provider "nosuchvendor"');
    expect(turn.error?.message).toContain('known providers: claude, local');
    expect(received).toHaveLength(0);
  });

  it('provider registry: an unknown prefix in the default model is a ConfigError at worker boot', async () => {
    const error = await createWorker({
      store,
      agents,
      connection: await connectNative(),
      taskQueue: uniqueTaskQueue('provider-registry-bad'),
      defaultModel: 'nosuchvendor:model-1',
      providers: {},
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain('unknown model provider "nosuchvendor"');
  });

  it('provider registry: an installed @ai-sdk package serves its prefix with no code change, configured from its environment', async () => {
    const saved = {
      key: process.env['OPENAI_API_KEY'],
      url: process.env['OPENAI_BASE_URL'],
      model: process.env['TURNKIT_MODEL'],
    };
    process.env['OPENAI_API_KEY'] = 'sk-from-env';
    process.env['OPENAI_BASE_URL'] = baseUrl;
    try {
      received.length = 0;
      replies.push({
        status: 200,
        body: {
          id: 'resp_1',
          object: 'response',
          created_at: 1,
          status: 'completed',
          model: 'gpt-local',
          output: [
            {
              type: 'message',
              id: 'msg_1',
              status: 'completed',
              role: 'assistant',
              content: [{ type: 'output_text', text: 'From the installed package.', annotations: [] }],
            },
          ],
          usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7 },
        },
      });
      // No providers and no model client: TURNKIT_MODEL names the installed @ai-sdk/openai.
      process.env['TURNKIT_MODEL'] = 'openai:gpt-local';
      const taskQueue = uniqueTaskQueue('provider-registry-env');
      const envWorker = await createWorker({ store, agents, connection: await connectNative(), taskQueue });
      const envClient = new TurnKitClient({ store, agents, temporal: await connectClient(), taskQueue });
      const finished = envClient.run('helper', 'Say hello.').then((run) => run.result());
      await envWorker.run(finished);
      const turn = await finished;
      expect(turn.status).toBe('completed');
      const requested = (await store.listEvents(turn.id)).find((e) => e.type === 'model.requested');
      expect(requested?.payload['model']).toBe('openai:gpt-local');
      expect(turn.outputText).toBe('From the installed package.');
      expect(received[0]!.path).toBe('/v1/responses');
      expect(received[0]!.auth).toBe('Bearer sk-from-env');
      expect(received[0]!.body['model']).toBe('gpt-local');
      await expect(new ProviderRegistryModel().validate('not-installed-xyz:m')).rejects.toBeInstanceOf(
        ConfigError,
      );
      await expect(new ProviderRegistryModel().validate('bare-model')).rejects.toThrow(/names no provider/);
    } finally {
      for (const [name, value] of [
        ['OPENAI_API_KEY', saved.key],
        ['OPENAI_BASE_URL', saved.url],
        ['TURNKIT_MODEL', saved.model],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});
