import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure, resetConfiguration } from '../../src/config.js';
import { ModelAccessError, ModelError } from '../../src/errors.js';
import { createModelClient } from '../../src/models/providers.js';
import type { ModelRequest } from '../../src/models/types.js';

type Reply = { status: number; body: unknown; headers?: Record<string, string>; delayMs?: number };

/** A local server speaking the providers' wire formats, answering from a queue of replies. */
const replies: Reply[] = [];
const received: { path: string; body: Record<string, unknown> }[] = [];
let closedEarly = 0;
let baseUrl = '';
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  let raw = '';
  req.on('data', (chunk) => (raw += chunk));
  req.on('end', () => {
    received.push({ path: req.url ?? '', body: JSON.parse(raw || '{}') });
    const reply = replies.shift() ?? { status: 500, body: { error: { message: 'no scripted reply' } } };
    const send = () => {
      if (res.destroyed) return;
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
      res.end(JSON.stringify(reply.body));
    };
    res.on('close', () => {
      if (!res.writableEnded) closedEarly += 1;
    });
    if (reply.delayMs) setTimeout(send, reply.delayMs);
    else send();
  });
});

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const request = (overrides: Partial<ModelRequest> = {}): ModelRequest => ({
  model: 'test-model',
  instructions: 'You are a test.',
  dynamicInstructions: 'Today is a test day.',
  messages: [
    { role: 'user', content: 'look it up' },
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_0', name: 'lookup', arguments: { q: 'a' } }] },
    { role: 'tool', content: '{"found":true}', toolCallId: 'call_0', toolName: 'lookup' },
  ],
  tools: [
    {
      name: 'lookup',
      description: 'Looks up.',
      inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    },
  ],
  metadata: { turnId: 't', conversationId: 'c', agentName: 'a' },
  ...overrides,
});
const options = () => ({ signal: new AbortController().signal });

const openaiCompletion = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'test-model-2026',
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: 'checking',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"b"}' } },
        ],
      },
      finish_reason: 'tool_calls',
    },
  ],
  usage: {
    prompt_tokens: 100,
    completion_tokens: 20,
    total_tokens: 120,
    prompt_tokens_details: { cached_tokens: 30 },
    completion_tokens_details: { reasoning_tokens: 7 },
  },
};

