import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { reconcileStaleTurns } from '../../src/store/maintenance.js';
import type { Store } from '../../src/store/types.js';
import { describeStoreContract } from './contract.js';

describeStoreContract('memory', async () => new MemoryStore());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('memory store transactions', () => {
  it('decision 60: the memory store is the SQL store on SQLite in memory, and memory: URLs open one', async () => {
    const store = await openStore('memory:');
    expect(store).toBeInstanceOf(MemoryStore);
    expect(store.backend).toBe('memory');
    const c = await store.createConversation({ agentName: 'a' });
    const turn = await store.createTurn({ conversationId: c.id, agentName: 'a', options: { iterations: 2 } });
    expect(await store.budgetUsage(turn.id)).toMatchObject({ iterations: 2 });
    await store.close();
    await expect(store.loadConversation(c.id)).rejects.toThrow(/closed/);
  });

  it('atomic blocks from unrelated async contexts queue instead of interleaving', async () => {
    const store = new MemoryStore();
    const [x, y] = [
      await store.createConversation({ agentName: 'a' }),
      await store.createConversation({ agentName: 'a' }),
    ];
    const trace: string[] = [];
    await Promise.all(
      [x.id, y.id].map((id) =>
        store.atomic(id, async () => {
          trace.push(`start ${id}`);
          await sleep(5);
          trace.push(`end ${id}`);
        }),
      ),
    );
    expect(trace).toEqual([`start ${x.id}`, `end ${x.id}`, `start ${y.id}`, `end ${y.id}`]);
  });

  it('a reader outside an open block waits for it, and never sees what it rolled back', async () => {
    const store = new MemoryStore();
    const c = await store.createConversation({ agentName: 'a' });
    let inside!: () => void;
    const written = new Promise<void>((resolve) => (inside = resolve));
    let finish!: () => void;
    const held = new Promise<void>((resolve) => (finish = resolve));
    const block = store.atomic(c.id, async () => {
      await store.appendMessage({ conversationId: c.id, role: 'user', content: 'uncommitted' });
      inside();
      await held;
      throw new Error('rolled back');
    });
    await written;
    const reading = store.listMessages(c.id);
    finish();
    await expect(block).rejects.toThrow('rolled back');
    expect(await reading).toEqual([]);
    expect(await store.latestMessageSequence(c.id)).toBe(0);
  });

  it('a write outside atomic waits for an open transaction and survives its rollback', async () => {
    const store = new MemoryStore();
    const c = await store.createConversation({ agentName: 'a' });
    let started!: () => void;
    const opened = new Promise<void>((resolve) => (started = resolve));
    const doomed = store.atomic(c.id, async () => {
      started();
      await sleep(10);
      await store.appendMessage({ conversationId: c.id, role: 'user', content: 'doomed' });
      throw new Error('boom');
    });
    await opened;
    const outside = store.appendMessage({ conversationId: c.id, role: 'user', content: 'outside' });
    await expect(doomed).rejects.toThrow('boom');
    expect((await outside).sequence).toBe(1);
    expect((await store.listMessages(c.id)).map((m) => m.content[0])).toEqual([
      { type: 'text', text: 'outside' },
    ]);
  });

  it('work left running after a block returned does not join the finished transaction', async () => {
    const store = new MemoryStore();
    const c = await store.createConversation({ agentName: 'a' });
    let straggler!: Promise<unknown>;
    await store.atomic(c.id, async () => {
      straggler = sleep(5).then(() =>
        store.atomic(c.id, () =>
          store.appendMessage({ conversationId: c.id, role: 'user', content: 'late' }),
        ),
      );
    });
    await expect(
      store.atomic(c.id, async () => {
        await sleep(10);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    await straggler;
    expect(await store.listMessages(c.id)).toHaveLength(1);
  });

  it('close resolves and can be called twice', async () => {
    const store = new MemoryStore();
    await store.close();
    await expect(store.close()).resolves.toBeUndefined();
  });

  it('separate stores share nothing', async () => {
    const [a, b] = [new MemoryStore(), new MemoryStore()];
    const c = await a.createConversation({ agentName: 'a' });
    await expect(b.loadConversation(c.id)).rejects.toThrow(/not found/);
  });
});

describe('reconcileStaleTurns (shared maintenance)', () => {
  it('rechecks each listed turn under the lock: one that heartbeated since the listing is kept', async () => {
    const store = new MemoryStore();
    const c = await store.createConversation({ agentName: 'a' });
    const [revived, dead] = [
      await store.createTurn({ conversationId: c.id, agentName: 'a' }),
      await store.createTurn({ conversationId: c.id, agentName: 'a' }),
    ];
    for (const turn of [revived, dead]) {
      await store.claimTurn(turn.id, { heartbeatAt: '2000-01-01T00:00:00.000Z' });
    }
    const racing = new Proxy(store, {
      get(target, property, receiver) {
        if (property === 'listStaleInlineTurns') {
          return async (options: { before: string; limit: number }) => {
            const listed = await target.listStaleInlineTurns(options);
            await target.updateTurn(revived.id, { heartbeatAt: new Date().toISOString() });
            return listed;
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Store;
    const stale = await reconcileStaleTurns(racing, { before: '2001-01-01T00:00:00.000Z' });
    expect(stale.map((t) => t.id)).toEqual([dead.id]);
    expect((await store.loadTurn(revived.id)).status).toBe('running');
    expect((await store.loadTurn(dead.id)).status).toBe('stale');
  });

  it('locks the root conversation of a child turn', async () => {
    const store = new MemoryStore();
    const [rootConversation, childConversation] = [
      await store.createConversation({ agentName: 'a' }),
      await store.createConversation({ agentName: 'a' }),
    ];
    const root = await store.createTurn({ conversationId: rootConversation.id, agentName: 'a' });
    const child = await store.createTurn({
      conversationId: childConversation.id,
      agentName: 'a',
      rootTurnId: root.id,
    });
    await store.updateTurn(child.id, { startedAt: '2000-01-01T00:00:00.000Z' });
    const locked: (string | null)[] = [];
    const spying = new Proxy(store, {
      get(target, property, receiver) {
        if (property === 'atomic') {
          return (id: string | null, fn: () => Promise<unknown>) => {
            locked.push(id);
            return target.atomic(id, fn);
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Store;
    await reconcileStaleTurns(spying, { before: '2001-01-01T00:00:00.000Z' });
    expect(locked).toEqual([rootConversation.id]);
  });
});
