import { describe, expect, it } from 'vitest';
import { ArgumentError, ToolError } from '../../src/errors.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { NewTurn, Store } from '../../src/store/types.js';
import { addWaits, deadlineExceeded, waitReachable, waitsReady } from '../../src/store/wait-graph.js';

async function world() {
  const store = new MemoryStore();
  const lane = async () => (await store.createConversation({ agentName: 'a' })).id;
  const turn = (conversationId: string, extra: Partial<NewTurn> = {}) =>
    store.createTurn({ conversationId, agentName: 'a', submittedAt: new Date().toISOString(), ...extra });
  return { store, lane, turn };
}

const refusal = async (promise: Promise<unknown>) => {
  const error = await promise.catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ToolError);
  return (error as Error).message;
};

describe('addWaits', () => {
  it('creates edges idempotently and returns them', async () => {
    const { store, lane, turn } = await world();
    const [x, y, z] = [await lane(), await lane(), await lane()];
    const [a, b, c] = [await turn(x), await turn(y), await turn(z)];
    const edges = await addWaits(store, { turnId: a.id, targetTurnIds: [b.id, c.id] });
    expect(edges.map((e) => e.targetTurnId)).toEqual([b.id, c.id]);
    await addWaits(store, { turnId: a.id, targetTurnIds: [b.id] });
    expect(await store.listWaits({ turnId: a.id })).toHaveLength(2);
  });

  it('refuses a turn waiting for itself', async () => {
    const { store, lane, turn } = await world();
    const a = await turn(await lane());
    expect(await refusal(addWaits(store, { turnId: a.id, targetTurnIds: [a.id] }))).toBe(
      'a turn cannot wait for itself',
    );
  });

  it('refuses unsubmitted unfinished targets, accepts finished ones', async () => {
    const { store, lane, turn } = await world();
    const [x, y] = [await lane(), await lane()];
    const a = await turn(x);
    const inline = await turn(y, { submittedAt: null });
    expect(await refusal(addWaits(store, { turnId: a.id, targetTurnIds: [inline.id] }))).toBe(
      'wait targets must be submitted',
    );
    await store.updateTurn(inline.id, { status: 'completed' });
    await addWaits(store, { turnId: a.id, targetTurnIds: [inline.id] });
    expect(await store.listWaits({ turnId: a.id })).toHaveLength(1);
  });

  it('refuses unfinished work in the same conversation, accepts finished work there', async () => {
    const { store, lane, turn } = await world();
    const x = await lane();
    const [earlier, a] = [await turn(x), await turn(x)];
    expect(await refusal(addWaits(store, { turnId: a.id, targetTurnIds: [earlier.id] }))).toBe(
      'cannot wait for unfinished work in the same conversation',
    );
    await store.updateTurn(earlier.id, { status: 'failed' });
    await addWaits(store, { turnId: a.id, targetTurnIds: [earlier.id] });
    expect(await store.listWaits({ turnId: a.id })).toHaveLength(1);
  });

  it('is all-or-nothing: a refused target leaves no edge for the accepted ones before it', async () => {
    const { store, lane, turn } = await world();
    const [x, y] = [await lane(), await lane()];
    const [a, b] = [await turn(x), await turn(y)];
    await expect(addWaits(store, { turnId: a.id, targetTurnIds: [b.id, a.id] })).rejects.toBeInstanceOf(
      ToolError,
    );
    expect(await store.listWaits({ turnId: a.id })).toEqual([]);
  });

  it('with transition: a submitted pending turn with unfinished targets becomes waiting', async () => {
    const { store, lane, turn } = await world();
    const [x, y] = [await lane(), await lane()];
    const [a, b] = [await turn(x), await turn(y)];
    await addWaits(store, { turnId: a.id, targetTurnIds: [b.id], transition: true });
    expect((await store.loadTurn(a.id)).status).toBe('waiting');
  });

  it('with transition: a ready turn, or an unsubmitted one, stays pending', async () => {
    const { store, lane, turn } = await world();
    const [x, y, z] = [await lane(), await lane(), await lane()];
    const done = await turn(y, { status: 'completed' });
    const ready = await turn(x);
    await addWaits(store, { turnId: ready.id, targetTurnIds: [done.id], transition: true });
    expect((await store.loadTurn(ready.id)).status).toBe('pending');
    const inline = await turn(z, { submittedAt: null });
    const target = await turn(y);
    await addWaits(store, { turnId: inline.id, targetTurnIds: [target.id], transition: true });
    expect((await store.loadTurn(inline.id)).status).toBe('pending');
    expect(await store.listWaits({ turnId: inline.id })).toHaveLength(1);
  });

  it('with transition only pending turns can wait; without it any turn may add edges', async () => {
    const { store, lane, turn } = await world();
    const [x, y] = [await lane(), await lane()];
    const [a, b] = [await turn(x, { status: 'running' }), await turn(y)];
    const error = await addWaits(store, { turnId: a.id, targetTurnIds: [b.id], transition: true }).catch(
      (e) => e,
    );
    expect(error).toBeInstanceOf(ArgumentError);
    expect(error.message).toBe('only pending turns can wait');
    expect(await store.listWaits({ turnId: a.id })).toEqual([]);
    await addWaits(store, { turnId: a.id, targetTurnIds: [b.id] });
    expect((await store.loadTurn(a.id)).status).toBe('running');
  });

  it('a finished turn in the middle breaks a would-be cycle', async () => {
    const { store, lane, turn } = await world();
    const [x, y, z] = [await lane(), await lane(), await lane()];
    const [a, b, c] = [await turn(x), await turn(y), await turn(z)];
    await addWaits(store, { turnId: a.id, targetTurnIds: [b.id] });
    await addWaits(store, { turnId: b.id, targetTurnIds: [c.id] });
    expect(await refusal(addWaits(store, { turnId: c.id, targetTurnIds: [a.id] }))).toBe(
      'wait would create a cycle',
    );
    await store.updateTurn(b.id, { status: 'completed' });
    await addWaits(store, { turnId: c.id, targetTurnIds: [a.id] });
    expect(await store.listWaits({ turnId: c.id })).toHaveLength(1);
  });

  it('takes the graph lock, then the root conversation of the waiting turn', async () => {
    const { store, lane, turn } = await world();
    const [x, y, z] = [await lane(), await lane(), await lane()];
    const root = await turn(x);
    const child = await turn(y, { rootTurnId: root.id, parentTurnId: root.id });
    const target = await turn(z);
    const locks: string[] = [];
    const spying = new Proxy(store, {
      get(base, property, receiver) {
        if (property === 'atomic') {
          return (id: string | null, fn: () => Promise<unknown>) => {
            locks.push(`conversation ${id}`);
            return base.atomic(id, fn);
          };
        }
        if (property === 'atomicGraph') {
          return (fn: () => Promise<unknown>) => {
            locks.push('graph');
            return base.atomicGraph(fn);
          };
        }
        const value = Reflect.get(base, property, receiver);
        return typeof value === 'function' ? value.bind(base) : value;
      },
    }) as Store;
    await addWaits(spying, { turnId: child.id, targetTurnIds: [target.id] });
    expect(locks).toEqual(['graph', `conversation ${x}`]);
  });
});

