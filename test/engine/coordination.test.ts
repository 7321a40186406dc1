/**
 * The coordination tools on the real dev server: launch_agent (with a completion callback),
 * wait_for, send_message, and their bad inputs — each an error tool result the model reads,
 * with nothing created and the turn going on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { launchAgentTool, sendMessageTool, waitForTool } from '../../src/agents/coordination.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { ContentPart, MessageRecord } from '../../src/store/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';

type ToolResult = Extract<ContentPart, { type: 'tool_result' }>;
const resultsOf = (messages: MessageRecord[]): ToolResult[] =>
  messages.flatMap((m) => m.content.filter((p): p is ToolResult => p.type === 'tool_result'));
const toolMessages = (request: ModelRequest) => request.messages.filter((m) => m.role === 'tool');
const taskOf = (request: ModelRequest) => String(request.messages[0]?.content ?? '');
/** The id the test put on the task's last line. */
const idIn = (request: ModelRequest) => taskOf(request).trim().split(/\s+/).at(-1)!;

let cycleTarget = '';
const gates = new Map<string, ReturnType<typeof gate>>();
const blocker = defineTool({
  name: 'block',
  description: 'Blocks until the test opens the named gate.',
  input: z.object({ gate: z.string() }),
  execute: async ({ gate: name }) => {
    await gates.get(name)?.promise;
    return { opened: name };
  },
});

// A worker agent: blocks on the gate named in its task (if any), then reports.
const workerScript = (request: ModelRequest) => {
  const task = taskOf(request);
  const gateName = /gate:(\S+)/.exec(task)?.[1];
  if (gateName && toolMessages(request).length === 0)
    return { toolCalls: [{ name: 'block', arguments: { gate: gateName } }] };
  return `worker done: ${task.replace(/\s+/g, ' ').slice(0, 40)}`;
};
const worker = defineAgent({ name: 'worker', tools: [blocker] });

const model = new ScriptedModel({
  worker: workerScript,
  // BG-23: launch with a callback, finish at once, and answer the callback in a new turn.
  launcher: (request) => {
    const last = request.messages.at(-1);
    if (last?.role === 'user' && last.content.includes('"turn_id"')) return 'callback received';
    if (toolMessages(request).length) return 'continuing';
    return {
      toolCalls: [
        {
          name: 'launch_agent',
          arguments: { agent_name: 'worker', task: 'gate:bg23 analyse', callback: true },
        },
      ],
    };
  },
  // BG-19: wait for a turn the application submitted.
  joiner: (request) =>
    toolMessages(request).length
      ? 'joined'
      : { toolCalls: [{ name: 'wait_for', arguments: { turn_ids: [idIn(request)] } }] },
  // Bad input: each call fails with a readable error, the turn goes on.
  careless: (request) =>
    toolMessages(request).length
      ? 'carried on'
      : {
          toolCalls: [
            { name: 'launch_agent', arguments: { agent_name: 'nobody', task: 'x' } },
            { name: 'launch_agent', arguments: { agent_name: 'worker', task: 42 } },
            { name: 'wait_for', arguments: { turn_ids: ['turn_000000000000000000000000'] } },
            { name: 'wait_for', arguments: { turn_ids: [idIn(request)] } },
            { name: 'send_message', arguments: { conversation_id: 'conv_missing', text: 'hello' } },
          ],
        },
  // BG-24 at tool level: a wait that would close a cycle is an error result.
  // BG-24: first blocks, then waits for the turn that already waits for it.
  cyclic: (request) => {
    const answered = toolMessages(request).length;
    if (answered === 0) return { toolCalls: [{ name: 'block', arguments: { gate: 'bg24' } }] };
    if (answered === 1) return { toolCalls: [{ name: 'wait_for', arguments: { turn_ids: [cycleTarget] } }] };
    return 'cycle refused';
  },
  selfish: (request) =>
    toolMessages(request).length
      ? 'self refused'
      : { toolCalls: [{ name: 'wait_for', arguments: { turn_ids: [request.metadata.turnId] } }] },
  sender: (request) =>
    toolMessages(request).length
      ? 'sent'
      : {
          toolCalls: [
            { name: 'send_message', arguments: { conversation_id: idIn(request), text: 'ping from sender' } },
          ],
        },
  inboxer: (request) => `got: ${request.messages.at(-1)?.content}`,
});

