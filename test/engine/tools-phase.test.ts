/**
 * Closing the tools phase (engine level, memory store): a stale workflow task shares its
 * run's claim token, so the store step that closes the phase checks that every call it
 * closes over has run to an end.
 */
import { describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { Runtime } from '../../src/engine/runtime.js';
import { finishToolsPhase } from '../../src/engine/tools-phase.js';
import { phaseOf } from '../../src/engine/turn-state.js';
import { StaleTask } from '../../src/errors.js';
import { MemoryStore } from '../../src/store/memory-store.js';

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
});
