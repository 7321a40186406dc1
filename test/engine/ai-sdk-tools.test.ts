/**
 * Issue 30, part 5: the AI SDK's own `tool()` objects as TurnKit tools (`aiSdkTools`), and
 * `defineTool` with any Standard Schema. On the real dev server with a real SQLite store; only
 * the model is scripted.
 */
import type { ModelMessage as SdkMessage, ToolExecutionOptions } from 'ai';
import { dynamicTool, jsonSchema, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { aiSdkTools } from '../../src/agents/ai-sdk-tools.js';
import type { StandardSchemaV1 } from '../../src/agents/standard-schema.js';
import { defineTool } from '../../src/agents/tool.js';
import { ArgumentError } from '../../src/errors.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import { requireTemporal } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

/** What each AI SDK tool's `execute` and `needsApproval` were given, by tool name. */
const received: Record<string, { input: unknown; options: ToolExecutionOptions<unknown> }[]> = {};
const asked: { input: unknown; toolCallId: string; messages: SdkMessage[]; context: unknown }[] = [];
const record = (name: string, input: unknown, options: ToolExecutionOptions<unknown>) =>
  (received[name] ??= []).push({ input, options });

const weather = tool({
  description: 'The weather in a city.',
  inputSchema: z.object({ city: z.string().describe('The city') }),
  execute: async ({ city }, options) => {
    record('weather', { city }, options);
    return { city, forecast: 'sunny', aborted: options.abortSignal?.aborted ?? null };
  },
});

const search = tool({
  description: 'Searches the web.',
  inputSchema: jsonSchema<{ query: string; limit?: number }>({
    type: 'object',
    properties: { query: { type: 'string' }, limit: { type: 'integer' } },
    required: ['query'],
    additionalProperties: false,
  }),
  execute: async (input, options) => {
    record('search', input, options);
    return [`result for ${input.query}`];
  },
});

const transfer = tool({
  description: 'Moves money; a person approves amounts over 100.',
  inputSchema: z.object({ amount: z.number() }),
  needsApproval: async (input, options) => {
    asked.push({ input, ...(options as Omit<(typeof asked)[number], 'input'>) });
    return input.amount > 100;
  },
  execute: async ({ amount }, options) => {
    record('transfer', { amount }, options);
    return `sent ${amount}`;
  },
});

let flaky = 0;
const flakyTools = (name: string) =>
  tool({
    description: 'Fails the first time it runs.',
    inputSchema: z.object({}),
    execute: async (_input, options) => {
      record(name, {}, options);
      flaky += 1;
      if (received[name]!.length === 1) throw new Error(`${name} hiccup`);
      return { ok: true };
    },
  });

const streaming = tool({
  description: 'Streams progress; its last value is the result, shaped by toModelOutput.',
  inputSchema: z.object({ steps: z.number().int() }),
  execute: async function* ({ steps }) {
    for (let step = 1; step <= steps; step += 1) yield { step, of: steps };
  },
  toModelOutput: ({ output }) => ({ type: 'text', value: `done after ${(output as { step: number }).step}` }),
});

const echo = dynamicTool({
  description: 'Echoes whatever it gets.',
  inputSchema: z.object({ text: z.string() }),
  execute: async (input) => ({ echoed: (input as { text: string }).text }),
});

const tenant = tool({
  description: 'Reads the tenant from its context.',
  inputSchema: z.object({}),
  contextSchema: z.object({ tenant: z.string() }),
  execute: async (_input, { context }) => ({ tenant: context.tenant }),
});

/** A Standard Schema v1 written by hand (no zod): a non-empty string `text`, upper-cased. */
const shoutInput: StandardSchemaV1<{ text: string }, { text: string }> = {
  '~standard': {
    version: 1,
    vendor: 'hand-written',
    validate: (value) => {
      const text = (value as { text?: unknown }).text;
      if (typeof text !== 'string' || text === '')
        return { issues: [{ message: 'must be a non-empty string', path: [{ key: 'text' }] }] };
      return { value: { text: text.toUpperCase() } };
    },
    jsonSchema: {
      input: () => ({
        type: 'object',
        properties: { text: { type: 'string', minLength: 1 } },
        required: ['text'],
        additionalProperties: false,
      }),
      output: () => ({ type: 'object' }),
    },
  },
};
const shouted: string[] = [];
const shout = defineTool({
  name: 'shout',
  description: 'Says it louder.',
  input: shoutInput,
  execute: ({ text }) => {
    shouted.push(text);
    return { said: text };
  },
});

/**
 * The last user message names the calls of the model's first answer to it (`CALLS: tool
 * {json}; tool {json}`); the next call answers with what it read from the tool results.
 */
function script(request: ModelRequest) {
  const asked = request.messages.findLastIndex((m) => m.role === 'user');
  const since = request.messages.slice(asked + 1);
  if (!since.some((m) => m.role === 'tool')) {
    const task = request.messages[asked]!.content;
    const specs = task
      .split('CALLS:')[1]!
      .split(';')
      .map((spec) => spec.trim());
    return {
      toolCalls: specs.map((spec, index) => {
        const [name, ...rest] = spec.split(' ');
        return { id: `call_${name}_${index}`, name: name!, arguments: rest.join(' ') || '{}' };
      }),
    };
  }
  const results = since.filter((m) => m.role === 'tool').map((m) => m.content);
  return { text: `read: ${results.join(' | ')}` };
}

const model = new ScriptedModel({ '*': script });

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({
        name: 'sdk_user',
        instructions: 'Use the tools.',
        tools: [
          ...aiSdkTools({ weather, search, transfer, streaming, echo, tenant }),
          ...aiSdkTools(
            { flaky_safe: flakyTools('flaky_safe'), flaky_unknown: flakyTools('flaky_unknown') },
            { flaky_safe: { recovery: 'replaySafe' } },
          ),
          shout,
        ],
      }),
    ],
    model,
  });
});
afterAll(async () => kit?.stop());

