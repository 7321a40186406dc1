/**
 * In-process transaction behaviour of the SQL backends, beyond the shared contract: what
 * readers outside a block see, writes queued behind a block, operations of one block run
 * concurrently, work that outlives its block, and two stores (two connections) in one
 * process contending for the same rows.
 */
import { expect, it } from 'vitest';
import { StoreError } from '../../../src/errors.js';
import type { Store } from '../../../src/store/types.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function defineTransactionTests(
  backend: 'sqlite' | 'postgres',
  open: () => Promise<{ store: Store; second: () => Promise<Store>; close(): Promise<void> }>,
): void {
  const withStore = (fn: (store: Store, second: () => Promise<Store>) => Promise<void>) => async () => {
    const { store, second, close } = await open();
    try {
      await fn(store, second);
    } finally {
      await close();
    }
  };

  it(
    `${backend}: readers outside an open block see committed rows only, without waiting for it`,
    withStore(async (store) => {
      const c = await store.createConversation({ agentName: 'a' });
      let written!: () => void;
      const inside = new Promise<void>((resolve) => (written = resolve));
      let finish!: () => void;
      const held = new Promise<void>((resolve) => (finish = resolve));
      const block = store.atomic(c.id, async () => {
        await store.appendMessage({ conversationId: c.id, role: 'user', content: 'uncommitted' });
        written();
        await held;
      });
      await inside;
      expect(await store.listMessages(c.id)).toEqual([]);
      expect(await store.latestMessageSequence(c.id)).toBe(0);
      finish();
      await block;
      expect(await store.listMessages(c.id)).toHaveLength(1);
    }),
  );

  it(
    `${backend}: a write outside atomic waits for the open block on its conversation and survives its rollback`,
    withStore(async (store) => {
      const c = await store.createConversation({ agentName: 'a' });
      let started!: () => void;
      const opened = new Promise<void>((resolve) => (started = resolve));
      const doomed = store.atomic(c.id, async () => {
        await store.appendMessage({ conversationId: c.id, role: 'user', content: 'doomed' });
        started();
        await sleep(30);
        throw new Error('boom');
      });
      await opened;
      const outside = store.appendMessage({ conversationId: c.id, role: 'user', content: 'outside' });
      await expect(doomed).rejects.toThrow('boom');
      expect((await outside).sequence).toBe(1);
      expect((await store.listMessages(c.id)).map((m) => m.content[0])).toEqual([
        { type: 'text', text: 'outside' },
      ]);
    }),
  );

  it(
    `${backend}: operations of one block started together (Promise.all) are serialized on its connection`,
    withStore(async (store) => {
      const c = await store.createConversation({ agentName: 'a' });
      const turn = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      const rows = await store.atomic(c.id, () =>
        Promise.all([
          ...Array.from({ length: 8 }, (_, i) =>
            store.appendMessage({ conversationId: c.id, role: 'user', content: `m${i}` }),
          ),
          ...Array.from({ length: 4 }, (_, i) =>
            store.appendEvent({ turnId: turn.id, conversationId: c.id, type: `e${i}` }),
          ),
        ]),
      );
      expect(rows).toHaveLength(12);
      expect((await store.listMessages(c.id)).map((m) => m.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect((await store.listEvents(turn.id)).map((e) => e.sequence)).toEqual([1, 2, 3, 4]);
    }),
  );

  it(
    `${backend}: a refused write caught inside a block leaves the block usable and commits the rest`,
    withStore(async (store) => {
      const c = await store.createConversation({ agentName: 'a' });
      const turn = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      await store.atomic(c.id, async () => {
        await store.createToolExecution({ turnId: turn.id, toolCallId: 'x', toolName: 't' });
        const duplicate = await store
          .createToolExecution({ turnId: turn.id, toolCallId: 'x', toolName: 't' })
          .catch((e: unknown) => e);
        expect(duplicate).toBeInstanceOf(StoreError);
        expect((duplicate as Error).message).toMatch(/already has an execution for tool call x/);
        const again = await store.createConversation({ id: c.id, agentName: 'b' }).catch((e: unknown) => e);
        expect((again as Error).message).toBe(`conversation ${c.id} already exists`);
        await store.appendMessage({ conversationId: c.id, role: 'user', content: 'after the refusals' });
      });
      expect(await store.listMessages(c.id)).toHaveLength(1);
      expect(await store.listToolExecutions({ turnId: turn.id })).toHaveLength(1);
    }),
  );

  it(
    `${backend}: work that outlives its block runs on its own, not in the finished transaction`,
    withStore(async (store) => {
      const c = await store.createConversation({ agentName: 'a' });
      let late!: Promise<unknown>;
      await store.atomic(c.id, async () => {
        late = sleep(20).then(() =>
          store.appendMessage({ conversationId: c.id, role: 'user', content: 'late' }),
        );
      });
      expect((await late) as { sequence: number }).toMatchObject({ sequence: 1 });
      expect(await store.listMessages(c.id)).toHaveLength(1);
    }),
  );

  it(
    `${backend}: two stores in one process serialize on one conversation without blocking each other's event loop`,
    withStore(async (store, second) => {
      const other = await second();
      try {
        const c = await store.createConversation({ agentName: 'a', metadata: { count: 0 } });
        const bump = (s: Store) =>
          s.atomic(c.id, async () => {
            const current = await s.loadConversation(c.id);
            await sleep(5);
            await s.updateConversation(c.id, {
              metadata: { count: (current.metadata['count'] as number) + 1 },
            });
          });
        await Promise.all([bump(store), bump(other), bump(store), bump(other), bump(other), bump(store)]);
        expect((await other.loadConversation(c.id)).metadata).toEqual({ count: 6 });
      } finally {
        await other.close();
      }
    }),
  );

  it(
    `${backend}: a closed store refuses work with a StoreError`,
    withStore(async (_store, second) => {
      const other = await second();
      await other.close();
      await other.close();
      await expect(other.createConversation({ agentName: 'a' })).rejects.toThrow(/store is closed/);
    }),
  );
}
