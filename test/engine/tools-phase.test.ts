/**
 * Closing the tools phase (engine level, memory store): a stale workflow task shares its
 * run's claim token, so the store step that closes the phase checks that every call it
 * closes over has run to an end.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { Runtime } from '../../src/engine/runtime.js';
import { runToolCall } from '../../src/engine/tools/tool-call.js';
import { finishToolsPhase } from '../../src/engine/tools/tools-phase.js';
import { phaseOf } from '../../src/engine/step/turn-state.js';
import { LostClaim, StaleTask } from '../../src/errors.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { ToolCallInput } from '../../src/contract/activities.js';

async function turnInToolsPhase() {
  const store = new MemoryStore();
  const runtime = new Runtime({ store, agents: new AgentRegistry([defineAgent({ name: 'a' })]) });
  const conversation = await store.createConversation({ agentName: 'a' });
  const calls = ['call_1', 'call_2'].map((id) => ({ type: 'tool_call', id, name: 'lookup', arguments: {} }));
  const turn = await store.createTurn({
    conversationId: conversation.id,
    agentName: 'a',
    options: { state: { phase: 'tools', parts: calls } },
  });
  await store.claimTurn(turn.id, { claimToken: 'token' });
  const execution = (toolCallId: string, status: 'running' | 'completed') =>
    store.createToolExecution({ turnId: turn.id, toolCallId, toolName: 'lookup', arguments: {}, status });
  return { store, runtime, turn, execution };
}

describe('closing the tools phase', () => {
  it('refuses with StaleTask while a call is still open and leaves the phase as it was', async () => {
    const { store, runtime, turn, execution } = await turnInToolsPhase();
    await execution('call_1', 'completed');
    const second = await execution('call_2', 'running');
    const close = () =>
      finishToolsPhase(runtime, { turnId: turn.id, claimToken: 'token', terminalToolCallId: null });

    // Only a stale workflow task can get here: it must stop (StaleTask), not fail the turn.
    await expect(close()).rejects.toThrow(StaleTask);
    await expect(close()).rejects.toThrow(/calls are still open \(call_2\)/);
    expect(phaseOf(await store.loadTurn(turn.id))).toBe('tools');

    await store.claimToolExecution(second.id, { from: 'running', to: 'completed', result: { ok: true } });
    expect((await close()).phase).toBe('model');
  });

  it('a terminal call closes over the calls before it only; the later ones are skipped', async () => {
    const { store, runtime, turn, execution } = await turnInToolsPhase();
    await execution('call_1', 'completed');
    const digest = await finishToolsPhase(runtime, {
      turnId: turn.id,
      claimToken: 'token',
      terminalToolCallId: 'call_1',
    });
    expect(digest.phase).toBe('output');
    const rows = await store.listToolExecutions({ turnId: turn.id });
    expect(rows.map((r) => [r.toolCallId, r.status])).toEqual([
      ['call_1', 'completed'],
      ['call_2', 'cancelled'],
    ]);
  });

  describe('by the closing call itself (decision 28)', () => {
    let runs = 0;
    const lookup = defineTool({
      name: 'lookup',
      description: 'Looks up.',
      input: z.object({}),
      execute: () => ({ n: ++runs }),
    });
    const finish = defineTool({
      name: 'finish',
      description: 'Ends.',
      input: z.object({}),
      terminal: true,
      execute: () => ({ done: true }),
    });
    async function turnWith(names: string[]) {
      const store = new MemoryStore();
      const agents = new AgentRegistry([defineAgent({ name: 'a', tools: [lookup, finish] })]);
      const runtime = new Runtime({ store, agents });
      const conversation = await store.createConversation({ agentName: 'a' });
      const parts = names.map((name, i) => ({ type: 'tool_call', id: `call_${i + 1}`, name, arguments: {} }));
      const turn = await store.createTurn({
        conversationId: conversation.id,
        agentName: 'a',
        options: { state: { phase: 'tools', parts } },
      });
      await store.claimTurn(turn.id, { claimToken: 'token' });
      const call = (toolCallId: string, close?: { last: boolean }, claimToken = 'token') =>
        runToolCall(
          runtime,
          { turnId: turn.id, claimToken, toolCallId, ...(close ? { close } : {}) },
          { signal: new AbortController().signal, heartbeat: () => undefined, maxAttempts: 3 },
        );
      const dispatch = (toolCallId: string, extra: Partial<ToolCallInput>) =>
        runToolCall(
          runtime,
          { turnId: turn.id, claimToken: 'token', toolCallId, ...extra },
          { signal: new AbortController().signal, heartbeat: () => undefined, maxAttempts: 3 },
        );
      return { store, turn, call, dispatch };
    }

    it('the last ordinary call closes the phase back to the model; a call before it does not', async () => {
      const { store, turn, call } = await turnWith(['lookup', 'lookup']);
      const first = await call('call_1', { last: false });
      expect(first.closed).toBeUndefined();
      expect(phaseOf(await store.loadTurn(turn.id))).toBe('tools');
      const last = await call('call_2', { last: true });
      expect(last).toMatchObject({ status: 'completed', terminal: false, closed: { phase: 'model' } });
      expect(phaseOf(await store.loadTurn(turn.id))).toBe('model');
    });

    it('a completed terminal call closes to the output phase and skips the calls after it', async () => {
      const { store, turn, call } = await turnWith(['finish', 'lookup']);
      const outcome = await call('call_1', { last: false });
      expect(outcome).toMatchObject({ terminal: true, closed: { phase: 'output' } });
      const rows = await store.listToolExecutions({ turnId: turn.id });
      expect(rows.map((r) => [r.toolCallId, r.status])).toEqual([
        ['call_1', 'completed'],
        ['call_2', 'cancelled'],
      ]);
    });

    it('run again after it closed the phase (its worker died before reporting), it reports the close and runs nothing', async () => {
      const { store, turn, call } = await turnWith(['lookup']);
      const before = runs;
      const first = await call('call_1', { last: true });
      const again = await call('call_1', { last: true });
      expect(runs).toBe(before + 1);
      expect(again).toEqual(first);
      expect(phaseOf(await store.loadTurn(turn.id))).toBe('model');
      // Another run's token (a reset took the turn over) is refused as any write would be.
      await expect(call('call_1', { last: true }, 'other')).rejects.toThrow(LostClaim);
    });

    it('decision 89: given finish, the terminal call’s closing block makes the terminal write; the digest is the close the workflow saw, with done', async () => {
      const { store, turn, dispatch } = await turnWith(['finish', 'lookup']);
      const outcome = await dispatch('call_1', { close: { last: false }, finish: { controls: 0 } });
      expect(outcome).toMatchObject({
        status: 'completed',
        terminal: true,
        closed: { status: 'running', phase: 'output', done: { done: true, status: 'completed' } },
      });
      const done = await store.loadTurn(turn.id);
      expect(done).toMatchObject({ status: 'completed', claimToken: null });
      const messages = await store.listMessages(turn.conversationId);
      expect(messages.map((m) => [m.role, m.kind])).toEqual([
        ['tool', 'tool_result'],
        ['tool', 'tool_result'],
        ['assistant', 'text'],
      ]);
      expect(done.outputText).toBe((messages[2]!.content[0] as { text: string }).text);
      const events = (await store.listEvents(turn.id)).map((e) => e.type);
      expect(events.filter((type) => type === 'turn.completed')).toHaveLength(1);
      expect(events.indexOf('tool_call.completed')).toBeLessThan(events.indexOf('turn.completed'));
      const rows = await store.listToolExecutions({ turnId: turn.id });
      expect(rows.map((r) => [r.toolCallId, r.status])).toEqual([
        ['call_1', 'completed'],
        ['call_2', 'cancelled'],
      ]);
    });

    it('decision 89: a pause or steering authorized meanwhile keeps the terminal write out of the closing block', async () => {
      const { store, turn, dispatch } = await turnWith(['finish']);
      const outcome = await dispatch('call_1', { close: { last: true }, finish: { controls: 1 } });
      expect(outcome.closed).toMatchObject({ status: 'running', phase: 'output' });
      expect(outcome.closed?.done).toBeUndefined();
      expect(await store.loadTurn(turn.id)).toMatchObject({ status: 'running', claimToken: 'token' });
    });

    it('decision 89: dispatched again after its result committed, the call is found in the block that would create its row; the tool runs once', async () => {
      const { store, turn, dispatch } = await turnWith(['lookup', 'lookup']);
      const before = runs;
      const first = await dispatch('call_1', {});
      const again = await dispatch('call_1', {});
      expect(runs).toBe(before + 1);
      expect(again).toEqual(first);
      expect(await store.listToolExecutions({ turnId: turn.id })).toHaveLength(1);
      const results = (await store.listMessages(turn.conversationId)).filter((m) => m.kind === 'tool_result');
      expect(results).toHaveLength(1);
    });

    it('without `close` (runs recorded before it) the phase stays open for the finishTools step', async () => {
      const { store, turn, call } = await turnWith(['finish']);
      expect((await call('call_1')).closed).toBeUndefined();
      expect(phaseOf(await store.loadTurn(turn.id))).toBe('tools');
    });
  });
});