const toolResults = async (run: RunHandle) =>
  (await run.transcript())
    .flatMap((m) => m.content)
    .flatMap((p) => (p.type === 'tool_result' ? [{ id: p.tool_call_id, text: p.text, error: p.error }] : []));

describe.skipIf(!(await requireTemporal()))('AI SDK tools', () => {
  it('gateway: an agent whose tools are AI SDK tool() objects (one zod, one jsonSchema(), one with needsApproval) runs a turn with each', async () => {
    // zod: the model sees the zod schema as JSON Schema; execute gets what the AI SDK passes.
    const first = await kit.client.run('sdk_user', 'CALLS: weather {"city":"Paris"}', {
      context: { tenant: 'acme' },
    });
    const firstTurn = await first.result();
    expect(firstTurn.status).toBe('completed');
    expect(firstTurn.outputText).toContain('"forecast":"sunny"');
    const { input, options } = received['weather']![0]!;
    expect(input).toEqual({ city: 'Paris' });
    expect(options.toolCallId).toBe('call_weather_0');
    expect(options.abortSignal).toBeInstanceOf(AbortSignal);
    expect(options.context).toEqual({ tenant: 'acme' });
    // The messages the model was sent for the response holding the call: the task, nothing after.
    expect(options.messages).toEqual([
      { role: 'user', content: expect.stringContaining('weather {"city":"Paris"}') },
    ]);
    const sent = model.callsFor('sdk_user')[0]!.request;
    expect(sent.tools.find((t) => t.name === 'weather')).toMatchObject({
      description: 'The weather in a city.',
      inputSchema: { type: 'object', properties: { city: { type: 'string', description: 'The city' } } },
    });

    // jsonSchema(): the model sees that schema as it is; an array result becomes {items}.
    const second = await kit.client.run('sdk_user', 'CALLS: search {"query":"temporal"}');
    expect((await second.result()).status).toBe('completed');
    expect(received['search']![0]!.input).toEqual({ query: 'temporal' });
    expect(await toolResults(second)).toEqual([
      { id: 'call_search_0', text: JSON.stringify({ items: ['result for temporal'] }), error: false },
    ]);
    const searchSpec = model.calls.at(-1)!.request.tools.find((t) => t.name === 'search');
    expect(searchSpec!.inputSchema).toEqual({
      type: 'object',
      properties: { query: { type: 'string' }, limit: { type: 'integer' } },
      required: ['query'],
      additionalProperties: false,
    });

    // needsApproval (a function of the input): 5 runs at once, 500 waits for a person.
    const third = await kit.client.run('sdk_user', 'CALLS: transfer {"amount":5}; transfer {"amount":500}', {
      context: { tenant: 'acme' },
    });
    await waitUntil(async () => (await third.pendingApprovals()).length === 1);
    const [pending] = await third.pendingApprovals();
    expect(pending).toMatchObject({
      toolCallId: 'call_transfer_1',
      toolName: 'transfer',
      arguments: { amount: 500 },
    });
    expect(asked.map((a) => [a.input, a.toolCallId, a.context])).toEqual([
      [{ amount: 5 }, 'call_transfer_0', { tenant: 'acme' }],
      [{ amount: 500 }, 'call_transfer_1', { tenant: 'acme' }],
    ]);
    expect(asked[0]!.messages).toEqual([{ role: 'user', content: expect.stringContaining('transfer') }]);
    await third.approve('call_transfer_1', { principal: 'alice' });
    const thirdTurn = await third.result();
    expect(thirdTurn.status).toBe('completed');
    expect(received['transfer']!.map((r) => r.input)).toEqual([{ amount: 5 }, { amount: 500 }]);
    expect(await toolResults(third)).toEqual([
      { id: 'call_transfer_0', text: JSON.stringify({ result: 'sent 5' }), error: false },
      { id: 'call_transfer_1', text: JSON.stringify({ result: 'sent 500' }), error: false },
    ]);
    expect((await third.events()).map((e) => e.type)).toContain('tool_call.approved');
    // Both calls were made from the same request: the second does not see the first's result.
    for (const { options: given } of received['transfer']!)
      expect(given.messages).toEqual([{ role: 'user', content: expect.stringContaining('transfer') }]);
  });

  it('gateway: the messages an AI SDK tool gets are the conversation as the model read it, in AI SDK form, up to the response holding the call', async () => {
    const conversation = await kit.client.conversation('sdk_user');
    expect((await (await conversation.ask('CALLS: echo {"text":"one"}')).result()).status).toBe('completed');
    expect((await (await conversation.ask('CALLS: weather {"city":"Rome"}')).result()).status).toBe(
      'completed',
    );
    const { options } = received['weather']!.at(-1)!;
    expect(options.toolCallId).toBe('call_weather_0');
    expect(options.messages).toEqual([
      { role: 'user', content: 'CALLS: echo {"text":"one"}' },
      {
        role: 'assistant',
        content: [{ type: 'tool-call', toolCallId: 'call_echo_0', toolName: 'echo', input: { text: 'one' } }],
      },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'call_echo_0',
            toolName: 'echo',
            output: { type: 'text', value: JSON.stringify({ echoed: 'one' }) },
          },
        ],
      },
      { role: 'assistant', content: `read: ${JSON.stringify({ echoed: 'one' })}` },
      { role: 'user', content: 'CALLS: weather {"city":"Rome"}' },
    ]);
  });

  it('gateway: arguments that fail an AI SDK tool’s schema give the model the same tool error a zod tool’s do; the tool never runs', async () => {
    const run = await kit.client.run(
      'sdk_user',
      'CALLS: weather {"city":42}; weather {"city":"Oslo","wind":true}; search {"limit":3}; search {"query":"x","limit":"many"}',
    );
    expect((await run.result()).status).toBe('completed');
    const results = await toolResults(run);
    expect(results.every((r) => r.error)).toBe(true);
    const texts = results.map((r) => JSON.parse(r.text) as { message: string }).map((e) => e.message);
    expect(texts[0]).toMatch(/^invalid arguments for weather: city: /);
    expect(texts[1]).toBe('unknown argument(s): wind');
    expect(texts[2]).toBe('missing required argument: query');
    // jsonSchema() without its own validate: checked against the JSON Schema all the same.
    expect(texts[3]).toMatch(/^invalid arguments for search: limit: /);
    expect(received['weather']!.map((r) => r.input)).not.toContainEqual({ city: 42 });
    expect(received['search']!.map((r) => r.input)).toEqual([{ query: 'temporal' }]);
  });

  it('gateway: defineTool accepts a Standard Schema that is not zod: the model sees its JSON Schema, execute gets its validated value, a failure is a tool error', async () => {
    const run = await kit.client.run(
      'sdk_user',
      'CALLS: shout {"text":"hello"}; shout {"text":""}; shout {}',
    );
    expect((await run.result()).status).toBe('completed');
    expect(shouted).toEqual(['HELLO']);
    const results = await toolResults(run);
    expect(results[0]).toEqual({ id: 'call_shout_0', text: JSON.stringify({ said: 'HELLO' }), error: false });
    expect(JSON.parse(results[1]!.text)).toMatchObject({
      message: 'invalid arguments for shout: text: must be a non-empty string',
    });
    expect(results[1]!.error).toBe(true);
    expect(JSON.parse(results[2]!.text)).toMatchObject({ message: 'missing required argument: text' });
    expect(shout.jsonSchema).toEqual({
      type: 'object',
      properties: { text: { type: 'string', minLength: 1 } },
      required: ['text'],
      additionalProperties: false,
    });
  });

  it('gateway: an AI SDK tool recovers as unknown unless the app marks it replay-safe', async () => {
    const run = await kit.client.run('sdk_user', 'CALLS: flaky_safe; flaky_unknown');
    expect((await run.result()).status).toBe('completed');
    const results = await toolResults(run);
    // Replay-safe: its plain error is retried under the same execution and succeeds.
    expect(results[0]).toEqual({ id: 'call_flaky_safe_0', text: JSON.stringify({ ok: true }), error: false });
    expect(received['flaky_safe']).toHaveLength(2);
    expect(received['flaky_safe']!.map((r) => r.options.toolCallId)).toEqual([
      'call_flaky_safe_0',
      'call_flaky_safe_0',
    ]);
    // Unknown: never run again; the model reads the error.
    expect(results[1]!.error).toBe(true);
    expect(results[1]!.text).toContain('flaky_unknown hiccup');
    expect(received['flaky_unknown']).toHaveLength(1);
    expect(flaky).toBe(3);
  });

  it('gateway: a streaming execute ends with its last value, toModelOutput is what the model reads, and a dynamicTool runs', async () => {
    const run = await kit.client.run('sdk_user', 'CALLS: streaming {"steps":3}; echo {"text":"hi"}');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(await toolResults(run)).toEqual([
      { id: 'call_streaming_0', text: JSON.stringify({ result: 'done after 3' }), error: false },
      { id: 'call_echo_1', text: JSON.stringify({ echoed: 'hi' }), error: false },
    ]);
  });

  it('gateway: an AI SDK tool with a contextSchema gets the run context it validates; a context that fails it is a tool error', async () => {
    const good = await kit.client.run('sdk_user', 'CALLS: tenant', { context: { tenant: 'acme' } });
    expect((await good.result()).status).toBe('completed');
    expect(await toolResults(good)).toEqual([
      { id: 'call_tenant_0', text: JSON.stringify({ tenant: 'acme' }), error: false },
    ]);
    const bad = await kit.client.run('sdk_user', 'CALLS: tenant', { context: { tenant: 7 } });
    expect((await bad.result()).status).toBe('completed');
    const [result] = await toolResults(bad);
    expect(result!.error).toBe(true);
    expect(JSON.parse(result!.text)).toMatchObject({
      message: expect.stringMatching(
        /^tool tenant: the run context does not match its contextSchema: tenant: /,
      ),
    });
  });
});