const coordination = [launchAgentTool({ agents: [worker] }), waitForTool(), sendMessageTool()];

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      worker,
      defineAgent({ name: 'launcher', tools: coordination }),
      defineAgent({ name: 'joiner', tools: coordination }),
      defineAgent({ name: 'careless', tools: coordination }),
      defineAgent({ name: 'cyclic', tools: [blocker, ...coordination] }),
      defineAgent({ name: 'selfish', tools: coordination }),
      defineAgent({ name: 'sender', tools: coordination }),
      defineAgent({ name: 'inboxer' }),
    ],
    model,
  });
});
afterAll(async () => kit?.stop());

describe('coordination tools', () => {
  it('BG-23 E2E-03 launch_agent with a callback: the parent completes at once; the child result arrives as a delivery that wakes the parent conversation', async () => {
    gates.set('bg23', gate());
    const run = await kit.client.run('launcher', 'Launch the worker');
    const parent = await run.result();
    expect(parent.status).toBe('completed');
    expect(parent.outputText).toBe('continuing');
    const child = (await kit.store.listTurns({ parentTurnId: run.turnId }))[0]!;
    expect(child.agentName).toBe('worker');
    expect(child.options['callback_conversation_id']).toBe(run.conversationId);
    expect(['pending', 'running']).toContain(child.status);
    // The launch result names the child; the parent did not wait for it.
    const [launch] = resultsOf(await kit.store.listMessages(run.conversationId));
    expect(JSON.parse(launch!.text)).toMatchObject({ turn_id: child.id });
    expect(model.callsFor('launcher')).toHaveLength(2);

    gates.get('bg23')!.open();
    await waitUntil(
      async () => (await kit.store.listTurns({ conversationId: run.conversationId })).length === 2,
    );
    await waitUntil(async () =>
      (await kit.store.listTurns({ conversationId: run.conversationId })).every(
        (t) => t.status === 'completed',
      ),
    );
    expect((await kit.store.loadTurn(child.id)).status).toBe('completed');
    const inbox = await kit.client.inbox(run.conversationId);
    expect(inbox).toHaveLength(1);
    expect(inbox[0]!.key).toBe(`completion:${child.id}`);
    expect(inbox[0]!.sourceTurnId).toBe(child.id);
    expect(inbox[0]!.deliveredAt).not.toBeNull();
    const delivered = await kit.store.loadMessage(inbox[0]!.messageId!);
    expect(JSON.parse((delivered.content[0] as { text: string }).text)).toMatchObject({
      turn_id: child.id,
      status: 'completed',
    });
    // The callback woke a new turn of the parent's conversation: 3 launcher model calls in all.
    expect(model.callsFor('launcher')).toHaveLength(3);
    const woken = (await kit.store.listTurns({ conversationId: run.conversationId })).find(
      (t) => t.id !== run.turnId,
    )!;
    expect(woken.outputText).toBe('callback received');
    expect(woken.options['trigger_message_id']).toBe(delivered.id);
  });

  it('BG-19 wait_for: the parent waits without a worker; after the target completes the parent completes with 2 model calls and 1 tool execution', async () => {
    gates.set('bg19', gate());
    const target = await kit.client.run('worker', 'gate:bg19 slow job');
    const parent = await kit.client.run('joiner', `Wait for ${target.turnId}`);
    await waitUntil(async () => (await parent.status()) === 'waiting');
    expect((await parent.turn()).claimToken).toBeNull();
    expect((await kit.store.listWaits({ turnId: parent.turnId })).map((w) => w.targetTurnId)).toEqual([
      target.turnId,
    ]);
    gates.get('bg19')!.open();
    const done = await parent.result();
    expect(done.status).toBe('completed');
    expect(done.outputText).toBe('joined');
    expect(model.callsFor('joiner')).toHaveLength(2);
    const executions = await parent.toolExecutions();
    expect(executions).toHaveLength(1);
    expect(executions[0]!.status).toBe('completed');
    const [result] = resultsOf(await kit.store.listMessages(parent.conversationId));
    expect(JSON.parse(result!.text).results[0]).toMatchObject({
      turn_id: target.turnId,
      status: 'completed',
    });
  });

  it('bad input from the model: unknown agent, wrong argument type, unknown or foreign turn, missing conversation — error results, nothing created, the turn goes on', async () => {
    const foreign = await kit.client.run('worker', 'someone else’s job', { principal: { user: 'mallory' } });
    await foreign.result();
    const run = await kit.client.run('careless', `Try everything ${foreign.turnId}`, {
      principal: { user: 'ada' },
    });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('carried on');
    const results = resultsOf(await kit.store.listMessages(run.conversationId));
    expect(results).toHaveLength(5);
    expect(results.every((r) => r.error)).toBe(true);
    const texts = results.map((r) => JSON.parse(r.text).message as string);
    expect(texts[0]).toContain('unknown sub-agent: nobody');
    expect(texts[1]).toMatch(/task/);
    expect(texts[2]).toContain('unknown turn');
    // Another principal's turn gets the same answer as a missing one: nothing leaks.
    expect(texts[3]).toBe(`unknown turn: ${foreign.turnId}`);
    expect(texts[4]).toContain('unknown conversation: conv_missing');
    expect(await kit.store.listTurns({ parentTurnId: run.turnId })).toHaveLength(0);
    expect(await kit.store.listWaits({ turnId: run.turnId })).toHaveLength(0);
    expect(await kit.client.outbox(run.conversationId)).toHaveLength(0);
  });

  it('BG-24 a wait_for that would close a cycle is an error result with no edge; a wait on itself too', async () => {
    gates.set('bg24', gate());
    const b = await kit.client.run('cyclic', 'Hold, then wait');
    const a = await kit.client.run('joiner', `Wait for ${b.turnId}`);
    await waitUntil(async () => (await a.status()) === 'waiting');
    cycleTarget = a.turnId;
    gates.get('bg24')!.open();
    const bTurn = await b.result();
    expect(bTurn.status).toBe('completed');
    expect(bTurn.outputText).toBe('cycle refused');
    const refused = resultsOf(await kit.store.listMessages(b.conversationId)).at(-1)!;
    expect(refused.error).toBe(true);
    expect(JSON.parse(refused.text).message).toMatch(/cycle/);
    expect(await kit.store.listWaits({ turnId: b.turnId })).toHaveLength(0);
    expect((await a.result()).status).toBe('completed');

    const self = await kit.client.run('selfish', 'Wait for yourself');
    const selfTurn = await self.result();
    expect(selfTurn.status).toBe('completed');
    const [result] = resultsOf(await kit.store.listMessages(self.conversationId));
    expect(result!.error).toBe(true);
    expect(JSON.parse(result!.text).message).toBe('a turn cannot wait for itself');
    expect(await kit.store.listWaits({ turnId: self.turnId })).toHaveLength(0);
  });

  it('send_message delivers once to another conversation and wakes it; the delivery names the sending turn', async () => {
    const destination = await kit.client.conversation('inboxer', { principal: { user: 'owner' } });
    // The same principal: another principal's conversation is refused (security-principals.test.ts).
    const run = await kit.client.run('sender', `Message ${destination.id}`, { principal: { user: 'owner' } });
    expect((await run.result()).outputText).toBe('sent');
    const outbox = await kit.client.outbox(run.conversationId);
    expect(outbox).toHaveLength(1);
    expect(outbox[0]!.sourceTurnId).toBe(run.turnId);
    const [execution] = await run.toolExecutions();
    expect(outbox[0]!.key).toBe(`message:${execution!.id}`);
    await waitUntil(async () =>
      (await kit.store.listTurns({ conversationId: destination.id })).some((t) => t.status === 'completed'),
    );
    const [woken] = await kit.store.listTurns({ conversationId: destination.id });
    expect(woken!.outputText).toBe('got: ping from sender');
    // A wake-up runs under the destination conversation's principal.
    expect(woken!.options['principal']).toEqual({ user: 'owner' });
  });
});