describe('waitReachable', () => {
  it('follows every unfinished turn of a lane and terminates on cycles that do not reach the waiter', async () => {
    const { store, lane, turn } = await world();
    const [w, x, y] = [await lane(), await lane(), await lane()];
    const waiter = await turn(w);
    const [p, q] = [await turn(x), await turn(y)];
    // A raw cycle between x and y that never reaches w.
    await store.createWait({ turnId: p.id, targetTurnId: q.id });
    await store.createWait({ turnId: q.id, targetTurnId: p.id });
    expect(await waitReachable(store, p, waiter)).toBe(false);
    const sibling = await turn(y);
    await store.createWait({ turnId: sibling.id, targetTurnId: await turn(w).then((t) => t.id) });
    expect(await waitReachable(store, p, waiter)).toBe(true);
  });

  it('a finished target reaches nothing; an unfinished one in the waiter’s conversation reaches it', async () => {
    const { store, lane, turn } = await world();
    const [w, x] = [await lane(), await lane()];
    const waiter = await turn(w);
    expect(await waitReachable(store, await turn(w), waiter)).toBe(true);
    expect(await waitReachable(store, await turn(w, { status: 'cancelled' }), waiter)).toBe(false);
    expect(await waitReachable(store, await turn(x), waiter)).toBe(false);
  });
});

describe('waitsReady', () => {
  it('is true when every target is terminal; stale is not terminal', async () => {
    const { store, lane, turn } = await world();
    const [x, y] = [await lane(), await lane()];
    const a = await turn(x);
    expect(await waitsReady(store, a.id)).toBe(true);
    const [b, c] = [await turn(y), await turn(await lane())];
    await addWaits(store, { turnId: a.id, targetTurnIds: [b.id, c.id] });
    expect(await waitsReady(store, a.id)).toBe(false);
    await store.updateTurn(b.id, { status: 'completed' });
    await store.updateTurn(c.id, { status: 'stale' });
    expect(await waitsReady(store, a.id)).toBe(false);
    await store.updateTurn(c.id, { status: 'failed' });
    expect(await waitsReady(store, a.id)).toBe(true);
  });
});

describe('deadlineExceeded', () => {
  const at = (iso: string) => new Date(iso);

  it('counts the root’s budget_limits.timeout from its submission', async () => {
    const { store, lane, turn } = await world();
    const x = await lane();
    const root = await turn(x, {
      submittedAt: '2026-01-01T00:00:00.000Z',
      options: { budget_limits: { timeout: 60 } },
    });
    const child = await turn(await lane(), {
      rootTurnId: root.id,
      options: { budget_limits: { timeout: 1 } },
    });
    const options = { defaultTimeout: 5 };
    expect(await deadlineExceeded(store, child, { ...options, now: at('2026-01-01T00:00:59.999Z') })).toBe(
      false,
    );
    expect(await deadlineExceeded(store, child, { ...options, now: at('2026-01-01T00:01:00.000Z') })).toBe(
      true,
    );
  });

  it('uses the default when the key is absent, never when it is explicitly null, startedAt when unsubmitted', async () => {
    const { store, lane, turn } = await world();
    const x = await lane();
    const absent = await turn(x, { submittedAt: '2026-01-01T00:00:00.000Z' });
    const never = await turn(x, {
      submittedAt: '2026-01-01T00:00:00.000Z',
      options: { budget_limits: { timeout: null } },
    });
    const inline = await turn(x, { submittedAt: null });
    const now = at('2026-01-01T00:00:10.000Z');
    expect(await deadlineExceeded(store, absent, { defaultTimeout: 5, now })).toBe(true);
    expect(await deadlineExceeded(store, absent, { defaultTimeout: null, now })).toBe(false);
    expect(await deadlineExceeded(store, never, { defaultTimeout: 5, now })).toBe(false);
    expect(await deadlineExceeded(store, inline, { defaultTimeout: 5, now })).toBe(false);
    const started = await store.updateTurn(inline.id, { startedAt: '2026-01-01T00:00:00.000Z' });
    expect(await deadlineExceeded(store, started, { defaultTimeout: 5, now })).toBe(true);
  });
});
