/**
 * `TurnStep` and its write blocks (`TurnTx`, issue 29) against the memory store, without a
 * server: the block's read is the fence check, what it changes is one update at its end, its
 * events reach listeners only after the commit, and a block that throws writes nothing.
 */
import { describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { Runtime } from '../../src/engine/runtime.js';
import { turnEvent } from '../../src/engine/step/events.js';
import { phaseOf, turnState } from '../../src/engine/step/turn-state.js';
import { TurnStep } from '../../src/engine/step/turn-step.js';
import { LostClaim } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { EventRecord, Store, TurnUpdate } from '../../src/store/types.js';

const TOKEN = 'claim_token_of_the_test';
const cost = (total: number) => ({
  total,
  details: { input: null, output: null, cache_read: null, cache_write: null, thinking: null, total },
});

/** The memory store, counting reads and updates of one turn's row. */
function counting(base: MemoryStore) {
  const count = { loads: 0, updates: [] as TurnUpdate[] };
  let turnId = '';
  const store = new Proxy(base, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      if (property === 'loadTurn')
        return (id: string) => {
          if (id === turnId) count.loads += 1;
          return target.loadTurn(id);
        };
      if (property === 'updateTurn')
        return (id: string, attrs: TurnUpdate) => {
          if (id === turnId) count.updates.push(attrs);
          return target.updateTurn(id, attrs);
        };
      return (value as (...args: unknown[]) => unknown).bind(target);
    },
  }) as Store;
  return { store, count, watch: (id: string) => (turnId = id) };
}

async function setup() {
  const base = new MemoryStore();
  const { store, count, watch } = counting(base);
  const heard: { event: EventRecord; sawWrite: boolean }[] = [];
  const runtime = new Runtime({
    store,
    agents: new AgentRegistry([defineAgent({ name: 'tester' })]),
    model: new ScriptedModel({ tester: () => ({ text: 'unused' }) }),
    defaultModel: 'scripted',
    onEvent: async (event) => {
      // The listener reads the row: after the commit it sees the block's write.
      const row = await base.loadTurn(event.turnId!);
      heard.push({ event, sawWrite: row.outputText === 'partial' });
    },
  });
  const conversation = await base.createConversation({ agentName: 'tester' });
  const turn = await base.createTurn({
    conversationId: conversation.id,
    agentName: 'tester',
    status: 'running',
  });
  await base.updateTurn(turn.id, { claimToken: TOKEN });
  watch(turn.id);
  return { base, runtime, count, heard, turnId: turn.id };
}

describe('TurnStep (issue 29)', () => {
  it('a block: one read (the fence check), one update of state, usage and status, events after the commit', async () => {
    const s = await setup();
    const step = await TurnStep.open(s.runtime, { turnId: s.turnId, claimToken: TOKEN });
    expect(s.count.loads).toBe(1);

    await step.write(async (tx) => {
      tx.patchState({ phase: 'model' });
      tx.charge({ inputTokens: 10, outputTokens: 5 }, cost(0.25));
      tx.charge({ inputTokens: 1, outputTokens: 1 }, cost(0.5));
      tx.set({ outputText: 'partial' });
      tx.emit(turnEvent('model.requested', { n: 1 }));
      // Reading the row inside the block answers from the block's own read.
      expect((await tx.store.loadTurn(s.turnId)).id).toBe(s.turnId);
      expect(tx.state.phase).toBe('model');
      expect(s.heard).toHaveLength(0);
    });

    expect(s.count.loads).toBe(2);
    expect(s.count.updates).toHaveLength(1);
    const row = await s.base.loadTurn(s.turnId);
    expect(phaseOf(row)).toBe('model');
    expect(row.cost).toBeCloseTo(0.75);
    expect(row.usage).toMatchObject({ input_tokens: 11, output_tokens: 6 });
    expect(row.outputText).toBe('partial');
    expect(step.turn.outputText).toBe('partial');
    expect(s.heard.map((h) => h.event.type)).toEqual(['model.requested']);
    expect(s.heard[0]!.sawWrite).toBe(true);
  });

  it('a block that throws writes nothing and tells no listener', async () => {
    const s = await setup();
    const step = await TurnStep.open(s.runtime, { turnId: s.turnId, claimToken: TOKEN });
    await expect(
      step.write(async (tx) => {
        tx.patchState({ phase: 'model' });
        tx.set({ outputText: 'partial' });
        tx.emit(turnEvent('model.requested'));
        throw new Error('the block failed');
      }),
    ).rejects.toThrow('the block failed');
    const row = await s.base.loadTurn(s.turnId);
    expect(turnState(row).phase).toBeUndefined();
    expect(row.outputText).toBeNull();
    expect(s.count.updates).toHaveLength(0);
    expect(s.heard).toHaveLength(0);
    expect(await s.base.listEvents(s.turnId)).toHaveLength(0);
  });

  it('a claim taken over since the step opened: LostClaim at the block, and nothing written', async () => {
    const s = await setup();
    const step = await TurnStep.open(s.runtime, { turnId: s.turnId, claimToken: TOKEN });
    await s.base.updateTurn(s.turnId, { claimToken: 'another_owner' });
    const before = turnState(await s.base.loadTurn(s.turnId));
    await expect(step.write(async (tx) => tx.patchState({ phase: 'model' }))).rejects.toBeInstanceOf(
      LostClaim,
    );
    expect(turnState(await s.base.loadTurn(s.turnId))).toEqual(before);
    expect(s.heard).toHaveLength(0);
  });

  it('countError counts one step’s errors across blocks and starts over for another step', async () => {
    const s = await setup();
    const step = await TurnStep.open(s.runtime, { turnId: s.turnId, claimToken: TOKEN });
    expect(await step.write(async (tx) => tx.countError('provider_errors', 'model:1'))).toBe(1);
    expect(await step.write(async (tx) => tx.countError('provider_errors', 'model:1'))).toBe(2);
    expect(await step.write(async (tx) => tx.countError('provider_errors', 'model:2'))).toBe(1);
    expect(turnState(await s.base.loadTurn(s.turnId)).provider_errors).toEqual({ step: 'model:2', count: 1 });
  });
});