describe('AI SDK tools: bad input', () => {
  const run = async () => ({});
  it('gateway: a tool() without inputSchema, or whose execute is not a function, is an ArgumentError naming it', () => {
    expect(() => aiSdkTools({ bare: { execute: run } as never })).toThrow(
      new ArgumentError('AI SDK tool bare has no inputSchema'),
    );
    expect(() =>
      aiSdkTools({ idle: tool({ inputSchema: z.object({}), outputSchema: z.object({}) }) }),
    ).toThrow(/^AI SDK tool idle: execute must be a function/);
    expect(() => aiSdkTools({ odd: { inputSchema: z.object({}), execute: 'yes' } as never })).toThrow(
      /^AI SDK tool odd: execute must be a function/,
    );
    expect(() => aiSdkTools({ 'no good': tool({ inputSchema: z.object({}), execute: run }) })).toThrow(
      /invalid tool name "no good"/,
    );
  });

  it('gateway: a provider-defined tool is an ArgumentError saying it is unsupported; a dynamicTool is taken', () => {
    const provider = {
      type: 'provider',
      id: 'openai.web_search',
      args: {},
      inputSchema: z.object({}),
      isProviderExecuted: true,
    };
    expect(() => aiSdkTools({ web: provider as never })).toThrow(ArgumentError);
    expect(() => aiSdkTools({ web: provider as never })).toThrow(
      /^AI SDK tool web is a provider-defined tool \(openai\.web_search\), which TurnKit does not support/,
    );
    expect(() => aiSdkTools({ old: { ...provider, type: 'provider-defined' } as never })).toThrow(
      /not support/,
    );
    const [dynamic] = aiSdkTools({ echo });
    expect(dynamic).toMatchObject({
      name: 'echo',
      recovery: 'unknown',
      needsApproval: false,
      kind: 'ordinary',
    });
  });

  it('gateway: aiSdkTools maps recovery, readOnly and needsApproval, and refuses settings for a tool it was not given', () => {
    const [plain, safe, gated, overridden] = aiSdkTools(
      { plain: weather, safe: weather, gated: transfer, overridden: weather },
      { safe: { readOnly: true }, overridden: { needsApproval: true, approvalTimeout: '5 minutes' } },
    );
    expect(plain).toMatchObject({ recovery: 'unknown', readOnly: false, needsApproval: false });
    expect(safe).toMatchObject({ recovery: 'replaySafe', readOnly: true });
    expect(gated!.needsApproval).toBe(true);
    expect(overridden).toMatchObject({ needsApproval: true, approvalTimeoutMs: 300_000 });
    expect(
      aiSdkTools({ always: tool({ inputSchema: z.object({}), needsApproval: true, execute: run }) })[0],
    ).toMatchObject({ needsApproval: true });
    expect(() => aiSdkTools({ weather }, { wether: { recovery: 'replaySafe' } } as never)).toThrow(
      new ArgumentError('aiSdkTools: options name wether, which is not in the tool set'),
    );
    expect(() => aiSdkTools([weather] as never)).toThrow(ArgumentError);
  });

  it('gateway: an AI SDK tool passed to defineAgent without aiSdkTools is an ArgumentError pointing to it', () => {
    expect(() => defineAgent({ name: 'raw', tools: [weather as never] })).toThrow(
      /tools\[0\] is not a tool .*aiSdkTools\(\{ name: tool \}\)/,
    );
  });

  it('gateway: defineTool refuses a Standard Schema it cannot show the model, or that is not an object', () => {
    const noJson = {
      '~standard': { version: 1, vendor: 'plain', validate: (value: unknown) => ({ value }) },
    };
    expect(() => defineTool({ name: 'a', description: '', input: noJson as never, execute: run })).toThrow(
      /^tool a: its plain schema cannot convert itself to JSON Schema/,
    );
    expect(() =>
      defineTool({ name: 'b', description: '', input: { city: 'string' } as never, execute: run }),
    ).toThrow(/^tool b: input must be a zod object schema \(z\.object\(\{\.\.\.\}\)\) or a Standard Schema/);
    expect(() =>
      defineTool({ name: 'b', description: '', input: z.string() as never, execute: run }),
    ).toThrow(/^tool b: input must describe an object/);
    const stringSchema = {
      '~standard': {
        ...shoutInput['~standard'],
        jsonSchema: { input: () => ({ type: 'string' }), output: () => ({}) },
      },
    };
    expect(() =>
      defineTool({ name: 'c', description: '', input: stringSchema as never, execute: run }),
    ).toThrow(new ArgumentError('tool c: input must describe an object (its JSON Schema has type "object")'));
    const reserved = {
      '~standard': {
        ...shoutInput['~standard'],
        jsonSchema: { input: () => ({ type: 'object', properties: { context: {} } }), output: () => ({}) },
      },
    };
    expect(() => defineTool({ name: 'd', description: '', input: reserved as never, execute: run })).toThrow(
      /the argument name "context" is reserved/,
    );
  });
});
