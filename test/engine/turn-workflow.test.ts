import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ArgumentError, ConfigError, InputError, LostClaim } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { FencedStore } from '../../src/store/fenced-store.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { toolResults } from '../helpers/tools.js';

const statusCalls: string[] = [];
const statusTool = defineTool({
  name: 'status_tool',
  description: 'Reports a status.',
  input: z.object({ name: z.string() }),
  execute: ({ name }) => {
    statusCalls.push(name);
    return { status: `ok:${name}` };
  },
});

const seenContexts: { idempotencyKey: string; principal: unknown; context: unknown }[] = [];
const contextTool = defineTool({
  name: 'context_tool',
  description: 'Echoes its context.',
  input: z.object({}),
  execute: (_args, context) => {
    seenContexts.push({
      idempotencyKey: context.idempotencyKey,
      principal: context.principal,
      context: context.context,
    });
    return { error: 'not really an error', seen: true };
  },
});

const boomTool = defineTool({
  name: 'boom',
  description: 'Always throws.',
  input: z.object({}),
  execute: () => {
    throw new Error('kaboom');
  },
});

const typedTool = defineTool({
  name: 'typed',
  description: 'Needs a count.',
  input: z.object({ count: z.number().int(), label: z.string().optional() }),
  execute: ({ count }) => ({ doubled: count * 2 }),
});

const finishTool = defineTool({
  name: 'finish',
  description: 'Ends the turn.',
  input: z.object({ summary: z.string() }),
  terminal: (result) => `Finished: ${(result as { summary: string }).summary}`,
  execute: ({ summary }) => ({ summary }),
});

// A tool built by a factory with its dependency injected (TurnKit's "register an instance").
function counterTool(counts: Map<string, number>) {
  return defineTool({
    name: 'count',
    description: 'Counts a word in an injected map.',
    input: z.object({ word: z.string() }),
    execute: ({ word }) => {
      counts.set(word, (counts.get(word) ?? 0) + 1);
      return { word, count: counts.get(word)! };
    },
  });
}
const injectedCounts = new Map<string, number>([['otter', 41]]);

const script = new ScriptedModel({
  injected: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'counted'
      : { toolCalls: [{ name: 'count', arguments: { word: 'otter' } }] },
  plain: () => 'Hello from the model.',
  snapshot: (request) =>
    `saw ${request.messages.length}: ${request.messages.map((m) => m.content).join(' | ')}`,
  structured: [{ text: '{"answer":42}', outputData: { answer: 42 } }],
  tasker: ['done'],
  limited: [
    {
      toolCalls: [
        { name: 'status_tool', arguments: { name: 'a' } },
        { name: 'status_tool', arguments: { name: 'b' } },
      ],
    },
  ],
  validator: [
    {
      toolCalls: [
        { name: 'typed', arguments: {} },
        { name: 'typed', arguments: { count: 'three' } },
        { name: 'typed', arguments: { count: 3, extra: true } },
        { name: 'typed', arguments: '{not json' },
        { name: 'nonexistent', arguments: {} },
        { name: 'typed', arguments: { count: 4 } },
      ],
    },
    'validated',
  ],
  terminator: [
    {
      toolCalls: [
        { name: 'status_tool', arguments: { name: 'before' } },
        { name: 'finish', arguments: { summary: 'all good' } },
        { name: 'status_tool', arguments: { name: 'after' } },
      ],
    },
  ],
  contexts: [
    {
      toolCalls: [
        { name: 'context_tool', arguments: {} },
        { name: 'boom', arguments: {} },
      ],
    },
    'ok',
  ],
  empty: [{ text: '' }],
  rejected: [{ error: { status: 400, message: 'invalid request: bad model' } }],
  spender: [
    {
      text: 'pricey',
      usage: { inputTokens: 1_000_000, outputTokens: 0, cacheWriteTokens: 10, thinkingTokens: 5 },
    },
  ],
});

const agents = [
  defineAgent({ name: 'plain', model: 'scripted-plain' }),
  defineAgent({ name: 'snapshot' }),
  defineAgent({ name: 'injected', tools: [counterTool(injectedCounts)] }),
  defineAgent({ name: 'structured', outputSchema: z.object({ answer: z.number() }) }),
  defineAgent({ name: 'tasker', inputSchema: z.object({ topic: z.string() }) }),
  defineAgent({
    name: 'limited',
    tools: [statusTool],
    limits: { maxToolExecutionsByName: { status_tool: 1 } },
  }),
  defineAgent({ name: 'validator', tools: [typedTool] }),
  defineAgent({ name: 'terminator', tools: [statusTool, finishTool] }),
  defineAgent({ name: 'contexts', tools: [contextTool, boomTool] }),
  defineAgent({ name: 'empty' }),
  defineAgent({ name: 'rejected' }),
  defineAgent({ name: 'spender', model: 'priced', limits: { maxSpend: 1 } }),
];

