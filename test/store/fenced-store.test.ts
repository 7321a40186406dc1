import { describe, expect, it } from 'vitest';
import { LostClaim, StaleTask } from '../../src/errors.js';
import { phaseOf, turnState } from '../../src/engine/step/turn-state.js';
import { FencedStore } from '../../src/store/fenced-store.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { JsonObject, Store } from '../../src/store/types.js';

const TOKEN = 'a'.repeat(32);
const OTHER = 'b'.repeat(32);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A claimed root turn, a child turn in another conversation, and a fenced store on the child. */
async function setup() {
  const base = new MemoryStore();
  const rootConversation = await base.createConversation({ agentName: 'a' });
  const childConversation = await base.createConversation({ agentName: 'b' });
  const root = await base.createTurn({
    conversationId: rootConversation.id,
    agentName: 'a',
    submittedAt: new Date().toISOString(),
  });
  const child = await base.createTurn({
    conversationId: childConversation.id,
    agentName: 'b',
    rootTurnId: root.id,
    parentTurnId: root.id,
    submittedAt: new Date().toISOString(),
  });
  await base.claimTurn(child.id, { claimToken: TOKEN });
  const execution = await base.createToolExecution({
    turnId: child.id,
    toolCallId: 'c0',
    toolName: 't',
    status: 'running',
  });
  const delivery = await base.createDelivery({
    destinationConversationId: rootConversation.id,
    key: `k-${child.id}`,
    payload: { text: 'x' },
  });
  const fenced = await FencedStore.forTurn(base, child, TOKEN);
  return { base, fenced, rootConversation, childConversation, root, child, execution, delivery };
}

type Setup = Awaited<ReturnType<typeof setup>>;