describe('AI SDK adapter against a local OpenAI-compatible server', () => {
  const client = () =>
    createModelClient({ provider: 'openai', apiKey: 'sk-test', baseURL: baseUrl, maxRetries: 2 });

  it('CORE-31 maps tool calls, text and usage, and sends the prompt, tools and tool results', async () => {
    received.length = 0;
    replies.push({ status: 200, body: openaiCompletion });
    const result = await client().chat(request(), options());
    expect(result.parts).toEqual([
      { type: 'text', text: 'checking' },
      { type: 'tool_call', id: 'call_1', name: 'lookup', arguments: { q: 'b' } },
    ]);
    expect(result.usage).toMatchObject({
      inputTokens: 70,
      outputTokens: 20,
      cachedTokens: 30,
      thinkingTokens: 7,
    });
    expect(result.model).toBe('test-model-2026');
    const sent = received[0]!;
    expect(sent.path).toBe('/v1/chat/completions');
    const messages = sent.body['messages'] as { role: string; content: unknown; tool_call_id?: string }[];
    expect(messages[0]).toMatchObject({ role: 'system', content: 'You are a test.' });
    expect(messages.some((m) => m.role === 'tool' && m.tool_call_id === 'call_0')).toBe(true);
    expect(JSON.stringify(sent.body['tools'])).toContain('"lookup"');
  });

  it('a 400 is a non-retryable ModelError after exactly one request', async () => {
    received.length = 0;
    replies.push({
      status: 400,
      body: { error: { message: 'bad model name', type: 'invalid_request_error' } },
    });
    const error = await client()
      .chat(request(), options())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).status).toBe(400);
    expect((error as ModelError).retryable).toBe(false);
    expect((error as ModelError).message).toContain('bad model name');
    expect(received).toHaveLength(1);
  });

  it('a 429 with retry-after is retried by the SDK; persisting, it is a retryable ModelError', async () => {
    received.length = 0;
    replies.push({ status: 429, body: { error: { message: 'slow down' } }, headers: { 'retry-after': '0' } });
    replies.push({ status: 200, body: openaiCompletion });
    const result = await client().chat(request(), options());
    expect(result.parts).toHaveLength(2);
    expect(received).toHaveLength(2);

    received.length = 0;
    for (let i = 0; i < 3; i++)
      replies.push({
        status: 429,
        body: { error: { message: 'slow down' } },
        headers: { 'retry-after': '0' },
      });
    const error = await client()
      .chat(request(), options())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).retryable).toBe(true);
    expect(received).toHaveLength(3);
  });

  it('a 500 is a retryable ModelError (left to Temporal once the SDK stops retrying)', async () => {
    received.length = 0;
    replies.push({ status: 500, body: { error: { message: 'boom' } } });
    const error = await createModelClient({
      provider: 'openai',
      apiKey: 'sk-test',
      baseURL: baseUrl,
      maxRetries: 0,
    })
      .chat(request(), options())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).retryable).toBe(true);
    expect((error as ModelError).status).toBe(500);
    expect(received).toHaveLength(1);
  });

  it('aborting the signal stops the request promptly and closes the socket', async () => {
    replies.push({ status: 200, body: openaiCompletion, delayMs: 5_000 });
    const controller = new AbortController();
    const before = closedEarly;
    const started = Date.now();
    setTimeout(() => controller.abort(), 200);
    await expect(client().chat(request(), { signal: controller.signal })).rejects.not.toBeInstanceOf(
      ModelError,
    );
    expect(Date.now() - started).toBeLessThan(3_000);
    await new Promise((r) => setTimeout(r, 100));
    expect(closedEarly).toBe(before + 1);
  });

  it('a missing API key is a ModelAccessError before any request', async () => {
    received.length = 0;
    const noKey = createModelClient({ provider: 'anthropic', baseURL: baseUrl });
    await expect(noKey.chat(request(), options())).rejects.toBeInstanceOf(ModelAccessError);
    expect(received).toHaveLength(0);
  });
});

describe('AI SDK adapter against a local Anthropic Messages server', () => {
  it('maps text, tool_use and cache usage from the Messages API', async () => {
    received.length = 0;
    replies.push({
      status: 200,
      body: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [
          { type: 'text', text: 'let me look' },
          { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'c' } },
        ],
        stop_reason: 'tool_use',
        usage: {
          input_tokens: 50,
          output_tokens: 10,
          cache_creation_input_tokens: 5,
          cache_read_input_tokens: 8,
        },
      },
    });
    const client = createModelClient({ provider: 'anthropic', apiKey: 'sk-ant-test', baseURL: baseUrl });
    const result = await client.chat(request(), options());
    expect(result.parts).toEqual([
      { type: 'text', text: 'let me look' },
      { type: 'tool_call', id: 'toolu_1', name: 'lookup', arguments: { q: 'c' } },
    ]);
    expect(result.usage).toMatchObject({ outputTokens: 10, cachedTokens: 8, cacheWriteTokens: 5 });
    expect(received[0]!.path).toBe('/v1/messages');
    expect(JSON.stringify(received[0]!.body['system'])).toContain('You are a test.');
  });

  it('CORE-31 the stable prompt is marked for caching apart from the dynamic tail, unless configure({ promptCache: false })', async () => {
    const reply = {
      status: 200,
      body: {
        id: 'msg_2',
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [{ type: 'text', text: 'ok' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 1, output_tokens: 1 },
      },
    };
    const client = createModelClient({ provider: 'anthropic', apiKey: 'sk-ant-test', baseURL: baseUrl });
    const systemOf = async () => {
      received.length = 0;
      replies.push(reply);
      await client.chat(request(), options());
      return received[0]!.body['system'] as { text: string; cache_control?: unknown }[];
    };
    const cached = await systemOf();
    expect(cached.find((block) => block.text === 'You are a test.')?.cache_control).toEqual({
      type: 'ephemeral',
    });
    expect(cached.find((block) => block.text === 'Today is a test day.')?.cache_control).toBeUndefined();
    configure({ promptCache: false });
    try {
      expect(JSON.stringify(await systemOf())).not.toContain('cache_control');
    } finally {
      resetConfiguration();
    }
  });
});