let kit: TestKit;

beforeAll(async () => {
  kit = await startKit({
    agents,
    model: script,
    runtime: {
      cost: { costRates: { priced: { input: 3, output: 15, cacheWrite: 100_000, thinking: 100_000 } } },
    },
  });
});
afterAll(async () => kit?.stop());

describe('turn workflow on the Temporal dev server', () => {
  it('CORE-01 a plain text turn completes with the model text; the first request has one user message and the agent model', async () => {
    const run = await kit.client.run('plain', 'Say hello');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Hello from the model.');
    const [call] = script.callsFor('plain');
    expect(call!.request.messages).toHaveLength(1);
    expect(call!.request.messages[0]!.role).toBe('user');
    expect(call!.request.model).toBe('scripted-plain');
    expect(turn.claimToken).toBeNull();
  });

  it('CORE-02 the output schema reaches the model and outputData is persisted', async () => {
    const turn = await (await kit.client.run('structured', 'Answer')).result();
    expect(turn.outputData).toEqual({ answer: 42 });
    expect(script.callsFor('structured')[0]!.request.outputSchema).toMatchObject({ type: 'object' });
  });

  it('CORE-03 CORE-04 a run carries task and input in its first message, uses task behaviour, and records 1 turn, 2 messages, no executions', async () => {
    const run = await kit.client.run('tasker', 'Summarize', { input: { topic: 'otters' } });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.error).toBeNull();
    const messages = await run.transcript();
    expect(messages).toHaveLength(2);
    expect(messages[0]!.content[0]).toEqual({
      type: 'text',
      text: 'Task:\nSummarize\n\nInput:\n{\n  "topic": "otters"\n}',
    });
    expect(messages[0]!.metadata).toEqual({ source: 'application', task: true, task_text: 'Summarize' });
    expect(script.callsFor('tasker')[0]!.request.instructions).toContain('non-interactively');
    expect((await run.turns()).map((t) => t.id)).toEqual([run.turnId]);
    expect(await run.toolExecutions()).toEqual([]);
  });

  it('CORE-24 an input failing inputSchema raises InputError and creates no turn', async () => {
    const before = (await kit.store.listTurns({ agentName: 'tasker' })).length;
    await expect(kit.client.run('tasker', 'Summarize', { input: { topic: 7 } })).rejects.toBeInstanceOf(
      InputError,
    );
    expect(await kit.store.listTurns({ agentName: 'tasker' })).toHaveLength(before);
  });

  it('a run for an unregistered agent fails at the client before anything is written', async () => {
    await expect(kit.client.run('ghost', 'boo')).rejects.toBeInstanceOf(ConfigError);
    expect(await kit.store.listTurns({ agentName: 'ghost' })).toEqual([]);
  });

  it('CORE-05 CORE-09 a prepared run stays pending with no model call, and its preview shows the request without calling the model', async () => {
    const before = script.callsFor('plain').length;
    const run = await kit.client.prepare('plain', 'Preview me');
    expect(await run.status()).toBe('pending');
    expect((await run.turn()).submittedAt).toBeNull();
    const preview = await run.preview();
    expect(preview.request.model).toBe('scripted-plain');
    expect(preview.request.messages).toEqual([{ role: 'user', content: 'Task:\nPreview me' }]);
    expect(preview.request.instructions).toContain('plain');
    expect(preview.report.chars).toBeGreaterThan(0);
    expect(preview.report.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(script.callsFor('plain').length).toBe(before);
  });

  it('CORE-10 lifecycle events are durable, in order, and carry the turn id', async () => {
    const run = await kit.client.run('plain', 'Events please', {});
    await run.result().catch(() => undefined);
    const events = await run.events();
    const types = events.map((e) => e.type);
    expect(types).toEqual(
      expect.arrayContaining([
        'turn.started',
        'model.requested',
        'model.completed',
        'message.created',
        'turn.completed',
      ]),
    );
    expect(types.indexOf('turn.started')).toBeLessThan(types.indexOf('model.requested'));
    expect(types.indexOf('model.completed')).toBeLessThan(types.indexOf('turn.completed'));
    expect(events.every((e) => e.turnId === run.turnId)).toBe(true);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    const requested = events.find((e) => e.type === 'model.requested')!;
    expect(requested.payload['message_count']).toBe(1);
    expect((requested.payload['prompt'] as { chars: number }).chars).toBeGreaterThan(0);
    expect(
      (events.find((e) => e.type === 'model.completed')!.payload['usage'] as { total_tokens: number })
        .total_tokens,
    ).toBe(0);
  });

  it('CORE-13 a per-tool limit denies the second call with budget_denied and fails the run', async () => {
    const run = await kit.client.run('limited', 'Check twice');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({
      class: 'TurnKit::BudgetError',
      message: 'maximum executions reached for tool status_tool',
    });
    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual(['completed', 'failed']);
    expect(executions[1]!.error?.details).toMatchObject({ budget_denied: true });
    // Every tool call still has exactly one result, even on the failure path.
    const results = toolResults(await run.transcript());
    expect(results.map((r) => r.tool_call_id).sort()).toEqual(executions.map((e) => e.toolCallId).sort());
  });

  it('CORE-14 CORE-15 spec §4.2: invalid arguments and unknown tools fail their execution in order, the tool never runs for them, and the turn goes on', async () => {
    const run = await kit.client.run('validator', 'Validate');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('validated');
    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual([
      'failed',
      'failed',
      'failed',
      'failed',
      'failed',
      'completed',
    ]);
    expect(executions[0]!.error).toMatchObject({
      message: 'missing required argument: count',
      details: { class: 'TurnKit::ToolValidationError' },
    });
    expect(executions[1]!.error?.message).toContain('count');
    expect(executions[2]!.error?.message).toBe('unknown argument(s): extra');
    expect(executions[3]!.error?.message).toBe('invalid JSON arguments');
    expect(executions[4]!.error?.message).toBe('unknown tool: nonexistent');
    expect(executions[5]!.result).toEqual({ doubled: 8 });
    const results = toolResults(await run.transcript());
    expect(results.map((r) => r.error)).toEqual([true, true, true, true, true, false]);
    // The second model call sees all six results.
    expect(script.callsFor('validator')[1]!.request.messages.filter((m) => m.role === 'tool')).toHaveLength(
      6,
    );
  });

  it('CORE-18 a terminal tool completes the turn with its completion message; later calls are cancelled and every call has a result', async () => {
    const before = statusCalls.length;
    const run = await kit.client.run('terminator', 'Finish');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Finished: all good');
    const executions = await run.toolExecutions();
    expect(executions.map((e) => [e.toolName, e.status])).toEqual([
      ['status_tool', 'completed'],
      ['finish', 'completed'],
      ['status_tool', 'cancelled'],
    ]);
    expect(executions[2]!.result).toEqual({ skipped: true, message: 'not executed: turn ended by finish' });
    expect(statusCalls.slice(before)).toEqual(['before']);
    expect(toolResults(await run.transcript())).toHaveLength(3);
    expect(script.callsFor('terminator')).toHaveLength(1);
  });

  it('CORE-19 an error key is still success, a throwing tool fails with its message, and tools get a ToolContext', async () => {
    const run = await kit.client.run('contexts', 'Context', {
      principal: { user: 'ada' },
      context: { tenant: 'acme' },
    });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const [ctx, boom] = await run.toolExecutions();
    expect(ctx!.status).toBe('completed');
    expect(ctx!.result).toEqual({ error: 'not really an error', seen: true });
    expect(boom!.status).toBe('failed');
    expect(boom!.error).toEqual({ message: 'kaboom', details: { class: 'Error' } });
    expect(seenContexts.at(-1)).toEqual({
      idempotencyKey: `turnkit:tool:${ctx!.id}`,
      principal: { user: 'ada' },
      context: { tenant: 'acme' },
    });
    expect(() =>
      defineTool({
        name: 'bad',
        description: '',
        input: z.object({ context: z.string() }),
        execute: () => 1,
      }),
    ).toThrow(ArgumentError);
  });

  it('CORE-11 a turn sees its snapshot, not messages added later; and (decision 52) what the turns ahead of it wrote before it started, its own message last', async () => {
    const conversation = await kit.client.conversation('snapshot');
    const first = await conversation.ask('one', { start: false });
    const second = await conversation.ask('two', { start: false });
    await conversation.say('three');
    await first.start();
    expect(await first.result().then((t) => t.outputText)).toBe('saw 1: one');
    await second.start();
    expect(await second.result().then((t) => t.outputText)).toBe('saw 3: one | saw 1: one | two');
  });

  it('CORE-16 a tool with an injected dependency works in a turn', async () => {
    const run = await kit.client.run('injected', 'Count otters');
    expect((await run.result()).status).toBe('completed');
    expect(injectedCounts.get('otter')).toBe(42);
    expect((await run.toolExecutions())[0]!.result).toEqual({ word: 'otter', count: 42 });
  });

  it('CORE-17 non-tool entries are rejected when the agent is defined', () => {
    expect(() => defineAgent({ name: 'x', tools: [{ name: 'fake' } as never] })).toThrow(/not a tool/);
  });

  it('an empty model response fails the turn with a typed ModelError', async () => {
    const turn = await (await kit.client.run('empty', 'Nothing')).result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ class: 'TurnKit::ModelError' });
    expect(turn.error!.message).toContain('empty response');
  });

  it('BG-03 a provider rejection fails the turn durably as ModelError after exactly one provider attempt', async () => {
    const turn = await (await kit.client.run('rejected', 'Fail')).result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ class: 'TurnKit::ModelError' });
    expect(turn.error!.message).toContain('bad model');
    expect(script.callsFor('rejected')).toHaveLength(1);
  });

  it('BG-02 starting a completed turn again makes no model call and keeps its result', async () => {
    const run = await kit.client.run('plain', 'Once', {});
    await run.result().catch(() => undefined);
    const calls = script.callsFor('plain').length;
    await run.start();
    await kit.client.start(run.turnId);
    expect(script.callsFor('plain').length).toBe(calls);
    expect(await run.status()).not.toBe('running');
  });

  it('a start that fails after the rows commit leaves the turn pending; starting it again runs it exactly once', async () => {
    const { TurnKitClient } = await import('../../src/client/turnkit-client.js');
    const failing = new Proxy(kit.client.temporal, {
      get(target, property, receiver) {
        if (property !== 'workflow') return Reflect.get(target, property, receiver);
        return new Proxy(target.workflow, {
          get(workflow, name, r) {
            if (name === 'start') return async () => Promise.reject(new Error('frontend unavailable'));
            return Reflect.get(workflow, name, r);
          },
        });
      },
    });
    const broken = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal: failing,
      taskQueue: kit.taskQueue,
    });
    const calls = script.callsFor('plain').length;
    await expect(broken.run('plain', 'Start me later')).rejects.toThrow('frontend unavailable');
    const [turn] = (await kit.store.listTurns({ agentName: 'plain' })).filter(
      (t) => t.status === 'pending' && t.submittedAt,
    );
    expect(turn).toBeDefined();
    await kit.client.start(turn!.id);
    await kit.client.start(turn!.id);
    const handle = await kit.client.handle(turn!.id);
    expect((await handle.result()).status).toBe('completed');
    expect(script.callsFor('plain').length).toBe(calls + 1);
  });

  it('CORE-26 cost counts cache-write and thinking tokens from rates, and a max_spend breach fails with "cost limit reached" while recording the cost', async () => {
    const run = await kit.client.run('spender', 'Spend');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ class: 'TurnKit::BudgetError', message: 'cost limit reached' });
    // 1M input tokens at $3 + 10 cache-write tokens at $100k/M + 5 thinking tokens at $100k/M = 3 + 1 + 0.5
    expect(turn.cost).toBeCloseTo(4.5, 6);
    expect(turn.usage).toMatchObject({ input_tokens: 1_000_000, cache_write_tokens: 10, thinking_tokens: 5 });
    expect(await run.cost()).toBeCloseTo(4.5, 6);
  });

  it('BG-21 after completion the turn’s fenced store raises LostClaim on any write', async () => {
    const run = await kit.client.run('plain', 'Fence me', {});
    await run.result().catch(() => undefined);
    const turn = await run.turn();
    const workflow = await kit.client.temporal.workflow.getHandle(run.workflowId).describe();
    const fenced = new FencedStore(kit.store, {
      turnId: turn.id,
      claimToken: workflow.runId.replace(/-/g, ''),
      rootConversationId: turn.conversationId,
    });
    await expect(
      fenced.appendMessage({ conversationId: turn.conversationId, role: 'assistant', content: 'late' }),
    ).rejects.toBeInstanceOf(LostClaim);
    await expect(fenced.updateTurn(turn.id, { outputText: 'late' })).rejects.toBeInstanceOf(LostClaim);
    expect((await run.turn()).outputText).toBe(turn.outputText);
  });
});
