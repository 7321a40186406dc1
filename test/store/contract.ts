/**
 * The store contract suite (spec §8, §9.2–9.3), run unchanged against every backend. Tests
 * never assume empty tables: they only look at rows they created.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArgumentError, LostClaim, RecordNotFound, StoreError, ToolError } from '../../src/errors.js';
import { deliver } from '../../src/store/deliveries.js';
import { FencedStore } from '../../src/store/fenced-store.js';
import type { Store, TurnRecord } from '../../src/store/types.js';
import { addWaits } from '../../src/store/wait-graph.js';

export function describeStoreContract(
  backend: 'memory' | 'sqlite' | 'postgres',
  open: () => Promise<{ store: Store; close(): Promise<void> }>,
): void {
  describe(`store contract (${backend})`, () => {
    let store: Store;
    let handle: { store: Store; close(): Promise<void> };
    beforeAll(async () => {
      handle = await open();
      store = handle.store;
    });
    afterAll(async () => handle?.close());

    const conversation = (agentName = 'agent') =>
      store.createConversation({ agentName, metadata: { principal: 'p' } });
    const submittedTurn = async (conversationId: string, extra: Partial<TurnRecord> = {}) =>
      store.createTurn({
        conversationId,
        agentName: 'agent',
        submittedAt: new Date().toISOString(),
        ...extra,
      });

    it('creates and loads conversations; updates replace metadata; missing rows are RecordNotFound', async () => {
      const c = await store.createConversation({
        agentName: 'a',
        model: 'm',
        subject: { type: 'Doc', id: '7' },
        metadata: { k: 1 },
      });
      expect(c.id).toMatch(/^conv_[0-9a-f]{24}$/);
      expect(await store.loadConversation(c.id)).toEqual(c);
      const updated = await store.updateConversation(c.id, { metadata: { k: 2 } });
      expect(updated.metadata).toEqual({ k: 2 });
      await expect(store.loadConversation('conv_missing')).rejects.toBeInstanceOf(RecordNotFound);
      await expect(store.loadTurn('turn_missing')).rejects.toBeInstanceOf(RecordNotFound);
      await expect(store.loadToolExecution('tool_missing')).rejects.toBeInstanceOf(RecordNotFound);
      await expect(store.loadDelivery('delivery_missing')).rejects.toBeInstanceOf(RecordNotFound);
    });

    it('appends messages with increasing sequences and typed parts that round-trip', async () => {
      const c = await conversation();
      expect(await store.latestMessageSequence(c.id)).toBe(0);
      const a = await store.appendMessage({ conversationId: c.id, role: 'user', content: 'hi' });
      const b = await store.appendMessage({
        conversationId: c.id,
        role: 'assistant',
        kind: 'tool_call',
        content: [
          { type: 'thinking', text: 'hmm', signature: 'sig' },
          { type: 'text', text: 'calling' },
          { type: 'tool_call', id: 'c1', name: 'search', arguments: { q: 'x' } },
        ],
      });
      expect([a.sequence, b.sequence]).toEqual([1, 2]);
      expect(a.content).toEqual([{ type: 'text', text: 'hi' }]);
      expect(await store.loadMessage(b.id)).toEqual(b);
      expect(await store.nextMessageSequence(c.id)).toBe(3);
      await expect(
        store.appendMessage({ conversationId: c.id, role: 'robot' as never, content: 'x' }),
      ).rejects.toBeInstanceOf(ArgumentError);
      await expect(
        store.appendMessage({ conversationId: 'conv_missing', role: 'user', content: 'x' }),
      ).rejects.toBeInstanceOf(RecordNotFound);
    });

    it('concurrent appends to one conversation get distinct, gap-free sequences', async () => {
      const c = await conversation();
      const rows = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          store.appendMessage({ conversationId: c.id, role: 'user', content: `m${i}` }),
        ),
      );
      expect(rows.map((r) => r.sequence).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    });

    it('lists a turn’s snapshot: sequence <= n or its own messages, ordered by sequence', async () => {
      const c = await conversation();
      await store.appendMessage({ conversationId: c.id, role: 'user', content: 'one' });
      const turn = await store.createTurn({
        conversationId: c.id,
        agentName: 'a',
        contextMessageSequence: 1,
      });
      await store.appendMessage({ conversationId: c.id, role: 'user', content: 'later' });
      await store.appendMessage({
        conversationId: c.id,
        role: 'assistant',
        content: 'mine',
        turnId: turn.id,
      });
      const view = await store.listMessages(c.id, { throughSequence: 1, turnId: turn.id });
      expect(view.map((m) => m.content[0])).toEqual([
        { type: 'text', text: 'one' },
        { type: 'text', text: 'mine' },
      ]);
      expect(await store.listMessages(c.id)).toHaveLength(3);
    });

    it('creates turns with defaults: pending, root = itself, no claim', async () => {
      const c = await conversation();
      const turn = await store.createTurn({
        conversationId: c.id,
        agentName: 'a',
        options: { budget_limits: { max_iterations: 2 } },
      });
      expect(turn).toMatchObject({
        status: 'pending',
        rootTurnId: turn.id,
        claimToken: null,
        cost: 0,
        submittedAt: null,
      });
      expect(await store.loadTurn(turn.id)).toEqual(turn);
    });

    it('ST-01 unknown update attributes are rejected and nothing is written', async () => {
      const c = await conversation();
      const turn = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      await expect(store.updateTurn(turn.id, { bogus: 1 } as never)).rejects.toThrow(
        /unknown turn update attributes/,
      );
      await expect(store.updateTurn(turn.id, { bogus: 1 } as never)).rejects.toBeInstanceOf(ArgumentError);
      await expect(store.updateDelivery('delivery_x', { key: 'k' } as never)).rejects.toBeInstanceOf(
        ArgumentError,
      );
      expect(await store.loadTurn(turn.id)).toEqual(turn);
    });

    it('ST-02 an unknown status is rejected', async () => {
      const c = await conversation();
      const turn = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      await expect(store.updateTurn(turn.id, { status: 'exploded' as never })).rejects.toThrow(
        /unknown turn status/,
      );
      await expect(store.claimTurn(turn.id, { to: 'nope' as never })).rejects.toBeInstanceOf(ArgumentError);
      expect((await store.loadTurn(turn.id)).status).toBe('pending');
    });

    it('ST-03 claimTurn is compare-and-set: the second claim gets null and the first startedAt is kept', async () => {
      const c = await conversation();
      const turn = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      const first = await store.claimTurn(turn.id, {
        claimToken: 'a'.repeat(32),
        startedAt: '2026-01-01T00:00:00.000Z',
      });
      expect(first).toMatchObject({ status: 'running', claimToken: 'a'.repeat(32) });
      expect(
        await store.claimTurn(turn.id, { claimToken: 'b'.repeat(32), startedAt: '2026-02-02T00:00:00.000Z' }),
      ).toBeNull();
      const stored = await store.loadTurn(turn.id);
      expect(stored.startedAt).toBe('2026-01-01T00:00:00.000Z');
      expect(stored.claimToken).toBe('a'.repeat(32));
      // Same-status rotation just bumps updatedAt.
      const rotated = await store.claimTurn(turn.id, { from: 'running', to: 'running' });
      expect(rotated!.updatedAt >= stored.updatedAt).toBe(true);
    });

    it('ST-04 claimToolExecution is compare-and-set: a late completion after interruption returns null', async () => {
      const c = await conversation();
      const turn = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      const execution = await store.createToolExecution({
        turnId: turn.id,
        toolCallId: 'c1',
        toolName: 't',
        status: 'running',
      });
      expect(
        await store.claimToolExecution(execution.id, {
          from: 'running',
          to: 'interrupted',
          error: { message: 'gone' },
        }),
      ).toMatchObject({
        status: 'interrupted',
      });
      expect(
        await store.claimToolExecution(execution.id, {
          from: 'running',
          to: 'completed',
          result: { late: true },
        }),
      ).toBeNull();
      expect(await store.loadToolExecution(execution.id)).toMatchObject({
        status: 'interrupted',
        result: null,
      });
      await expect(
        store.createToolExecution({ turnId: turn.id, toolCallId: 'c1', toolName: 't' }),
      ).rejects.toBeInstanceOf(StoreError);
      await expect(store.claimToolExecution(execution.id, { status: 'x' } as never)).rejects.toBeInstanceOf(
        ArgumentError,
      );
    });

    it('ST-05 reconcileStaleTurns only transitions old pending/running unsubmitted turns', async () => {
      const c = await conversation();
      const old = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      await store.claimTurn(old.id, { claimToken: 'c'.repeat(32), heartbeatAt: '2000-01-01T00:00:00.000Z' });
      const oldPending = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      const fresh = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      await store.claimTurn(fresh.id, { heartbeatAt: '2999-01-01T00:00:00.000Z' });
      const done = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      await store.updateTurn(done.id, { status: 'completed' });
      const submitted = await submittedTurn(c.id);
      const before = new Date(Date.now() + 1000).toISOString();
      const stale = await store.reconcileStaleTurns({ before, limit: 1000 });
      const ids = stale.map((t) => t.id);
      expect(ids).toContain(old.id);
      expect(ids).toContain(oldPending.id);
      expect(ids).not.toContain(fresh.id);
      expect(ids).not.toContain(done.id);
      expect(ids).not.toContain(submitted.id);
      expect(await store.loadTurn(old.id)).toMatchObject({ status: 'stale', claimToken: null });
      expect((await store.loadTurn(old.id)).completedAt).not.toBeNull();
      expect((await store.loadTurn(done.id)).status).toBe('completed');
    });

    it('lists turns by filters in creation order; bounded maintenance listings respect their limit', async () => {
      const c = await conversation();
      const root = await submittedTurn(c.id);
      const child = await store.createTurn({
        conversationId: c.id,
        agentName: 'other',
        rootTurnId: root.id,
        parentTurnId: root.id,
      });
      expect((await store.listTurns({ rootTurnId: root.id })).map((t) => t.id)).toEqual([root.id, child.id]);
      expect((await store.listTurns({ rootTurnId: root.id, agentName: 'other' })).map((t) => t.id)).toEqual([
        child.id,
      ]);
      expect((await store.listTurns({ parentTurnId: root.id })).map((t) => t.id)).toEqual([child.id]);
      expect((await store.listTurns({ conversationId: c.id, status: ['pending'] })).length).toBe(2);
      expect(await store.listActionableTurns({ limit: 1 })).toHaveLength(1);
      expect((await store.listSubmittedTurns({ limit: 100000 })).some((t) => t.id === root.id)).toBe(true);
      expect((await store.listSubmittedTurns()).some((t) => t.id === child.id)).toBe(false);
    });

    it('busyConversation sees running/waiting turns and, by default, submitted pending ones', async () => {
      const c = await conversation();
      expect(await store.busyConversation(c.id)).toBe(false);
      const turn = await submittedTurn(c.id);
      expect(await store.busyConversation(c.id)).toBe(true);
      expect(await store.busyConversation(c.id, { includePending: false })).toBe(false);
      await store.claimTurn(turn.id);
      expect(await store.busyConversation(c.id, { includePending: false })).toBe(true);
    });

    it('returned records are copies: mutating one does not change the store', async () => {
      const c = await store.createConversation({ agentName: 'a', metadata: { nested: { v: 1 } } });
      c.metadata['nested'] = { v: 2 };
      expect((await store.loadConversation(c.id)).metadata).toEqual({ nested: { v: 1 } });
    });

    it('a write that throws inside atomic leaves no row behind, nested blocks included', async () => {
      const c = await conversation();
      await expect(
        store.atomic(c.id, async () => {
          await store.appendMessage({ conversationId: c.id, role: 'user', content: 'doomed' });
          await store.atomic(c.id, async () => {
            await store.createTurn({ conversationId: c.id, agentName: 'a' });
          });
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await store.listMessages(c.id)).toEqual([]);
      expect(await store.listTurns({ conversationId: c.id })).toEqual([]);
      // Reentrant: nested atomic on the same conversation does not deadlock and returns its value.
      expect(await store.atomic(c.id, () => store.atomic(c.id, async () => 42))).toBe(42);
    });

    it('DB-01 two concurrent claims of one turn: exactly one wins and the stored token is the winner’s', async () => {
      const c = await conversation();
      const turn = await submittedTurn(c.id);
      const results = await Promise.all(
        ['1', '2'].map((t) => store.claimTurn(turn.id, { claimToken: t.repeat(32) })),
      );
      const winners = results.filter((r) => r !== null);
      expect(winners).toHaveLength(1);
      expect((await store.loadTurn(turn.id)).claimToken).toBe(winners[0]!.claimToken);
    });

    it('DB-02 two submitted turns in one conversation claimed concurrently: only one runs (lane check inside atomic)', async () => {
      const c = await conversation();
      const turns = [await submittedTurn(c.id), await submittedTurn(c.id)];
      const claimInLane = (turn: TurnRecord, token: string) =>
        store.atomic(c.id, async () =>
          (await store.busyConversation(c.id, { includePending: false }))
            ? null
            : store.claimTurn(turn.id, { claimToken: token }),
        );
      const results = await Promise.all([
        claimInLane(turns[0]!, 'a'.repeat(32)),
        claimInLane(turns[1]!, 'b'.repeat(32)),
      ]);
      expect(results.filter((r) => r !== null)).toHaveLength(1);
      expect((await store.listTurns({ conversationId: c.id, status: 'running' })).length).toBe(1);
    });

    it('DB-03 concurrent delivery of one delivery: one destination message', async () => {
      const source = await conversation();
      const destination = await conversation();
      const delivery = await store.createDelivery({
        sourceConversationId: source.id,
        destinationConversationId: destination.id,
        key: `k-${destination.id}`,
        payload: { text: 'hello' },
      });
      const results = await Promise.all([deliver(store, delivery.id), deliver(store, delivery.id)]);
      expect(results.filter((r) => r.delivered)).toHaveLength(1);
      const messages = await store.listMessages(destination.id);
      expect(messages).toHaveLength(1);
      expect(messages[0]!.metadata).toMatchObject({
        delivery_id: delivery.id,
        source_conversation_id: source.id,
      });
      expect((await store.loadDelivery(delivery.id)).messageId).toBe(messages[0]!.id);
      expect(
        await store.listDeliveries({ destinationConversationId: destination.id, pending: true }),
      ).toEqual([]);
      expect(await store.listDeliveries({ sourceConversationId: source.id })).toHaveLength(1);
    });

    it('DB-04 a failure inside deliver rolls back the message and the delivery state', async () => {
      const destination = await conversation();
      const delivery = await store.createDelivery({
        destinationConversationId: destination.id,
        key: `k4-${destination.id}`,
        payload: { text: 'x' },
      });
      const failing = new Proxy(store, {
        get(target, property, receiver) {
          if (property === 'updateDelivery') return async () => Promise.reject(new Error('update failed'));
          const value = Reflect.get(target, property, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      await expect(deliver(failing, delivery.id)).rejects.toThrow('update failed');
      expect(await store.listMessages(destination.id)).toEqual([]);
      expect((await store.loadDelivery(delivery.id)).messageId).toBeNull();
    });

    it('DB-05 a fenced store whose token was replaced raises LostClaim for appendMessage, updateTurn and claimTurn, and writes nothing', async () => {
      const c = await conversation();
      const turn = await submittedTurn(c.id);
      await store.claimTurn(turn.id, { claimToken: 'a'.repeat(32) });
      const fenced = new FencedStore(store, {
        turnId: turn.id,
        claimToken: 'a'.repeat(32),
        rootConversationId: c.id,
      });
      await fenced.appendMessage({ conversationId: c.id, role: 'assistant', content: 'while owned' });
      await store.updateTurn(turn.id, { claimToken: 'b'.repeat(32) });
      await expect(
        fenced.appendMessage({ conversationId: c.id, role: 'assistant', content: 'late' }),
      ).rejects.toBeInstanceOf(LostClaim);
      await expect(fenced.updateTurn(turn.id, { outputText: 'late' })).rejects.toBeInstanceOf(LostClaim);
      await expect(fenced.claimTurn(turn.id, { from: 'running', to: 'completed' })).rejects.toBeInstanceOf(
        LostClaim,
      );
      expect((await store.listMessages(c.id)).map((m) => m.content[0])).toEqual([
        { type: 'text', text: 'while owned' },
      ]);
      expect(await store.loadTurn(turn.id)).toMatchObject({
        status: 'running',
        outputText: null,
        claimToken: 'b'.repeat(32),
      });
    });

    it('BG-40 BG-41 a delivery key retry returns the original; a different message under the key is refused without revealing it', async () => {
      const a = await conversation();
      const b = await conversation();
      const attrs = {
        sourceConversationId: a.id,
        destinationConversationId: b.id,
        key: `k40-${a.id}`,
        payload: { text: 'secret plan', n: 1 },
      };
      const first = await store.createDelivery(attrs);
      const again = await store.createDelivery({ ...attrs, payload: { n: 1, text: 'secret plan' } });
      expect(again.id).toBe(first.id);
      const other = await conversation();
      const attempt = store.createDelivery({ ...attrs, sourceConversationId: other.id });
      await expect(attempt).rejects.toBeInstanceOf(ToolError);
      await expect(store.createDelivery({ ...attrs, sourceConversationId: other.id })).rejects.not.toThrow(
        /secret/,
      );
      await expect(store.createDelivery({ ...attrs, payload: { text: 'changed' } })).rejects.toThrow(
        /already used/,
      );
      expect(await store.listDeliveries({ sourceConversationId: a.id })).toHaveLength(1);
    });

    it('waits are idempotent; a turn waiting on itself is refused', async () => {
      const c = await conversation();
      const other = await conversation();
      const waiter = await submittedTurn(c.id);
      const target = await submittedTurn(other.id);
      await store.createWait({ turnId: waiter.id, targetTurnId: target.id });
      await store.createWait({ turnId: waiter.id, targetTurnId: target.id });
      expect(await store.listWaits({ turnId: waiter.id })).toHaveLength(1);
      expect(await store.listWaits({ targetTurnId: target.id })).toHaveLength(1);
      await expect(store.createWait({ turnId: waiter.id, targetTurnId: waiter.id })).rejects.toThrow(
        'a turn cannot wait for itself',
      );
    });

    it('BG-24 waits a→b, b→c, then c→a is refused as a cycle and leaves no edge for c', async () => {
      const [x, y, z] = [await conversation(), await conversation(), await conversation()];
      const [a, b, c] = [await submittedTurn(x.id), await submittedTurn(y.id), await submittedTurn(z.id)];
      await addWaits(store, { turnId: a.id, targetTurnIds: [b.id] });
      await addWaits(store, { turnId: b.id, targetTurnIds: [c.id] });
      await expect(addWaits(store, { turnId: c.id, targetTurnIds: [a.id] })).rejects.toThrow(/cycle/);
      expect(await store.listWaits({ turnId: c.id })).toEqual([]);
    });

    it('BG-29 two opposite wait edges added concurrently: exactly one succeeds, the other is a cycle, one edge exists', async () => {
      const [x, y] = [await conversation(), await conversation()];
      const [a, b] = [await submittedTurn(x.id), await submittedTurn(y.id)];
      const results = await Promise.allSettled([
        addWaits(store, { turnId: a.id, targetTurnIds: [b.id] }),
        addWaits(store, { turnId: b.id, targetTurnIds: [a.id] }),
      ]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(String(rejected.reason)).toMatch(/cycle/);
      expect(
        (await store.listWaits({ turnId: a.id })).length + (await store.listWaits({ turnId: b.id })).length,
      ).toBe(1);
    });

    it('BG-39 a wait into a busy lane is a cycle; after the lane’s work is cancelled the same wait is accepted', async () => {
      const [x, y] = [await conversation(), await conversation()];
      const a = await submittedTurn(y.id);
      const c = await submittedTurn(x.id);
      await addWaits(store, { turnId: c.id, targetTurnIds: [a.id] });
      const b = await submittedTurn(x.id);
      await expect(addWaits(store, { turnId: a.id, targetTurnIds: [b.id] })).rejects.toThrow(/cycle/);
      expect(await store.listWaits({ turnId: a.id })).toEqual([]);
      await store.updateTurn(c.id, { status: 'cancelled' });
      await store.updateTurn(b.id, { status: 'cancelled' });
      await addWaits(store, { turnId: a.id, targetTurnIds: [b.id] });
      expect(await store.listWaits({ turnId: a.id })).toHaveLength(1);
      await expect(addWaits(store, { turnId: a.id, targetTurnIds: [a.id] })).rejects.toThrow(
        'a turn cannot wait for itself',
      );
    });

    it('appends durable events with per-turn sequences, even concurrently', async () => {
      const c = await conversation();
      const turn = await store.createTurn({ conversationId: c.id, agentName: 'a' });
      await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          store.appendEvent({ turnId: turn.id, conversationId: c.id, type: `e${i}`, payload: { i } }),
        ),
      );
      const events = await store.listEvents(turn.id);
      expect(events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
      expect((await store.listEvents(turn.id, { afterSequence: 4 })).map((e) => e.sequence)).toEqual([5, 6]);
    });

    it('nextDeliveryTrigger finds the newest delivered message no consumed turn has seen', async () => {
      const c = await conversation();
      expect(await store.nextDeliveryTrigger(c.id)).toBeNull();
      const delivery = await store.createDelivery({
        destinationConversationId: c.id,
        key: `kt-${c.id}`,
        payload: { text: 'ping' },
      });
      const { message } = await deliver(store, delivery.id);
      expect((await store.nextDeliveryTrigger(c.id))?.id).toBe(message!.id);
      await submittedTurn(c.id, { contextMessageSequence: message!.sequence } as Partial<TurnRecord>);
      expect(await store.nextDeliveryTrigger(c.id)).toBeNull();
    });
  });
}
