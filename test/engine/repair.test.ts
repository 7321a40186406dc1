/**
 * Transcript repair (spec §5.9, §9.3): after a turn ends mid-tools every tool call has exactly
 * one result, in the store and in the projection the model would see; repairing again adds
 * nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { repairTranscript } from '../../src/engine/end/transcript-repair.js';
import { outcomeUnknown } from '../../src/engine/step/result-texts.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import { openStore } from '../../src/store/index.js';
import type { ContentPart, MessageRecord, Store } from '../../src/store/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit, tempSqliteUrl } from '../helpers/turnkit.js';
import { hangTool as hang } from '../helpers/tools.js';

type ToolResultPart = Extract<ContentPart, { type: 'tool_result' }>;
const callIds = (messages: MessageRecord[]) =>
  messages.flatMap((m) => m.content.flatMap((p) => (p.type === 'tool_call' ? [p.id] : [])));
const resultParts = (messages: MessageRecord[]) =>
  messages.flatMap((m) => m.content.filter((p): p is ToolResultPart => p.type === 'tool_result'));

const fast = defineTool({
  name: 'fast',
  description: 'Returns at once.',
  input: z.object({}),
  execute: () => ({ fast: true }),
});
const later = defineTool({
  name: 'later',
  description: 'Never reached.',
  input: z.object({}),
  execute: () => ({ later: true }),
});

const threeCalls = {
  toolCalls: [
    { name: 'fast', arguments: {} },
    { name: 'hang', arguments: {} },
    { name: 'later', arguments: {} },
  ],
};
const model = new ScriptedModel({
  '*': (request: ModelRequest) =>
    request.messages.some((m) => m.role === 'tool') ? 'unexpected second call' : threeCalls,
  budgeted: () => ({
    toolCalls: [
      { name: 'fast', arguments: {} },
      { name: 'fast', arguments: {} },
      { name: 'later', arguments: {} },
    ],
  }),
});

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'multi', tools: [fast, hang, later] }),
      defineAgent({ name: 'timed', tools: [fast, hang, later], limits: { timeout: 5 } }),
      defineAgent({ name: 'budgeted', tools: [fast, later], limits: { maxToolExecutions: 2 } }),
    ],
    model,
  });
});
afterAll(async () => kit?.stop());

async function waitUntil(predicate: () => Promise<boolean>, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every tool call has exactly one result, in the store and in the model projection. */
async function expectPaired(turnId: string): Promise<Map<string, ToolResultPart>> {
  const turn = await kit.store.loadTurn(turnId);
  const messages = await kit.store.listMessages(turn.conversationId);
  const calls = callIds(messages);
  const results = resultParts(messages);
  expect(calls.length).toBeGreaterThan(0);
  expect(new Set(calls).size).toBe(calls.length);
  expect(results.map((r) => r.tool_call_id).sort()).toEqual([...calls].sort());

  const { request } = await kit.client.preview(turnId);
  const projected: string[] = [];
  const answered: string[] = [];
  for (const message of request.messages) {
    if (message.role === 'assistant') projected.push(...(message.toolCalls ?? []).map((c) => c.id));
    // A result is projected after the call it answers.
    if (message.role === 'tool') {
      expect(projected).toContain(message.toolCallId);
      answered.push(message.toolCallId);
    }
  }
  expect(projected).toEqual(calls);
  expect(answered.sort()).toEqual([...calls].sort());
  return new Map(results.map((r) => [r.tool_call_id, r]));
}

async function resultsByTool(turnId: string): Promise<Record<string, ToolResultPart>> {
  const paired = await expectPaired(turnId);
  const executions = await kit.store.listToolExecutions({ turnId });
  const turn = await kit.store.loadTurn(turnId);
  const calls = (await kit.store.listMessages(turn.conversationId)).flatMap((m) =>
    m.content.flatMap((p) => (p.type === 'tool_call' ? [p] : [])),
  );
  expect(executions.length).toBeLessThanOrEqual(calls.length);
  return Object.fromEntries(calls.map((c, i) => [`${i}:${c.name}`, paired.get(c.id)!]));
}

describe('RC-02 repair pairs tool calls and results one-to-one', () => {
  it('RC-02 a cancel mid-tools over three tool calls: one result each (real, outcome unknown, not executed), in the store and in client.preview()', async () => {
    const run = await kit.client.run('multi', 'Three tools');
    await waitUntil(async () =>
      (await run.toolExecutions()).some((e) => e.toolName === 'hang' && e.status === 'running'),
    );
    await run.cancel();
    expect((await run.result()).status).toBe('cancelled');

    const results = await resultsByTool(run.turnId);
    expect(JSON.parse(results['0:fast']!.text)).toEqual({ fast: true });
    expect(results['0:fast']!.error).toBe(false);
    expect(JSON.parse(results['1:hang']!.text).message).toBe(outcomeUnknown('turn was cancelled'));
    expect(results['1:hang']!.error).toBe(true);
    expect(JSON.parse(results['2:later']!.text).message).toMatch(/^not executed: /);
    const executions = await run.toolExecutions();
    expect(executions.map((e) => [e.toolName, e.status])).toEqual([
      ['fast', 'completed'],
      ['hang', 'interrupted'],
    ]);
  });

  it('RC-02 a failure mid-tools (root timeout while a tool runs): every call still has exactly one result', async () => {
    const run = await kit.client.run('timed', 'Three tools, too slowly');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error?.message).toBe('turn timed out');
    const results = await resultsByTool(run.turnId);
    expect(results['0:fast']!.error).toBe(false);
    expect(JSON.parse(results['1:hang']!.text).message).toBe(outcomeUnknown('turn failed: turn timed out'));
    expect(JSON.parse(results['2:later']!.text).message).toMatch(/^not executed: turn failed/);
    // Decision 87: no root timer; the hanging call's activity ended at the deadline itself.
    const history = await kit.client.temporal.workflow.getHandle(run.workflowId).fetchHistory();
    const events = history.events ?? [];
    expect(events.filter((e) => e.timerStartedEventAttributes)).toEqual([]);
    expect(events.filter((e) => e.activityTaskTimedOutEventAttributes)).toHaveLength(1);
  });

  it('RC-02 a failure mid-tools (tool budget exhausted on the third call): every call still has exactly one result', async () => {
    const run = await kit.client.run('budgeted', 'Three tools, budget two');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error?.message).toMatch(/maximum tool executions/);
    const results = await resultsByTool(run.turnId);
    expect(Object.values(results).map((r) => r.error)).toEqual([false, false, true]);
  });
});