/** `base`, calling `seen` with the arguments of every call of its method `name`. */
function spy(base: Store, name: keyof Store, seen: (...args: unknown[]) => void): Store {
  return new Proxy(base, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      if (property !== name) return value.bind(target);
      return (...args: unknown[]) => {
        seen(...args);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as Store;
}

/** Every fenced write, as a call on the fenced store. */
const WRITES: Record<string, (s: Setup) => Promise<unknown>> = {
  createConversation: (s) => s.fenced.createConversation({ agentName: 'x' }),
  updateConversation: (s) =>
    s.fenced.updateConversation(s.childConversation.id, { metadata: { late: true } }),
  appendMessage: (s) =>
    s.fenced.appendMessage({ conversationId: s.childConversation.id, role: 'assistant', content: 'late' }),
  nextMessageSequence: (s) => s.fenced.nextMessageSequence(s.childConversation.id),
  createTurn: (s) => s.fenced.createTurn({ conversationId: s.childConversation.id, agentName: 'x' }),
  updateTurn: (s) => s.fenced.updateTurn(s.child.id, { outputText: 'late' }),
  claimTurn: (s) => s.fenced.claimTurn(s.child.id, { from: 'running', to: 'completed' }),
  createToolExecution: (s) =>
    s.fenced.createToolExecution({ turnId: s.child.id, toolCallId: 'c1', toolName: 't' }),
  claimToolExecution: (s) => s.fenced.claimToolExecution(s.execution.id, { result: { late: true } }),
  createDelivery: (s) =>
    s.fenced.createDelivery({ destinationConversationId: s.rootConversation.id, key: 'late', payload: {} }),
  updateDelivery: (s) => s.fenced.updateDelivery(s.delivery.id, { messageId: 'msg_late' }),
  createWait: (s) => s.fenced.createWait({ turnId: s.child.id, targetTurnId: s.root.id }),
};

/** Everything the store holds, for "nothing was written" assertions. */
async function dump(s: Setup) {
  const turns = await s.base.listTurns({ rootTurnId: s.root.id });
  return {
    conversations: await Promise.all(
      [s.rootConversation.id, s.childConversation.id].map((id) => s.base.loadConversation(id)),
    ),
    messages: [
      ...(await s.base.listMessages(s.rootConversation.id)),
      ...(await s.base.listMessages(s.childConversation.id)),
    ],
    turns,
    otherTurns: await s.base.listTurns({ agentName: 'x' }),
    executions: await s.base.listToolExecutions({ turnIds: turns.map((t) => t.id) }),
    deliveries: await s.base.listDeliveries(),
    waits: await s.base.listWaits(),
  };
}

describe('FencedStore', () => {
  for (const [name, write] of Object.entries(WRITES)) {
    it(`${name} raises LostClaim and writes nothing once the token was replaced`, async () => {
      const s = await setup();
      await s.base.updateTurn(s.child.id, { claimToken: OTHER });
      const before = await dump(s);
      const error = await write(s).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LostClaim);
      expect((error as Error).message).toBe('turn ownership was revoked');
      expect(await dump(s)).toEqual(before);
    });

    it(`${name} goes through while the turn is owned`, async () => {
      const s = await setup();
      await expect(write(s)).resolves.not.toBeInstanceOf(Error);
    });
  }

  it('a completed turn (token cleared) fences out its old owner', async () => {
    const s = await setup();
    await s.fenced.claimTurn(s.child.id, { from: 'running', to: 'completed', claimToken: null });
    await expect(
      s.fenced.updateTurn(s.child.id, { heartbeatAt: new Date().toISOString() }),
    ).rejects.toBeInstanceOf(LostClaim);
    expect((await s.base.loadTurn(s.child.id)).heartbeatAt).toBeNull();
  });

  it('reads pass through after revocation', async () => {
    const s = await setup();
    await s.fenced.appendMessage({
      conversationId: s.childConversation.id,
      role: 'assistant',
      content: 'owned',
    });
    await s.base.updateTurn(s.child.id, { claimToken: null });
    expect((await s.fenced.loadTurn(s.child.id)).claimToken).toBeNull();
    expect(await s.fenced.listMessages(s.childConversation.id)).toHaveLength(1);
    expect(await s.fenced.latestMessageSequence(s.childConversation.id)).toBe(1);
    expect(await s.fenced.loadToolExecution(s.execution.id)).toEqual(s.execution);
    expect(await s.fenced.loadDelivery(s.delivery.id)).toEqual(s.delivery);
    expect(await s.fenced.listTurns({ rootTurnId: s.root.id })).toHaveLength(2);
    expect(await s.fenced.busyConversation(s.childConversation.id)).toBe(true);
  });

  it('appendEvent is not fenced: events describe what already committed', async () => {
    const s = await setup();
    await s.base.updateTurn(s.child.id, { claimToken: null });
    const event = await s.fenced.appendEvent({
      turnId: s.child.id,
      conversationId: s.childConversation.id,
      type: 'turn.completed',
    });
    expect(event.sequence).toBe(1);
    expect(await s.base.listEvents(s.child.id)).toEqual([event]);
  });

  it('atomic locks the root conversation whatever it is asked for, and checks the claim before the block', async () => {
    const s = await setup();
    const locked: (string | null)[] = [];
    const spying = spy(s.base, 'atomic', (id) => locked.push(id as string | null));
    const fenced = new FencedStore(spying, {
      turnId: s.child.id,
      claimToken: TOKEN,
      rootConversationId: s.rootConversation.id,
    });
    expect(await fenced.atomic(s.childConversation.id, async () => 'ran')).toBe('ran');
    await fenced.appendMessage({ conversationId: s.childConversation.id, role: 'assistant', content: 'x' });
    expect(locked).toEqual([s.rootConversation.id, s.rootConversation.id]);
    await s.base.updateTurn(s.child.id, { claimToken: OTHER });
    let ran = false;
    await expect(
      fenced.atomic(null, async () => {
        ran = true;
      }),
    ).rejects.toBeInstanceOf(LostClaim);
    expect(ran).toBe(false);
  });

  it('writes inside a checked block join it without a second claim check; work that outlives the block checks again', async () => {
    const s = await setup();
    let loads = 0;
    const counting = spy(s.base, 'loadTurn', () => loads++);
    const fenced = new FencedStore(counting, {
      turnId: s.child.id,
      claimToken: TOKEN,
      rootConversationId: s.rootConversation.id,
    });
    let late!: Promise<unknown>;
    await fenced.atomic(null, async () => {
      await fenced.appendMessage({ conversationId: s.childConversation.id, role: 'assistant', content: 'a' });
      await fenced.updateTurn(s.child.id, { outputText: 'in the block' });
      late = sleep(20).then(() =>
        fenced.appendMessage({ conversationId: s.childConversation.id, role: 'assistant', content: 'late' }),
      );
    });
    expect(loads).toBe(1);
    await s.base.updateTurn(s.child.id, { claimToken: OTHER });
    await expect(late).rejects.toBeInstanceOf(LostClaim);
    expect(await s.base.listMessages(s.childConversation.id)).toHaveLength(1);
  });

  it('forTurn resolves the root conversation of a child turn', async () => {
    const s = await setup();
    expect(s.fenced.fence).toEqual({
      turnId: s.child.id,
      claimToken: TOKEN,
      rootConversationId: s.rootConversation.id,
    });
    expect(s.fenced.backend).toBe('memory');
  });

  it('writes inside one fenced block commit together and roll back together', async () => {
    const s = await setup();
    await expect(
      s.fenced.atomic(null, async () => {
        await s.fenced.appendMessage({
          conversationId: s.childConversation.id,
          role: 'assistant',
          content: 'a',
        });
        await s.fenced.updateTurn(s.child.id, { outputText: 'a' });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await s.base.listMessages(s.childConversation.id)).toEqual([]);
    expect((await s.base.loadTurn(s.child.id)).outputText).toBeNull();
    await s.fenced.atomic(null, async () => {
      await s.fenced.appendMessage({
        conversationId: s.childConversation.id,
        role: 'assistant',
        content: 'b',
      });
      await s.fenced.updateTurn(s.child.id, { outputText: 'b' });
    });
    expect(await s.base.listMessages(s.childConversation.id)).toHaveLength(1);
  });

  it('a revocation waits for an open fenced block; the next fenced write is refused', async () => {
    const s = await setup();
    const block = s.fenced.atomic(null, async () => {
      await sleep(10);
      await s.fenced.updateTurn(s.child.id, { heartbeatAt: '2026-01-01T00:00:00.000Z' });
    });
    await sleep(1);
    const revoke = s.base.atomic(s.rootConversation.id, () =>
      s.base.updateTurn(s.child.id, { claimToken: null, status: 'cancelled' }),
    );
    await Promise.all([block, revoke]);
    expect(await s.base.loadTurn(s.child.id)).toMatchObject({
      status: 'cancelled',
      claimToken: null,
      heartbeatAt: '2026-01-01T00:00:00.000Z',
    });
    await expect(
      s.fenced.updateTurn(s.child.id, { heartbeatAt: new Date().toISOString() }),
    ).rejects.toBeInstanceOf(LostClaim);
  });

  it('atomicGraph takes the graph lock, then the fence', async () => {
    const s = await setup();
    expect(await s.fenced.atomicGraph(async () => 'graph')).toBe('graph');
    await s.base.updateTurn(s.child.id, { claimToken: OTHER });
    await expect(s.fenced.atomicGraph(async () => 'graph')).rejects.toBeInstanceOf(LostClaim);
  });

  it('close leaves the base store open', async () => {
    const s = await setup();
    await s.fenced.close();
    expect((await s.base.loadTurn(s.child.id)).id).toBe(s.child.id);
  });
});

describe('FencedStore: stale workflow tasks of the same run (task marks)', () => {
  const taskMark = async (s: Setup) =>
    ((await s.base.loadTurn(s.child.id)).options['state'] as { task_mark?: unknown } | undefined)?.task_mark;
  const at = (s: Setup, taskHistoryLength: number, token = TOKEN) =>
    new FencedStore(s.base, { ...s.fenced.fence, claimToken: token, taskHistoryLength });
  const append = (store: Store, s: Setup, content: string) =>
    store.appendMessage({ conversationId: s.childConversation.id, role: 'assistant', content });

  it('a store step raises the mark to its task’s history length; a newer task raises it again', async () => {
    const s = await setup();
    await append(at(s, 10), s, 'task 10');
    expect(await taskMark(s)).toEqual({ token: TOKEN, progress: 10 });
    await append(at(s, 10), s, 'task 10 again');
    await append(at(s, 25), s, 'task 25');
    expect(await taskMark(s)).toEqual({ token: TOKEN, progress: 25 });
    // A task whose first write replaces the options (a state update) keeps the mark it raised.
    const store = at(s, 30);
    await store.atomic(null, async () => {
      const turn = await store.loadTurn(s.child.id);
      const state = { ...turnState(turn), phase: 'model' } as JsonObject;
      await store.updateTurn(s.child.id, { options: { ...turn.options, state } });
    });
    expect(await taskMark(s)).toEqual({ token: TOKEN, progress: 30 });
    expect(phaseOf(await s.base.loadTurn(s.child.id))).toBe('model');
  });

  it('an older task of the same run raises StaleTask (a LostClaim) and writes nothing', async () => {
    const s = await setup();
    await append(at(s, 25), s, 'live');
    const before = await s.base.listMessages(s.childConversation.id);
    const stale = append(at(s, 12), s, 'stale');
    await expect(stale).rejects.toBeInstanceOf(StaleTask);
    await expect(append(at(s, 12), s, 'stale')).rejects.toBeInstanceOf(LostClaim);
    await expect(at(s, 12).updateTurn(s.child.id, { outputText: 'stale' })).rejects.toThrow(
      /history 25 > 12/,
    );
    expect(await s.base.listMessages(s.childConversation.id)).toEqual(before);
    expect((await s.base.loadTurn(s.child.id)).outputText).toBeNull();
  });

  it('activities without a task (model, tool) are not fenced by marks; a new token (a reset run) starts its own', async () => {
    const s = await setup();
    await append(at(s, 40), s, 'old run');
    await expect(append(s.fenced, s, 'model step')).resolves.toBeDefined();
    await s.base.updateTurn(s.child.id, { claimToken: OTHER });
    await append(at(s, 5, OTHER), s, 'reset run');
    expect(await taskMark(s)).toEqual({ token: OTHER, progress: 5 });
  });
});