describe('RC-03 repair never duplicates a result', () => {
  it('RC-03 repairTranscript twice on a turn the engine already repaired appends nothing', async () => {
    const run = await kit.client.run('multi', 'Three tools again');
    await waitUntil(async () =>
      (await run.toolExecutions()).some((e) => e.toolName === 'hang' && e.status === 'running'),
    );
    await run.cancel();
    const turn = await run.result();
    const before = await kit.store.listMessages(turn.conversationId);
    expect(await repairTranscript(kit.store, turn, 'again')).toEqual([]);
    expect(await repairTranscript(kit.store, turn, 'and again')).toEqual([]);
    expect(await kit.store.listMessages(turn.conversationId)).toEqual(before);
    await expectPaired(turn.id);
  });

  describe('on a fresh SQLite store', () => {
    let store: Store;
    beforeAll(async () => {
      store = await openStore(tempSqliteUrl('repair'));
    });
    afterAll(async () => store?.close());

    it('RC-03 already-resolved tool calls keep their one result; the rest get one each; a second repair appends nothing', async () => {
      const conversation = await store.createConversation({ agentName: 'multi' });
      const task = await store.appendMessage({
        conversationId: conversation.id,
        role: 'user',
        content: 'go',
      });
      const turn = await store.createTurn({
        conversationId: conversation.id,
        agentName: 'multi',
        contextMessageSequence: task.sequence,
      });
      const call = (id: string, name: string): ContentPart => ({
        type: 'tool_call',
        id,
        name,
        arguments: {},
      });
      await store.appendMessage({
        conversationId: conversation.id,
        turnId: turn.id,
        role: 'assistant',
        kind: 'tool_call',
        content: [
          call('c_done', 'fast'),
          call('c_failed', 'fast'),
          call('c_running', 'hang'),
          call('c_none', 'later'),
        ],
      });
      const now = new Date().toISOString();
      const done = await store.createToolExecution({
        turnId: turn.id,
        toolCallId: 'c_done',
        toolName: 'fast',
        status: 'running',
        startedAt: now,
      });
      await store.claimToolExecution(done.id, {
        from: 'running',
        to: 'completed',
        result: { fast: true },
        completedAt: now,
      });
      const original = await store.appendMessage({
        conversationId: conversation.id,
        turnId: turn.id,
        role: 'tool',
        kind: 'tool_result',
        content: [{ type: 'tool_result', tool_call_id: 'c_done', text: '{"fast":true}', error: false }],
        toolExecutionId: done.id,
        metadata: { tool_name: 'fast' },
      });
      const failed = await store.createToolExecution({
        turnId: turn.id,
        toolCallId: 'c_failed',
        toolName: 'fast',
        status: 'running',
        startedAt: now,
      });
      await store.claimToolExecution(failed.id, {
        from: 'running',
        to: 'failed',
        error: { message: 'boom' },
        completedAt: now,
      });
      await store.createToolExecution({
        turnId: turn.id,
        toolCallId: 'c_running',
        toolName: 'hang',
        status: 'running',
        startedAt: now,
      });

      const first = await repairTranscript(store, turn, 'test repair');
      expect(first.map((m) => resultParts([m])[0]!.tool_call_id)).toEqual([
        'c_failed',
        'c_running',
        'c_none',
      ]);
      const second = await repairTranscript(store, turn, 'test repair');
      expect(second).toEqual([]);

      const messages = await store.listMessages(conversation.id);
      const results = resultParts(messages);
      expect(results.map((r) => r.tool_call_id).sort()).toEqual([
        'c_done',
        'c_failed',
        'c_none',
        'c_running',
      ]);
      // The resolved call keeps its original message, and only that one.
      expect(messages.filter((m) => resultParts([m])[0]?.tool_call_id === 'c_done').map((m) => m.id)).toEqual(
        [original.id],
      );
      const byId = Object.fromEntries(results.map((r) => [r.tool_call_id, r]));
      expect(byId['c_failed']).toMatchObject({ error: true });
      expect(JSON.parse(byId['c_failed']!.text)).toEqual({ message: 'boom' });
      expect(JSON.parse(byId['c_running']!.text)).toEqual({ message: outcomeUnknown('test repair') });
      expect(JSON.parse(byId['c_none']!.text)).toEqual({ message: 'not executed: test repair' });
      const repaired = messages.filter((m) => first.some((f) => f.id === m.id));
      expect(repaired.map((m) => m.metadata['interrupted'])).toEqual([false, true, false]);
    });
  });
});
