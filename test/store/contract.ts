/**
 * The store contract suite (spec §8, §9.2–9.3), run unchanged against every backend. Tests
 * never assume empty tables: each creates its own rows and only looks at those.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArgumentError, LostClaim, RecordNotFound, StoreError, ToolError } from '../../src/errors.js';
import { FencedStore } from '../../src/store/fenced-store.js';
import { deliver } from '../../src/store/maintenance.js';
import { claimInLane } from '../../src/store/tree.js';
import type { NewTurn, Store, TurnRecord } from '../../src/store/types.js';
import { addWaits } from '../../src/store/wait-graph.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ids = (rows: readonly { id: string }[]) => rows.map((row) => row.id);
const ANCIENT = '2000-01-01T00:00:00.000Z';
const TOKEN_A = 'a'.repeat(32);
const TOKEN_B = 'b'.repeat(32);

/** `makeStore` is called once, before the suite; `close` is exercised by the suite's teardown. */
export interface StoreContractOptions {
  /** Runs once after the suite instead of `store.close()`; it must close the store. */
  cleanup?: (store: Store) => Promise<void>;
}

export function describeStoreContract(
  backend: 'memory' | 'sqlite' | 'postgres',
  makeStore: () => Promise<Store>,
  options: StoreContractOptions = {},
): void {
  describe(`store contract (${backend})`, () => {
    let store: Store;
    beforeAll(async () => {
      store = await makeStore();
    });
    afterAll(async () => {
      if (!store) return;
      await (options.cleanup ? options.cleanup(store) : store.close());
    });

    const conversation = (agentName = 'agent') =>
      store.createConversation({ agentName, metadata: { principal: 'p' } });
    const turnIn = (conversationId: string, extra: Partial<NewTurn> = {}) =>
      store.createTurn({ conversationId, agentName: 'agent', ...extra });
    const submittedTurn = (conversationId: string, extra: Partial<NewTurn> = {}) =>
      turnIn(conversationId, { submittedAt: new Date().toISOString(), ...extra });

    it('backend names itself', () => {
      expect(store.backend).toBe(backend);
    });

    describe('conversations', () => {
      it('createConversation stores defaults and round-trips subject, model and metadata', async () => {
        const bare = await store.createConversation({ agentName: 'a' });
        expect(bare).toMatchObject({ agentName: 'a', model: null, subject: null, metadata: {} });
        expect(bare.id).toMatch(/^conv_[0-9a-f]{24}$/);
        expect(bare.createdAt).toBe(bare.updatedAt);
        const full = await store.createConversation({
          agentName: 'a',
          model: 'm',
          subject: { type: 'Doc', id: '7' },
          metadata: { principal: { user: 1 }, turnkit_context: { k: [1, 'x', null] } },
        });
        expect(await store.loadConversation(full.id)).toEqual(full);
        expect(full.subject).toEqual({ type: 'Doc', id: '7' });
      });

      it('createConversation with an id that exists is a StoreError', async () => {
        const c = await conversation();
        await expect(store.createConversation({ id: c.id, agentName: 'other' })).rejects.toBeInstanceOf(
          StoreError,
        );
        expect((await store.loadConversation(c.id)).agentName).toBe('agent');
      });

      it('updateConversation replaces metadata, sets the model and bumps updatedAt', async () => {
        const c = await store.createConversation({ agentName: 'a', metadata: { a: 1, b: 2 } });
        await sleep(3);
        const updated = await store.updateConversation(c.id, { metadata: { b: 3 }, model: 'm2' });
        expect(updated).toMatchObject({ metadata: { b: 3 }, model: 'm2', agentName: 'a' });
        expect(updated.updatedAt > c.updatedAt).toBe(true);
        expect(await store.loadConversation(c.id)).toEqual(updated);
        const modelOnly = await store.updateConversation(c.id, { model: null });
        expect(modelOnly).toMatchObject({ metadata: { b: 3 }, model: null });
      });

      it('updateConversation rejects unknown keys and missing rows', async () => {
        const c = await conversation();
        await expect(store.updateConversation(c.id, { agentName: 'x' } as never)).rejects.toBeInstanceOf(
          ArgumentError,
        );
        await expect(store.updateConversation(c.id, { agentName: 'x' } as never)).rejects.toThrow(
          /unknown conversation update attributes/,
        );
        await expect(store.updateConversation('conv_missing', { metadata: {} })).rejects.toBeInstanceOf(
          RecordNotFound,
        );
        expect(await store.loadConversation(c.id)).toEqual(c);
      });
    });

    describe('messages', () => {
      it('appendMessage allocates increasing sequences; typed parts round-trip', async () => {
        const c = await conversation();
        expect(await store.latestMessageSequence(c.id)).toBe(0);
        expect(await store.nextMessageSequence(c.id)).toBe(1);
        const a = await store.appendMessage({ conversationId: c.id, role: 'user', content: 'hi' });
        const parts = [
          { type: 'thinking' as const, text: 'hmm', signature: 'sig' },
          { type: 'text' as const, text: 'calling' },
          { type: 'tool_call' as const, id: 'c1', name: 'search', arguments: { q: 'x', n: [1, 2] } },
          { type: 'provider' as const, kind: 'opaque', data: { z: 1, a: null } },
        ];
        const b = await store.appendMessage({
          conversationId: c.id,
          role: 'assistant',
          kind: 'tool_call',
          content: parts,
          providerMessageId: 'pm-1',
          metadata: { output_data: { k: 1 } },
        });
        expect([a.sequence, b.sequence]).toEqual([1, 2]);
        expect(a).toMatchObject({
          role: 'user',
          kind: 'text',
          turnId: null,
          toolExecutionId: null,
          providerMessageId: null,
          metadata: {},
          content: [{ type: 'text', text: 'hi' }],
        });
        expect(a.id).toMatch(/^msg_[0-9a-f]{24}$/);
        expect(b.content).toEqual(parts);
        expect(await store.loadMessage(b.id)).toEqual(b);
        expect(await store.latestMessageSequence(c.id)).toBe(2);
        expect(await store.nextMessageSequence(c.id)).toBe(3);
      });

      it('appendMessage validates role and kind, and needs an existing conversation', async () => {
        const c = await conversation();
        await expect(
          store.appendMessage({ conversationId: c.id, role: 'robot' as never, content: 'x' }),
        ).rejects.toBeInstanceOf(ArgumentError);
        await expect(
          store.appendMessage({ conversationId: c.id, role: 'user', kind: 'poem' as never, content: 'x' }),
        ).rejects.toBeInstanceOf(ArgumentError);
        await expect(
          store.appendMessage({ conversationId: 'conv_missing', role: 'user', content: 'x' }),
        ).rejects.toBeInstanceOf(RecordNotFound);
        expect(await store.listMessages(c.id)).toEqual([]);
        expect(await store.latestMessageSequence(c.id)).toBe(0);
      });

      it('loadMessage of a missing id is RecordNotFound', async () => {
        await expect(store.loadMessage('msg_missing')).rejects.toBeInstanceOf(RecordNotFound);
      });

      it('concurrent appends to one conversation get distinct, gap-free sequences', async () => {
        const c = await conversation();
        const rows = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            store.appendMessage({ conversationId: c.id, role: 'user', content: `m${i}` }),
          ),
        );
        expect(rows.map((r) => r.sequence).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        expect((await store.listMessages(c.id)).map((m) => m.sequence)).toEqual([
          1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
        ]);
      });

      it('sequences are per conversation', async () => {
        const [x, y] = [await conversation(), await conversation()];
        await store.appendMessage({ conversationId: x.id, role: 'user', content: 'x1' });
        await store.appendMessage({ conversationId: x.id, role: 'user', content: 'x2' });
        const y1 = await store.appendMessage({ conversationId: y.id, role: 'user', content: 'y1' });
        expect(y1.sequence).toBe(1);
        expect(await store.latestMessageSequence(x.id)).toBe(2);
      });

      it('listMessages orders by sequence and filters a turn’s snapshot and a tool execution', async () => {
        const c = await conversation();
        await store.appendMessage({ conversationId: c.id, role: 'user', content: 'one' });
        const turn = await turnIn(c.id, { contextMessageSequence: 1 });
        await store.appendMessage({ conversationId: c.id, role: 'user', content: 'later' });
        await store.appendMessage({
          conversationId: c.id,
          role: 'assistant',
          content: 'mine',
          turnId: turn.id,
        });
        const execution = await store.createToolExecution({
          turnId: turn.id,
          toolCallId: 'c1',
          toolName: 't',
        });
        await store.appendMessage({
          conversationId: c.id,
          role: 'tool',
          kind: 'tool_result',
          turnId: turn.id,
          toolExecutionId: execution.id,
          content: [{ type: 'tool_result', tool_call_id: 'c1', text: '{}', error: false }],
          metadata: { tool_name: 't' },
        });
        const text = (rows: { content: unknown[] }[]) => rows.map((m) => m.content[0]);
        expect(text(await store.listMessages(c.id, { throughSequence: 1, turnId: turn.id }))).toEqual([
          { type: 'text', text: 'one' },
          { type: 'text', text: 'mine' },
          { type: 'tool_result', tool_call_id: 'c1', text: '{}', error: false },
        ]);
        expect(text(await store.listMessages(c.id, { throughSequence: 2 }))).toEqual([
          { type: 'text', text: 'one' },
          { type: 'text', text: 'later' },
        ]);
        const reports = await store.listMessages(c.id, { toolExecutionId: execution.id });
        expect(reports.map((m) => m.sequence)).toEqual([4]);
        expect((await store.listMessages(c.id)).map((m) => m.sequence)).toEqual([1, 2, 3, 4]);
        expect(await store.listMessages('conv_missing')).toEqual([]);
      });

      it('listMessages reads a kind and a sequence range, combined with a turn’s snapshot', async () => {
        const c = await conversation();
        for (const text of ['a', 'b', 'c', 'd'])
          await store.appendMessage({ conversationId: c.id, role: 'user', content: text });
        const turn = await turnIn(c.id, { contextMessageSequence: 4 });
        await store.appendMessage({
          conversationId: c.id,
          role: 'assistant',
          kind: 'context_summary',
          content: 'summary of a-c',
          turnId: turn.id,
        });
        await store.appendMessage({ conversationId: c.id, role: 'user', content: 'not yet seen' });
        const seqs = (rows: { sequence: number }[]) => rows.map((m) => m.sequence);
        const visible = { throughSequence: 4, turnId: turn.id };
        expect(seqs(await store.listMessages(c.id, { ...visible, kind: 'context_summary' }))).toEqual([5]);
        expect(seqs(await store.listMessages(c.id, { ...visible, afterSequence: 3 }))).toEqual([4, 5]);
        expect(seqs(await store.listMessages(c.id, { afterSequence: 1, beforeSequence: 4 }))).toEqual([2, 3]);
        expect(seqs(await store.listMessages(c.id, { kind: 'text', afterSequence: 4 }))).toEqual([6]);
      });
    });

    describe('forks', () => {
      it('a conversation records its origin; listForks lists a conversation’s forks oldest first', async () => {
        const source = await conversation();
        expect(source).toMatchObject({ forkedFromConversationId: null, forkedFromMessageId: null });
        const message = await store.appendMessage({ conversationId: source.id, role: 'user', content: 'hi' });
        const first = await store.createConversation({
          agentName: 'agent',
          forkedFromConversationId: source.id,
          forkedFromMessageId: message.id,
        });
        await sleep(2);
        const empty = await store.createConversation({
          agentName: 'agent',
          forkedFromConversationId: source.id,
        });
        expect(await store.loadConversation(first.id)).toMatchObject({
          forkedFromConversationId: source.id,
          forkedFromMessageId: message.id,
        });
        expect(ids(await store.listForks(source.id))).toEqual([first.id, empty.id]);
        expect((await store.listForks(source.id))[1]!.forkedFromMessageId).toBeNull();
        expect(await store.listForks(first.id)).toEqual([]);
      });

      it('copyMessages copies a history through a sequence: same sequences and content, new ids, no turn, no delivery mark', async () => {
        const source = await conversation();
        const turn = await turnIn(source.id);
        const user = await store.appendMessage({
          conversationId: source.id,
          role: 'user',
          content: 'delivered',
          metadata: { delivery_id: 'd1', keep: 1 },
        });
        const call = await store.appendMessage({
          conversationId: source.id,
          turnId: turn.id,
          role: 'assistant',
          kind: 'tool_call',
          content: [{ type: 'tool_call', id: 'c1', name: 't', arguments: { a: 1 } }],
          toolExecutionId: 'tool_x',
        });
        await store.appendMessage({ conversationId: source.id, role: 'user', content: 'not carried' });
        const fork = await store.createConversation({
          agentName: 'agent',
          forkedFromConversationId: source.id,
        });
        expect(
          await store.copyMessages({ from: source.id, to: fork.id, throughSequence: call.sequence }),
        ).toBe(2);
        const copies = await store.listMessages(fork.id);
        expect(copies.map((m) => m.sequence)).toEqual([user.sequence, call.sequence]);
        expect(copies.map((m) => m.content)).toEqual([user.content, call.content]);
        expect(copies.every((m) => m.turnId === null && m.conversationId === fork.id)).toBe(true);
        expect(copies.map((m) => m.id)).not.toContain(user.id);
        expect(copies[0]!.metadata).toEqual({ keep: 1, forked_from_message_id: user.id });
        expect(copies[1]!).toMatchObject({
          kind: 'tool_call',
          toolExecutionId: 'tool_x',
          createdAt: call.createdAt,
          metadata: { forked_from_message_id: call.id, forked_from_turn_id: turn.id },
        });
        // The fork's next message follows the copies; the source is untouched.
        expect(
          (await store.appendMessage({ conversationId: fork.id, role: 'user', content: 'next' })).sequence,
        ).toBe(call.sequence + 1);
        expect(await store.listMessages(source.id)).toHaveLength(3);
        expect(await store.nextDeliveryTrigger(fork.id)).toBeNull();
        // Only into a conversation without messages, and only between existing ones.
        await expect(
          store.copyMessages({ from: source.id, to: fork.id, throughSequence: 1 }),
        ).rejects.toBeInstanceOf(StoreError);
        await expect(
          store.copyMessages({ from: 'conv_missing', to: (await conversation()).id, throughSequence: 1 }),
        ).rejects.toBeInstanceOf(RecordNotFound);
      });

      it('copyMessages copies a long history in pages, in order', async () => {
        const source = await conversation();
        for (let i = 1; i <= 520; i += 1)
          await store.appendMessage({ conversationId: source.id, role: 'user', content: `m${i}` });
        const fork = await conversation();
        expect(await store.copyMessages({ from: source.id, to: fork.id, throughSequence: 510 })).toBe(510);
        const copies = await store.listMessages(fork.id);
        expect(copies.map((m) => m.sequence)).toEqual(Array.from({ length: 510 }, (_, i) => i + 1));
        expect(copies.at(-1)!.content).toEqual([{ type: 'text', text: 'm510' }]);
        expect(await store.latestMessageSequence(fork.id)).toBe(510);
      });
    });

    describe('turns', () => {
      it('createTurn stores defaults: pending, root = itself, no claim, zero cost', async () => {
        const c = await conversation();
        const turn = await store.createTurn({
          conversationId: c.id,
          agentName: 'a',
          options: { budget_limits: { max_iterations: 2 }, state: { phase: 'model' } },
        });
        expect(turn).toMatchObject({
          conversationId: c.id,
          agentName: 'a',
          status: 'pending',
          rootTurnId: turn.id,
          parentTurnId: null,
          parentToolExecutionId: null,
          contextMessageSequence: 0,
          claimToken: null,
          cost: 0,
          usage: null,
          error: null,
          outputText: null,
          outputData: null,
          submittedAt: null,
          startedAt: null,
          heartbeatAt: null,
          completedAt: null,
          model: null,
        });
        expect(turn.id).toMatch(/^turn_[0-9a-f]{24}$/);
        expect(await store.loadTurn(turn.id)).toEqual(turn);
      });

      it('createTurn keeps lineage, snapshot, model and status', async () => {
        const c = await conversation();
        const root = await submittedTurn(c.id);
        const child = await store.createTurn({
          conversationId: c.id,
          agentName: 'child',
          parentTurnId: root.id,
          parentToolExecutionId: 'tool_x',
          rootTurnId: root.id,
          contextMessageSequence: 7,
          model: 'm',
          status: 'waiting',
        });
        expect(await store.loadTurn(child.id)).toMatchObject({
          parentTurnId: root.id,
          parentToolExecutionId: 'tool_x',
          rootTurnId: root.id,
          contextMessageSequence: 7,
          model: 'm',
          status: 'waiting',
        });
      });

      it('createTurn needs an existing conversation and a known status', async () => {
        await expect(turnIn('conv_missing')).rejects.toBeInstanceOf(RecordNotFound);
        const c = await conversation();
        await expect(turnIn(c.id, { status: 'bogus' as never })).rejects.toBeInstanceOf(ArgumentError);
        expect(await store.listTurns({ conversationId: c.id })).toEqual([]);
      });

      it('loadTurn and updateTurn of a missing id are RecordNotFound', async () => {
        await expect(store.loadTurn('turn_missing')).rejects.toBeInstanceOf(RecordNotFound);
        await expect(store.updateTurn('turn_missing', { cost: 1 })).rejects.toBeInstanceOf(RecordNotFound);
      });

      it('updateTurn writes every allowed attribute and bumps updatedAt', async () => {
        const c = await conversation();
        const turn = await turnIn(c.id);
        await sleep(3);
        const usage = {
          input_tokens: 1,
          output_tokens: 2,
          cached_tokens: 0,
          cache_write_tokens: 0,
          thinking_tokens: 0,
          total_tokens: 3,
        };
        const updated = await store.updateTurn(turn.id, {
          status: 'failed',
          options: { state: { phase: 'output', parts: [{ type: 'text', text: 'x' }] } },
          usage,
          cost: 0.125,
          error: { class: 'TurnKit::BudgetError', message: 'maximum iterations reached' },
          outputText: 'out',
          outputData: { answer: [1, 2] },
          submittedAt: '2026-01-01T00:00:00.000Z',
          claimToken: TOKEN_A,
          startedAt: '2026-01-01T00:00:01.000Z',
          heartbeatAt: '2026-01-01T00:00:02.000Z',
          completedAt: '2026-01-01T00:00:03.000Z',
        });
        expect(updated.updatedAt > turn.updatedAt).toBe(true);
        expect(await store.loadTurn(turn.id)).toEqual(updated);
        expect(updated).toMatchObject({
          status: 'failed',
          usage,
          cost: 0.125,
          outputData: { answer: [1, 2] },
          claimToken: TOKEN_A,
          createdAt: turn.createdAt,
        });
        expect((await store.updateTurn(turn.id, { claimToken: null })).claimToken).toBeNull();
      });

      it('ST-01 unknown update attributes are rejected and nothing is written', async () => {
        const c = await conversation();
        const turn = await turnIn(c.id);
        await expect(store.updateTurn(turn.id, { bogus: 1 } as never)).rejects.toThrow(
          /unknown turn update attributes/,
        );
        await expect(
          store.updateTurn(turn.id, { outputText: 'x', conversationId: 'y' } as never),
        ).rejects.toBeInstanceOf(ArgumentError);
        await expect(store.claimTurn(turn.id, { bogus: 1 } as never)).rejects.toBeInstanceOf(ArgumentError);
        const delivery = await store.createDelivery({
          destinationConversationId: c.id,
          key: `st01-${c.id}`,
          payload: { text: 'x' },
        });
        await expect(store.updateDelivery(delivery.id, { key: 'k' } as never)).rejects.toBeInstanceOf(
          ArgumentError,
        );
        const execution = await store.createToolExecution({
          turnId: turn.id,
          toolCallId: 'c',
          toolName: 't',
          status: 'running',
        });
        await expect(
          store.claimToolExecution(execution.id, { toolName: 'u' } as never),
        ).rejects.toBeInstanceOf(ArgumentError);
        expect(await store.loadTurn(turn.id)).toEqual(turn);
        expect(await store.loadDelivery(delivery.id)).toEqual(delivery);
        expect(await store.loadToolExecution(execution.id)).toEqual(execution);
      });

      it('ST-02 unknown status is rejected', async () => {
        const c = await conversation();
        const turn = await turnIn(c.id);
        await expect(store.updateTurn(turn.id, { status: 'exploded' as never })).rejects.toThrow(
          /unknown turn status/,
        );
        await expect(store.updateTurn(turn.id, { status: 'exploded' as never })).rejects.toBeInstanceOf(
          ArgumentError,
        );
        await expect(store.claimTurn(turn.id, { to: 'nope' as never })).rejects.toThrow(
          /unknown turn status/,
        );
        await expect(store.claimTurn(turn.id, { from: 'nope' as never })).rejects.toBeInstanceOf(
          ArgumentError,
        );
        const execution = await store.createToolExecution({
          turnId: turn.id,
          toolCallId: 'c',
          toolName: 't',
        });
        await expect(
          store.claimToolExecution(execution.id, { from: 'pending', to: 'nope' as never }),
        ).rejects.toBeInstanceOf(ArgumentError);
        await expect(
          store.createToolExecution({
            turnId: turn.id,
            toolCallId: 'd',
            toolName: 't',
            status: 'x' as never,
          }),
        ).rejects.toBeInstanceOf(ArgumentError);
        expect(await store.loadTurn(turn.id)).toEqual(turn);
        expect((await store.loadToolExecution(execution.id)).status).toBe('pending');
      });

      it('ST-03 claimTurn is compare-and-set: the second claim gets null and the first startedAt is kept', async () => {
        const c = await conversation();
        const turn = await turnIn(c.id);
        const first = await store.claimTurn(turn.id, {
          claimToken: TOKEN_A,
          startedAt: '2026-01-01T00:00:00.000Z',
        });
        expect(first).toMatchObject({ status: 'running', claimToken: TOKEN_A });
        expect(
          await store.claimTurn(turn.id, { claimToken: TOKEN_B, startedAt: '2026-02-02T00:00:00.000Z' }),
        ).toBeNull();
        const stored = await store.loadTurn(turn.id);
        expect(stored).toEqual(first);
        expect(stored.startedAt).toBe('2026-01-01T00:00:00.000Z');
        expect(stored.claimToken).toBe(TOKEN_A);
      });

      it('claimTurn accepts a list of from statuses, rotates the same status and refuses missing rows', async () => {
        const c = await conversation();
        const turn = await submittedTurn(c.id, { status: 'waiting' });
        expect(await store.claimTurn(turn.id, { from: ['pending', 'running'], to: 'running' })).toBeNull();
        await sleep(3);
        const rotated = await store.claimTurn(turn.id, { from: 'waiting', to: 'waiting' });
        expect(rotated).toMatchObject({ status: 'waiting' });
        expect(rotated!.updatedAt > turn.updatedAt).toBe(true);
        const woken = await store.claimTurn(turn.id, { from: ['pending', 'waiting'], to: 'pending' });
        expect(woken).toMatchObject({ status: 'pending' });
        expect(await store.loadTurn(turn.id)).toEqual(woken);
        await expect(store.claimTurn('turn_missing')).rejects.toBeInstanceOf(RecordNotFound);
      });

      it('listTurns AND-s its filters and orders by creation', async () => {
        const c = await conversation();
        const other = await conversation();
        const root = await submittedTurn(c.id);
        const child = await store.createTurn({
          conversationId: c.id,
          agentName: 'other',
          rootTurnId: root.id,
          parentTurnId: root.id,
          parentToolExecutionId: 'tool_p',
        });
        const grandchild = await store.createTurn({
          conversationId: other.id,
          agentName: 'other',
          rootTurnId: root.id,
          parentTurnId: child.id,
        });
        await store.updateTurn(grandchild.id, { status: 'completed' });
        expect(ids(await store.listTurns({ rootTurnId: root.id }))).toEqual([
          root.id,
          child.id,
          grandchild.id,
        ]);
        expect(ids(await store.listTurns({ rootTurnId: root.id, agentName: 'other' }))).toEqual([
          child.id,
          grandchild.id,
        ]);
        expect(ids(await store.listTurns({ conversationId: c.id }))).toEqual([root.id, child.id]);
        expect(ids(await store.listTurns({ parentTurnId: root.id }))).toEqual([child.id]);
        expect(ids(await store.listTurns({ parentToolExecutionId: 'tool_p' }))).toEqual([child.id]);
        expect(ids(await store.listTurns({ rootTurnId: root.id, status: 'completed' }))).toEqual([
          grandchild.id,
        ]);
        expect(ids(await store.listTurns({ rootTurnId: root.id, status: ['pending', 'completed'] }))).toEqual(
          [root.id, child.id, grandchild.id],
        );
        expect(ids(await store.listTurns({ rootTurnId: root.id, limit: 2 }))).toEqual([root.id, child.id]);
        expect(await store.listTurns({ conversationId: c.id, agentName: 'nobody' })).toEqual([]);
      });

      it('audit: #17 listTurns selects root turns of a time range and pages after a (createdAt, id) cursor', async () => {
        const c = await conversation();
        const agentName = `paged_${Date.now()}`;
        const roots: TurnRecord[] = [];
        for (let i = 0; i < 4; i++) roots.push(await store.createTurn({ conversationId: c.id, agentName }));
        await store.createTurn({
          conversationId: c.id,
          agentName,
          rootTurnId: roots[0]!.id,
          parentTurnId: roots[0]!.id,
        });
        const first = await store.listTurns({ agentName, root: true, limit: 2 });
        expect(ids(first)).toEqual(ids(roots.slice(0, 2)));
        const after = { createdAt: first[1]!.createdAt, id: first[1]!.id };
        expect(ids(await store.listTurns({ agentName, root: true, after, limit: 2 }))).toEqual(
          ids(roots.slice(2)),
        );
        expect(
          ids(await store.listTurns({ agentName, root: true, createdFrom: roots[1]!.createdAt })),
        ).toEqual(ids(roots.filter((turn) => turn.createdAt >= roots[1]!.createdAt)));
        expect(
          ids(await store.listTurns({ agentName, root: true, createdBefore: roots[3]!.createdAt })),
        ).toEqual(ids(roots.filter((turn) => turn.createdAt < roots[3]!.createdAt)));
      });

      it('turns created in one burst list in creation order (ids break createdAt ties)', async () => {
        const c = await conversation();
        const created: TurnRecord[] = [];
        for (let i = 0; i < 8; i++) created.push(await turnIn(c.id));
        expect(ids(await store.listTurns({ conversationId: c.id }))).toEqual(ids(created));
      });

      it('listSubmittedTurns is the inventory of submitted turns in creation order, optionally bounded', async () => {
        const c = await conversation();
        const a = await submittedTurn(c.id);
        const inline = await turnIn(c.id);
        const b = await submittedTurn(c.id);
        await store.updateTurn(b.id, { status: 'completed' });
        const all = ids(await store.listSubmittedTurns());
        expect(all).toContain(a.id);
        expect(all).toContain(b.id);
        expect(all).not.toContain(inline.id);
        expect(all.indexOf(a.id)).toBeLessThan(all.indexOf(b.id));
        expect(await store.listSubmittedTurns({ limit: 1 })).toHaveLength(1);
        expect(await store.listSubmittedTurns({ limit: 0 })).toEqual([]);
      });

      it('listActionableTurns lists submitted pending/waiting/running turns, least recently updated first, bounded', async () => {
        const c = await conversation();
        const first = await submittedTurn(c.id);
        const waiting = await submittedTurn(c.id, { status: 'waiting' });
        const running = await submittedTurn(c.id, { status: 'running' });
        const done = await submittedTurn(c.id, { status: 'completed' });
        const inline = await turnIn(c.id);
        await sleep(3);
        await store.claimTurn(first.id, { from: 'pending', to: 'pending' });
        const listed = ids(await store.listActionableTurns({ limit: 100_000 })).filter((id) =>
          [first.id, waiting.id, running.id, done.id, inline.id].includes(id),
        );
        expect(listed).toEqual([waiting.id, running.id, first.id]);
        expect(await store.listActionableTurns({ limit: 1 })).toHaveLength(1);
        expect(await store.listActionableTurns({ limit: 0 })).toEqual([]);
      });

      it('listStaleInlineTurns lists unsubmitted pending/running turns by heartbeat, start or creation time, bounded', async () => {
        const c = await conversation();
        const beat = await turnIn(c.id);
        await store.claimTurn(beat.id, { heartbeatAt: ANCIENT, startedAt: '2999-01-01T00:00:00.000Z' });
        const started = await turnIn(c.id);
        await store.updateTurn(started.id, { startedAt: ANCIENT });
        const revived = await turnIn(c.id);
        await store.updateTurn(revived.id, { startedAt: ANCIENT, heartbeatAt: '2999-01-01T00:00:00.000Z' });
        const submitted = await submittedTurn(c.id);
        await store.updateTurn(submitted.id, { startedAt: ANCIENT });
        const finished = await turnIn(c.id, { status: 'completed' });
        await store.updateTurn(finished.id, { startedAt: ANCIENT });
        const fresh = await turnIn(c.id);
        const mine = [beat.id, started.id, revived.id, submitted.id, finished.id, fresh.id];
        const old = ids(
          await store.listStaleInlineTurns({ before: '2001-01-01T00:00:00.000Z', limit: 1000 }),
        );
        expect(old.filter((id) => mine.includes(id)).sort()).toEqual([beat.id, started.id].sort());
        const future = new Date(Date.now() + 60_000).toISOString();
        const byCreation = ids(await store.listStaleInlineTurns({ before: future, limit: 100_000 }));
        expect(byCreation).toContain(fresh.id);
        expect(byCreation).not.toContain(revived.id);
        expect(await store.listStaleInlineTurns({ before: future, limit: 1 })).toHaveLength(1);
        // Leave nothing ancient behind for the reconciliation tests.
        for (const turn of [beat, started]) await store.updateTurn(turn.id, { status: 'completed' });
      });

      it('busyConversation sees running/waiting turns and, by default, submitted pending ones', async () => {
        const c = await conversation();
        expect(await store.busyConversation(c.id)).toBe(false);
        const inline = await turnIn(c.id);
        expect(await store.busyConversation(c.id)).toBe(false);
        const turn = await submittedTurn(c.id);
        expect(await store.busyConversation(c.id)).toBe(true);
        expect(await store.busyConversation(c.id, { includePending: false })).toBe(false);
        await store.claimTurn(turn.id);
        expect(await store.busyConversation(c.id, { includePending: false })).toBe(true);
        await store.updateTurn(turn.id, { status: 'waiting' });
        expect(await store.busyConversation(c.id, { includePending: false })).toBe(true);
        await store.updateTurn(turn.id, { status: 'completed' });
        await store.claimTurn(inline.id);
        expect(await store.busyConversation(c.id, { includePending: false })).toBe(true);
        await store.updateTurn(inline.id, { status: 'stale' });
        expect(await store.busyConversation(c.id)).toBe(false);
      });
    });

    describe('tool executions', () => {
      it('createToolExecution stores defaults; a second one for the same call is a StoreError', async () => {
        const c = await conversation();
        const turn = await turnIn(c.id);
        const execution = await store.createToolExecution({
          turnId: turn.id,
          toolCallId: 'c1',
          toolName: 'search',
          arguments: { q: 'x', nested: { a: [1] } },
        });
        expect(execution).toMatchObject({
          turnId: turn.id,
          toolCallId: 'c1',
          toolName: 'search',
          arguments: { q: 'x', nested: { a: [1] } },
          status: 'pending',
          result: null,
          error: null,
          startedAt: null,
          completedAt: null,
        });
        expect(execution.id).toMatch(/^tool_[0-9a-f]{24}$/);
        expect(await store.loadToolExecution(execution.id)).toEqual(execution);
        await expect(
          store.createToolExecution({ turnId: turn.id, toolCallId: 'c1', toolName: 'other' }),
        ).rejects.toBeInstanceOf(StoreError);
        expect(await store.listToolExecutions({ turnId: turn.id })).toEqual([execution]);
        const otherTurn = await turnIn(c.id);
        await store.createToolExecution({ turnId: otherTurn.id, toolCallId: 'c1', toolName: 'search' });
      });

      it('createToolExecution needs an existing turn; loadToolExecution of a missing id is RecordNotFound', async () => {
        await expect(
          store.createToolExecution({ turnId: 'turn_missing', toolCallId: 'c', toolName: 't' }),
        ).rejects.toBeInstanceOf(RecordNotFound);
        await expect(store.loadToolExecution('tool_missing')).rejects.toBeInstanceOf(RecordNotFound);
        await expect(store.claimToolExecution('tool_missing')).rejects.toBeInstanceOf(RecordNotFound);
      });

      it('ST-04 claimToolExecution is compare-and-set: a late completion after interruption returns null', async () => {
        const c = await conversation();
        const turn = await turnIn(c.id);
        const execution = await store.createToolExecution({
          turnId: turn.id,
          toolCallId: 'c1',
          toolName: 't',
          status: 'running',
          startedAt: '2026-01-01T00:00:00.000Z',
        });
        const interrupted = await store.claimToolExecution(execution.id, {
          from: ['pending', 'running'],
          to: 'interrupted',
          error: { message: 'gone', details: { class: 'Interrupted' } },
          completedAt: '2026-01-01T00:00:05.000Z',
        });
        expect(interrupted).toMatchObject({
          status: 'interrupted',
          error: { message: 'gone', details: { class: 'Interrupted' } },
          startedAt: '2026-01-01T00:00:00.000Z',
        });
        expect(await store.claimToolExecution(execution.id, { result: { late: true } })).toBeNull();
        expect(await store.loadToolExecution(execution.id)).toEqual(interrupted);
        expect((await store.loadToolExecution(execution.id)).result).toBeNull();
      });

      it('claimToolExecution defaults to running → completed and writes result and times', async () => {
        const c = await conversation();
        const turn = await turnIn(c.id);
        const execution = await store.createToolExecution({
          turnId: turn.id,
          toolCallId: 'c1',
          toolName: 't',
          status: 'running',
        });
        const done = await store.claimToolExecution(execution.id, {
          result: { rows: [1, 2], text: 'ok' },
          completedAt: '2026-01-01T00:00:00.000Z',
        });
        expect(done).toMatchObject({
          status: 'completed',
          result: { rows: [1, 2], text: 'ok' },
          completedAt: '2026-01-01T00:00:00.000Z',
        });
        expect(await store.loadToolExecution(execution.id)).toEqual(done);
        const replay = await store.createToolExecution({ turnId: turn.id, toolCallId: 'c2', toolName: 't' });
        expect(
          await store.claimToolExecution(replay.id, { from: 'pending', to: 'running', startedAt: ANCIENT }),
        ).toMatchObject({ status: 'running', startedAt: ANCIENT });
        expect(
          await store.claimToolExecution(replay.id, { from: 'running', to: 'pending', startedAt: null }),
        ).toMatchObject({ status: 'pending', startedAt: null });
      });

      it('listToolExecutions lists one turn or several, in creation order', async () => {
        const c = await conversation();
        const [t1, t2, t3] = [await turnIn(c.id), await turnIn(c.id), await turnIn(c.id)];
        const e1 = await store.createToolExecution({ turnId: t1.id, toolCallId: 'a', toolName: 't' });
        const e2 = await store.createToolExecution({ turnId: t2.id, toolCallId: 'a', toolName: 't' });
        const e3 = await store.createToolExecution({ turnId: t1.id, toolCallId: 'b', toolName: 't' });
        await store.createToolExecution({ turnId: t3.id, toolCallId: 'a', toolName: 't' });
        expect(ids(await store.listToolExecutions({ turnId: t1.id }))).toEqual([e1.id, e3.id]);
        expect(ids(await store.listToolExecutions({ turnIds: [t2.id, t1.id] }))).toEqual([
          e1.id,
          e2.id,
          e3.id,
        ]);
        expect(await store.listToolExecutions({ turnIds: [] })).toEqual([]);
      });

      it('long-lived: listToolExecutions narrows to call ids, a tool name, or with/without an error', async () => {
        const c = await conversation();
        const [t1, t2] = [await turnIn(c.id), await turnIn(c.id)];
        const a = await store.createToolExecution({ turnId: t1.id, toolCallId: 'a', toolName: 'search' });
        const b = await store.createToolExecution({ turnId: t1.id, toolCallId: 'b', toolName: 'load_skill' });
        const d = await store.createToolExecution({ turnId: t1.id, toolCallId: 'd', toolName: 'search' });
        const other = await store.createToolExecution({ turnId: t2.id, toolCallId: 'a', toolName: 'search' });
        await store.claimToolExecution(d.id, {
          from: 'pending',
          to: 'failed',
          error: { message: 'boom', details: { budget_denied: true } },
        });
        // Creation order is kept, whatever the order of the ids asked for; unknown ids match nothing.
        expect(
          ids(await store.listToolExecutions({ turnId: t1.id, toolCallIds: ['d', 'a', 'zz', 'a'] })),
        ).toEqual([a.id, d.id]);
        expect(await store.listToolExecutions({ turnId: t1.id, toolCallIds: [] })).toEqual([]);
        expect(await store.listToolExecutions({ turnId: t1.id, toolCallIds: ['b'] })).toEqual([
          await store.loadToolExecution(b.id),
        ]);
        expect(ids(await store.listToolExecutions({ turnIds: [t2.id, t1.id], toolCallIds: ['a'] }))).toEqual([
          a.id,
          other.id,
        ]);
        expect(ids(await store.listToolExecutions({ turnId: t1.id, toolName: 'search' }))).toEqual([
          a.id,
          d.id,
        ]);
        expect(ids(await store.listToolExecutions({ turnId: t1.id, toolName: 'missing' }))).toEqual([]);
        expect(ids(await store.listToolExecutions({ turnIds: [t1.id, t2.id], hasError: true }))).toEqual([
          d.id,
        ]);
        expect(ids(await store.listToolExecutions({ turnId: t1.id, hasError: false }))).toEqual([a.id, b.id]);
        expect(
          ids(
            await store.listToolExecutions({
              turnId: t1.id,
              toolName: 'search',
              toolCallIds: ['a', 'b', 'd'],
              hasError: false,
            }),
          ),
        ).toEqual([a.id]);
      });

      it('long-lived: countToolExecutions counts per tool name, leaving statuses out on request', async () => {
        const c = await conversation();
        const [t1, t2, t3] = [await turnIn(c.id), await turnIn(c.id), await turnIn(c.id)];
        for (const [turn, call, name] of [
          [t1, 'a', 'search'],
          [t1, 'b', 'search'],
          [t1, 'c', 'fetch'],
          [t2, 'a', 'search'],
          [t3, 'a', 'search'],
        ] as const) {
          await store.createToolExecution({ turnId: turn.id, toolCallId: call, toolName: name });
        }
        const [cancelled] = await store.listToolExecutions({ turnId: t1.id, toolCallIds: ['b'] });
        await store.claimToolExecution(cancelled!.id, { from: 'pending', to: 'cancelled' });
        const [failed] = await store.listToolExecutions({ turnId: t2.id });
        await store.claimToolExecution(failed!.id, {
          from: 'pending',
          to: 'failed',
          error: { message: 'no' },
        });
        expect(await store.countToolExecutions({ turnId: t1.id })).toEqual({ search: 2, fetch: 1 });
        expect(
          await store.countToolExecutions({ turnIds: [t1.id, t2.id], exceptStatuses: ['cancelled'] }),
        ).toEqual({
          search: 2,
          fetch: 1,
        });
        expect(
          await store.countToolExecutions({
            turnIds: [t1.id, t2.id],
            exceptStatuses: ['cancelled'],
            hasError: false,
          }),
        ).toEqual({ search: 1, fetch: 1 });
        expect(await store.countToolExecutions({ turnIds: [t1.id, t2.id], toolName: 'fetch' })).toEqual({
          fetch: 1,
        });
        expect(await store.countToolExecutions({ turnIds: [t1.id], toolCallIds: ['a', 'c'] })).toEqual({
          search: 1,
          fetch: 1,
        });
        expect(await store.countToolExecutions({ turnIds: [] })).toEqual({});
        expect(await store.countToolExecutions({ turnId: t1.id, toolCallIds: [] })).toEqual({});
        await expect(
          store.countToolExecutions({ turnId: t1.id, exceptStatuses: ['gone' as 'cancelled'] }),
        ).rejects.toBeInstanceOf(ArgumentError);
      });
    });

    describe('deliveries', () => {
      it('createDelivery stores an undelivered row; update and list by source, destination and pending', async () => {
        const [source, destination] = [await conversation(), await conversation()];
        const turn = await turnIn(source.id);
        const first = await store.createDelivery({
          sourceConversationId: source.id,
          destinationConversationId: destination.id,
          sourceTurnId: turn.id,
          key: `message:${source.id}:1`,
          payload: { text: 'hello' },
        });
        expect(first).toMatchObject({
          sourceConversationId: source.id,
          destinationConversationId: destination.id,
          sourceTurnId: turn.id,
          payload: { text: 'hello' },
          messageId: null,
          deliveredAt: null,
        });
        expect(first.id).toMatch(/^delivery_[0-9a-f]{24}$/);
        expect(await store.loadDelivery(first.id)).toEqual(first);
        const second = await store.createDelivery({
          destinationConversationId: destination.id,
          key: `message:${source.id}:2`,
          payload: { text: 'bye' },
        });
        expect(second).toMatchObject({ sourceConversationId: null, sourceTurnId: null });
        const updated = await store.updateDelivery(first.id, {
          messageId: 'msg_x',
          deliveredAt: '2026-01-01T00:00:00.000Z',
        });
        expect(updated).toMatchObject({ messageId: 'msg_x', deliveredAt: '2026-01-01T00:00:00.000Z' });
        expect(await store.loadDelivery(first.id)).toEqual(updated);
        expect(ids(await store.listDeliveries({ destinationConversationId: destination.id }))).toEqual([
          first.id,
          second.id,
        ]);
        expect(
          ids(await store.listDeliveries({ destinationConversationId: destination.id, pending: true })),
        ).toEqual([second.id]);
        expect(ids(await store.listDeliveries({ sourceConversationId: source.id }))).toEqual([first.id]);
        expect(
          ids(await store.listDeliveries({ destinationConversationId: destination.id, limit: 1 })),
        ).toEqual([first.id]);
        expect(ids(await store.listDeliveries({ pending: true, limit: 100_000 }))).toContain(second.id);
        expect(ids(await store.listDeliveries({ pending: true, limit: 100_000 }))).not.toContain(first.id);
      });

      it('loadDelivery and updateDelivery of a missing id are RecordNotFound', async () => {
        await expect(store.loadDelivery('delivery_missing')).rejects.toBeInstanceOf(RecordNotFound);
        await expect(store.updateDelivery('delivery_missing', { messageId: 'x' })).rejects.toBeInstanceOf(
          RecordNotFound,
        );
      });

      it('BG-40 BG-41 a delivery key retry returns the original; a different message under the key is refused without revealing it', async () => {
        const [a, b, other] = [await conversation(), await conversation(), await conversation()];
        const attrs = {
          sourceConversationId: a.id,
          destinationConversationId: b.id,
          key: `k40-${a.id}`,
          payload: { text: 'secret plan', n: 1, meta: { z: 1, a: [{ y: 2, b: 3 }] } },
        };
        const first = await store.createDelivery(attrs);
        // BG-41: the payload is compared as canonical JSON, so key order does not matter.
        const again = await store.createDelivery({
          ...attrs,
          payload: { meta: { a: [{ b: 3, y: 2 }], z: 1 }, n: 1, text: 'secret plan' },
        });
        expect(again).toEqual(first);
        const refusals = [
          { ...attrs, sourceConversationId: other.id },
          { ...attrs, destinationConversationId: other.id },
          { ...attrs, sourceTurnId: 'turn_x' },
          { ...attrs, payload: { text: 'changed' } },
        ];
        for (const refusal of refusals) {
          const error = await store.createDelivery(refusal).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(ToolError);
          expect((error as Error).message).toMatch(/delivery key is already used for a different message/);
          expect((error as Error).message).not.toMatch(/secret/);
          expect(JSON.stringify((error as ToolError).details ?? {})).not.toMatch(/secret/);
        }
        expect(await store.listDeliveries({ sourceConversationId: a.id })).toEqual([first]);
        expect(await store.listDeliveries({ destinationConversationId: other.id })).toEqual([]);
      });

      it('concurrent creates under one key yield one row', async () => {
        const destination = await conversation();
        const attrs = {
          destinationConversationId: destination.id,
          key: `kc-${destination.id}`,
          payload: { text: 'x' },
        };
        const rows = await Promise.all([store.createDelivery(attrs), store.createDelivery(attrs)]);
        expect(rows[0]!.id).toBe(rows[1]!.id);
        expect(await store.listDeliveries({ destinationConversationId: destination.id })).toHaveLength(1);
      });

      it('DB-03 concurrent delivery of one delivery → one destination message', async () => {
        const [source, destination] = [await conversation(), await conversation()];
        const sourceTurn = await turnIn(source.id);
        const delivery = await store.createDelivery({
          sourceConversationId: source.id,
          destinationConversationId: destination.id,
          sourceTurnId: sourceTurn.id,
          key: `k-${destination.id}`,
          payload: { text: 'hello' },
        });
        const wake = async () => {
          await submittedTurn(destination.id);
        };
        const results = await Promise.all([
          deliver(store, delivery.id, { onDelivered: wake }),
          deliver(store, delivery.id, { onDelivered: wake }),
        ]);
        expect(results.filter((r) => r.delivered)).toHaveLength(1);
        const messages = await store.listMessages(destination.id);
        expect(messages).toHaveLength(1);
        expect(messages[0]).toMatchObject({
          role: 'user',
          kind: 'text',
          turnId: null,
          content: [{ type: 'text', text: 'hello' }],
          metadata: {
            delivery_id: delivery.id,
            source_conversation_id: source.id,
            source_turn_id: sourceTurn.id,
          },
        });
        expect(results.map((r) => r.message?.id)).toEqual([messages[0]!.id, messages[0]!.id]);
        const stored = await store.loadDelivery(delivery.id);
        expect(stored.messageId).toBe(messages[0]!.id);
        expect(stored.deliveredAt).not.toBeNull();
        expect(await store.listTurns({ conversationId: destination.id })).toHaveLength(1);
        expect(
          await store.listDeliveries({ destinationConversationId: destination.id, pending: true }),
        ).toEqual([]);
        const later = await deliver(store, delivery.id);
        expect(later).toMatchObject({ delivered: false, delivery: stored });
      });

      it('DB-04 a failure inside deliver rolls back message and delivery state', async () => {
        const destination = await conversation();
        const delivery = await store.createDelivery({
          destinationConversationId: destination.id,
          key: `k4-${destination.id}`,
          payload: { text: 'x' },
        });
        const failing = new Proxy(store, {
          get(target, property, receiver) {
            if (property === 'updateDelivery') return () => Promise.reject(new Error('update failed'));
            const value = Reflect.get(target, property, receiver);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
        await expect(deliver(failing, delivery.id)).rejects.toThrow('update failed');
        expect(await store.listMessages(destination.id)).toEqual([]);
        expect(await store.loadDelivery(delivery.id)).toEqual(delivery);
        // A failing wake-up (the continuation turn) rolls back the whole delivery too.
        await expect(
          deliver(store, delivery.id, {
            onDelivered: async () => {
              await submittedTurn(destination.id);
              throw new Error('wake failed');
            },
          }),
        ).rejects.toThrow('wake failed');
        expect(await store.listMessages(destination.id)).toEqual([]);
        expect(await store.listTurns({ conversationId: destination.id })).toEqual([]);
        expect(await store.loadDelivery(delivery.id)).toEqual(delivery);
        expect((await deliver(store, delivery.id)).delivered).toBe(true);
      });

      it('nextDeliveryTrigger finds the newest delivered message no consumed turn has seen', async () => {
        const c = await conversation();
        expect(await store.nextDeliveryTrigger(c.id)).toBeNull();
        await store.appendMessage({ conversationId: c.id, role: 'user', content: 'typed by the user' });
        expect(await store.nextDeliveryTrigger(c.id)).toBeNull();
        const delivered = [];
        for (const text of ['ping', 'pong']) {
          const delivery = await store.createDelivery({
            destinationConversationId: c.id,
            key: `kt-${text}-${c.id}`,
            payload: { text },
          });
          delivered.push((await deliver(store, delivery.id)).message!);
        }
        await store.appendMessage({ conversationId: c.id, role: 'user', content: 'not a delivery' });
        expect((await store.nextDeliveryTrigger(c.id))?.id).toBe(delivered[1]!.id);
        // An unsubmitted pending turn has consumed nothing.
        await turnIn(c.id, { contextMessageSequence: delivered[1]!.sequence });
        expect((await store.nextDeliveryTrigger(c.id))?.id).toBe(delivered[1]!.id);
        await submittedTurn(c.id, { contextMessageSequence: delivered[0]!.sequence });
        expect((await store.nextDeliveryTrigger(c.id))?.id).toBe(delivered[1]!.id);
        await submittedTurn(c.id, { contextMessageSequence: delivered[1]!.sequence });
        expect(await store.nextDeliveryTrigger(c.id)).toBeNull();
      });
    });

    describe('waits', () => {
      it('createWait is idempotent; listWaits filters by waiter and target', async () => {
        const [x, y] = [await conversation(), await conversation()];
        const waiter = await submittedTurn(x.id);
        const [t1, t2] = [await submittedTurn(y.id), await submittedTurn(y.id)];
        const first = await store.createWait({ turnId: waiter.id, targetTurnId: t1.id });
        expect(first).toMatchObject({ turnId: waiter.id, targetTurnId: t1.id });
        expect(await store.createWait({ turnId: waiter.id, targetTurnId: t1.id })).toEqual(first);
        await store.createWait({ turnId: waiter.id, targetTurnId: t2.id });
        const edges = (rows: { turnId: string; targetTurnId: string }[]) =>
          rows.map((r) => `${r.turnId}>${r.targetTurnId}`).sort();
        expect(edges(await store.listWaits({ turnId: waiter.id }))).toEqual(
          [`${waiter.id}>${t1.id}`, `${waiter.id}>${t2.id}`].sort(),
        );
        expect(edges(await store.listWaits({ targetTurnId: t1.id }))).toEqual([`${waiter.id}>${t1.id}`]);
        expect(edges(await store.listWaits({ turnId: waiter.id, targetTurnId: t2.id }))).toEqual([
          `${waiter.id}>${t2.id}`,
        ]);
        expect(await store.listWaits({ turnId: t1.id })).toEqual([]);
      });

      it('afterTurnEnd answers the open waiters and whether the lane has work, in one read', async () => {
        const [x, y] = [await conversation(), await conversation()];
        const target = await submittedTurn(y.id);
        const [first, second, ended] = [
          await submittedTurn(x.id),
          await submittedTurn(x.id),
          await submittedTurn(x.id),
        ];
        for (const waiter of [first, second, ended])
          await store.createWait({ turnId: waiter.id, targetTurnId: target.id });
        await store.updateTurn(ended.id, { status: 'completed' });
        expect(await store.afterTurnEnd(target.id, null)).toEqual({
          waiters: [first.id, second.id],
          laneWork: false,
        });
        // The lane: the target itself is the only submitted pending turn of y.
        expect(await store.afterTurnEnd(target.id, y.id)).toEqual({
          waiters: [first.id, second.id],
          laneWork: false,
        });
        // An unsubmitted pending turn is not work; a submitted one is.
        await turnIn(y.id);
        expect((await store.afterTurnEnd(target.id, y.id)).laneWork).toBe(false);
        const queued = await submittedTurn(y.id);
        expect((await store.afterTurnEnd(target.id, y.id)).laneWork).toBe(true);
        await store.updateTurn(queued.id, { status: 'completed' });
        expect((await store.afterTurnEnd(target.id, y.id)).laneWork).toBe(false);
        // An undelivered delivery to the lane is work; delivered, its message is, until a turn
        // that consumed input has seen it.
        const delivery = await store.createDelivery({
          destinationConversationId: y.id,
          key: `after-end-${y.id}`,
          payload: { text: 'ping' },
        });
        expect((await store.afterTurnEnd(target.id, y.id)).laneWork).toBe(true);
        const { message } = await deliver(store, delivery.id);
        expect((await store.afterTurnEnd(target.id, y.id)).laneWork).toBe(true);
        const seen = await submittedTurn(y.id, { contextMessageSequence: message!.sequence });
        await store.updateTurn(seen.id, { status: 'completed' });
        expect((await store.afterTurnEnd(target.id, y.id)).laneWork).toBe(false);
        expect(await store.afterTurnEnd('turn_missing', null)).toEqual({ waiters: [], laneWork: false });
      });

      it('a turn waiting on itself is refused', async () => {
        const c = await conversation();
        const turn = await submittedTurn(c.id);
        const error = await store.createWait({ turnId: turn.id, targetTurnId: turn.id }).catch((e) => e);
        expect(error).toBeInstanceOf(ToolError);
        expect(error.message).toBe('a turn cannot wait for itself');
        expect(await store.listWaits({ turnId: turn.id })).toEqual([]);
      });

      it('BG-24 waits a→b, b→c, then c→a is refused as a cycle and leaves no edge for c', async () => {
        const [x, y, z] = [await conversation(), await conversation(), await conversation()];
        const [a, b, c] = [await submittedTurn(x.id), await submittedTurn(y.id), await submittedTurn(z.id)];
        await addWaits(store, { turnId: a.id, targetTurnIds: [b.id] });
        await addWaits(store, { turnId: b.id, targetTurnIds: [c.id] });
        const error = await addWaits(store, { turnId: c.id, targetTurnIds: [a.id] }).catch((e) => e);
        expect(error).toBeInstanceOf(ToolError);
        expect(error.message).toBe('wait would create a cycle');
        expect(await store.listWaits({ turnId: c.id })).toEqual([]);
        expect(await store.listWaits({ turnId: a.id })).toHaveLength(1);
        expect(await store.listWaits({ turnId: b.id })).toHaveLength(1);
      });

      it('two opposite wait edges added concurrently: exactly one succeeds, the other is a cycle, one wait row', async () => {
        const [x, y] = [await conversation(), await conversation()];
        const [a, b] = [await submittedTurn(x.id), await submittedTurn(y.id)];
        const results = await Promise.allSettled([
          addWaits(store, { turnId: a.id, targetTurnIds: [b.id] }),
          addWaits(store, { turnId: b.id, targetTurnIds: [a.id] }),
        ]);
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
        expect(rejected.reason).toBeInstanceOf(ToolError);
        expect(String(rejected.reason)).toMatch(/cycle/);
        const rows = [
          ...(await store.listWaits({ turnId: a.id })),
          ...(await store.listWaits({ turnId: b.id })),
        ];
        expect(rows).toHaveLength(1);
      });

      it('BG-39 a wait into a busy lane is a cycle; after the lane’s work is cancelled the same wait is accepted', async () => {
        const [x, y] = [await conversation(), await conversation()];
        const a = await submittedTurn(y.id);
        const c = await submittedTurn(x.id);
        await addWaits(store, { turnId: c.id, targetTurnIds: [a.id] });
        const b = await submittedTurn(x.id);
        // b itself waits for nothing, but c shares b's lane and waits for a.
        await expect(addWaits(store, { turnId: a.id, targetTurnIds: [b.id] })).rejects.toThrow(
          'wait would create a cycle',
        );
        expect(await store.listWaits({ turnId: a.id })).toEqual([]);
        await store.updateTurn(c.id, { status: 'cancelled' });
        await addWaits(store, { turnId: a.id, targetTurnIds: [b.id] });
        expect(await store.listWaits({ turnId: a.id })).toHaveLength(1);
      });
    });

    describe('budget usage', () => {
      /** The counters recomputed from every row of the tree (what `budgetUsage` must equal). */
      const bruteForce = async (rootTurnId: string) => {
        const turns = await store.listTurns({ rootTurnId });
        const executions = await store.listToolExecutions({ turnIds: turns.map((turn) => turn.id) });
        const byName: Record<string, number> = {};
        for (const execution of executions) {
          if (execution.status === 'cancelled' || execution.error?.details?.['budget_denied'] === true)
            continue;
          byName[execution.toolName] = (byName[execution.toolName] ?? 0) + 1;
        }
        const iterationsOf = (turn: TurnRecord) => {
          const state = turn.options['state'] as { iterations?: unknown } | undefined;
          if (typeof state?.iterations === 'number') return state.iterations;
          return typeof turn.options['iterations'] === 'number' ? turn.options['iterations'] : 0;
        };
        return {
          iterations: turns.reduce((sum, turn) => sum + iterationsOf(turn), 0),
          cost: turns.reduce((sum, turn) => sum + turn.cost, 0),
          toolExecutions: Object.values(byName).reduce((sum, n) => sum + n, 0),
          toolExecutionsByName: byName,
        };
      };
      const execution = async (
        turnId: string,
        toolCallId: string,
        toolName: string,
        to?: { status: 'completed' | 'failed' | 'cancelled'; denied?: boolean },
      ) => {
        const row = await store.createToolExecution({ turnId, toolCallId, toolName, status: 'running' });
        if (!to) return row;
        return (await store.claimToolExecution(row.id, {
          from: 'running',
          to: to.status,
          ...(to.status === 'failed'
            ? { error: { message: 'x', details: to.denied ? { budget_denied: true } : {} } }
            : {}),
        }))!;
      };

      it('CORE-27 scale: the counters follow the tree across conversations, equal to a count of its rows', async () => {
        const main = await conversation();
        const side = await conversation();
        const root = await turnIn(main.id, { options: { state: { iterations: 1 } } });
        await execution(root.id, 'c1', 'search', { status: 'completed' });
        await execution(root.id, 'c2', 'search', { status: 'cancelled' });
        await execution(root.id, 'c3', 'lookup', { status: 'failed', denied: true });
        await execution(root.id, 'c4', 'lookup', { status: 'failed' });
        // A name a model made up: quotes, dots and a JSON path are plain keys.
        await execution(root.id, 'c5', 'we"ird.$name', { status: 'failed' });
        const running = await execution(root.id, 'c6', 'search');
        const child = await turnIn(side.id, {
          parentTurnId: root.id,
          rootTurnId: root.id,
          options: { iterations: 2 },
        });
        await execution(child.id, 'c1', 'search', { status: 'completed' });
        await store.updateTurn(root.id, {
          cost: 0.25,
          options: { state: { iterations: 3, phase: 'tools' } },
        });
        await store.updateTurn(child.id, { cost: 0.125 });
        expect(await store.budgetUsage(root.id)).toEqual({
          iterations: 5,
          cost: 0.375,
          toolExecutions: 5,
          toolExecutionsByName: { search: 3, lookup: 1, 'we"ird.$name': 1 },
        });
        // A cancelled call stops counting; a state without iterations falls back to the legacy key.
        await store.claimToolExecution(running.id, { from: 'running', to: 'cancelled' });
        await store.updateTurn(child.id, { options: { state: { phase: 'model' }, iterations: 4 } });
        const usage = await store.budgetUsage(root.id);
        expect(usage).toEqual(await bruteForce(root.id));
        expect(usage).toMatchObject({ iterations: 7, toolExecutions: 4 });
        expect(await store.budgetUsage(child.id)).toEqual({
          iterations: 0,
          cost: 0,
          toolExecutions: 0,
          toolExecutionsByName: {},
        });
      });

      it('CORE-27 scale: inside a block the counters include its writes; a rolled-back block leaves them as they were', async () => {
        const root = await turnIn((await conversation()).id);
        const before = await store.budgetUsage(root.id);
        await expect(
          store.atomic(root.conversationId, async () => {
            await execution(root.id, 'c1', 'search');
            await store.updateTurn(root.id, { cost: 1, options: { state: { iterations: 1 } } });
            expect(await store.budgetUsage(root.id)).toEqual({
              iterations: 1,
              cost: 1,
              toolExecutions: 1,
              toolExecutionsByName: { search: 1 },
            });
            throw new Error('roll back');
          }),
        ).rejects.toThrow('roll back');
        expect(await store.budgetUsage(root.id)).toEqual(before);
        expect(await store.budgetUsage('turn_missing')).toEqual(before);
      });
    });

    describe('events', () => {
      it('appendEvent allocates per-turn sequences, even concurrently; listEvents is ordered and bounded', async () => {
        const c = await conversation();
        const [turn, other] = [await turnIn(c.id), await turnIn(c.id)];
        await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            store.appendEvent({ turnId: turn.id, conversationId: c.id, type: `e${i}`, payload: { i } }),
          ),
        );
        const single = await store.appendEvent({
          turnId: other.id,
          conversationId: c.id,
          type: 'turn.started',
        });
        expect(single).toMatchObject({ turnId: other.id, sequence: 1, type: 'turn.started', payload: {} });
        const events = await store.listEvents(turn.id);
        expect(events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
        expect(events.map((e) => e.type).sort()).toEqual(['e0', 'e1', 'e2', 'e3', 'e4', 'e5']);
        expect(events.every((e) => e.conversationId === c.id && e.turnId === turn.id)).toBe(true);
        expect(events.map((e) => e.payload['i']).sort()).toEqual([0, 1, 2, 3, 4, 5]);
        expect((await store.listEvents(turn.id, { afterSequence: 4 })).map((e) => e.sequence)).toEqual([
          5, 6,
        ]);
        expect(
          (await store.listEvents(turn.id, { afterSequence: 1, limit: 2 })).map((e) => e.sequence),
        ).toEqual([2, 3]);
        expect(await store.listEvents(other.id)).toEqual([single]);
        expect(await store.listEvents('turn_missing')).toEqual([]);
      });

      it('appendEvents appends in order with consecutive sequences, even beside concurrent appends', async () => {
        const c = await conversation();
        const turn = await turnIn(c.id);
        const batch = (name: string) =>
          store.appendEvents({
            turnId: turn.id,
            conversationId: c.id,
            events: ['a', 'b', 'c'].map((type) => ({ type: `${name}.${type}`, payload: { name } })),
          });
        const results = await Promise.all([
          batch('x'),
          store.appendEvent({ turnId: turn.id, conversationId: c.id, type: 'single' }),
          batch('y'),
          store.atomic(c.id, () => batch('z')),
        ]);
        for (const events of [results[0], results[2], results[3]]) {
          expect(events.map((e) => e.type.split('.')[1])).toEqual(['a', 'b', 'c']);
          const [first] = events.map((e) => e.sequence);
          expect(events.map((e) => e.sequence)).toEqual([first, first! + 1, first! + 2]);
        }
        const stored = await store.listEvents(turn.id);
        expect(stored.map((e) => e.sequence)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
        expect(await store.appendEvents({ turnId: turn.id, conversationId: c.id, events: [] })).toEqual([]);
        const many = await store.appendEvents({
          turnId: turn.id,
          conversationId: c.id,
          events: Array.from({ length: 450 }, (_, i) => ({ type: 'many', payload: { i } })),
        });
        expect(many.map((e) => e.payload['i'])).toEqual(Array.from({ length: 450 }, (_, i) => i));
        expect(many.map((e) => e.sequence)).toEqual(Array.from({ length: 450 }, (_, i) => i + 11));
      });
    });

    describe('live stream parts', () => {
      it('appendStreamParts gives store-wide increasing sequences; listStreamParts is per root, ordered, bounded; hasStreamPart', async () => {
        const c = await conversation();
        const root = await turnIn(c.id);
        const other = await turnIn(c.id);
        const child = await store.createTurn({
          conversationId: c.id,
          agentName: 'agent',
          parentTurnId: root.id,
          rootTurnId: root.id,
        });
        const first = await store.appendStreamParts([
          { rootTurnId: root.id, turnId: root.id, type: 'status', payload: { status: 'running' } },
          { rootTurnId: root.id, turnId: child.id, type: 'tool.call', payload: { tool_call_id: 'c1' } },
        ]);
        const elsewhere = await store.appendStreamParts([
          { rootTurnId: other.id, turnId: other.id, type: 'status', payload: { status: 'running' } },
        ]);
        const last = await store.appendStreamParts([
          { rootTurnId: root.id, turnId: root.id, type: 'finish' },
        ]);
        expect(first[0]).toMatchObject({
          rootTurnId: root.id,
          turnId: root.id,
          step: null,
          attempt: null,
          type: 'status',
          payload: { status: 'running' },
        });
        const sequences = [...first, ...elsewhere, ...last].map((part) => part.sequence);
        expect([...sequences].sort((a, b) => a - b)).toEqual(sequences);
        expect(new Set(sequences).size).toBe(4);
        const listed = await store.listStreamParts(root.id);
        expect(listed).toEqual([...first, ...last]);
        expect(await store.listStreamParts(root.id, { afterSequence: first[0]!.sequence })).toEqual([
          first[1],
          last[0],
        ]);
        expect(await store.listStreamParts(root.id, { limit: 1 })).toEqual([first[0]]);
        expect(await store.hasStreamPart(root.id, first[1]!.sequence)).toBe(true);
        expect(await store.hasStreamPart(other.id, first[1]!.sequence)).toBe(false);
        expect(await store.hasStreamPart(root.id, last[0]!.sequence + 1_000_000)).toBe(false);
        expect(await store.appendStreamParts([])).toEqual([]);
        await expect(
          store.appendStreamParts([{ rootTurnId: root.id, turnId: root.id, type: 'nonsense' as 'finish' }]),
        ).rejects.toBeInstanceOf(ArgumentError);
      });

      it("a delta is listed only while its attempt is its step's latest step.started (an attempt that died is left out)", async () => {
        const c = await conversation();
        const root = await turnIn(c.id);
        const at = { rootTurnId: root.id, turnId: root.id, step: 'run:1' };
        const [started1] = await store.appendStreamParts([{ ...at, type: 'step.started' }]);
        const [delta1] = await store.appendStreamParts([
          { ...at, attempt: started1!.sequence, type: 'text.delta', payload: { text: 'Hel' } },
        ]);
        expect((await store.listStreamParts(root.id)).map((part) => part.sequence)).toEqual([
          started1!.sequence,
          delta1!.sequence,
        ]);
        const [restarted, started2] = await store.appendStreamParts([
          { ...at, type: 'step.restarted' },
          { ...at, type: 'step.started' },
        ]);
        const [delta2, late] = await store.appendStreamParts([
          { ...at, attempt: started2!.sequence, type: 'text.delta', payload: { text: 'Hello' } },
          // A zombie of the first attempt still writing: left out too.
          { ...at, attempt: started1!.sequence, type: 'reasoning.delta', payload: { text: 'late' } },
        ]);
        const listed = await store.listStreamParts(root.id);
        expect(listed.map((part) => part.sequence)).toEqual([
          started1!.sequence,
          restarted!.sequence,
          started2!.sequence,
          delta2!.sequence,
        ]);
        // The left-out parts existed: a cursor at them is still a cursor.
        expect(await store.hasStreamPart(root.id, delta1!.sequence)).toBe(true);
        expect(await store.hasStreamPart(root.id, late!.sequence)).toBe(true);
      });

      it('parts written inside a transaction that rolls back are never listed', async () => {
        const c = await conversation();
        const root = await turnIn(c.id);
        await expect(
          store.atomic(c.id, async () => {
            await store.appendStreamParts([{ rootTurnId: root.id, turnId: root.id, type: 'status' }]);
            throw new Error('boom');
          }),
        ).rejects.toThrow('boom');
        expect(await store.listStreamParts(root.id)).toEqual([]);
      });
    });

    describe('stale inline turns', () => {
      it('ST-05 reconcileStaleTurns only transitions old pending/running unsubmitted turns', async () => {
        const c = await conversation();
        const oldRunning = await turnIn(c.id);
        await store.claimTurn(oldRunning.id, { claimToken: TOKEN_A, heartbeatAt: ANCIENT });
        const oldPending = await turnIn(c.id);
        await store.updateTurn(oldPending.id, { startedAt: ANCIENT });
        const fresh = await turnIn(c.id);
        await store.claimTurn(fresh.id, { startedAt: ANCIENT, heartbeatAt: '2999-01-01T00:00:00.000Z' });
        const done = await turnIn(c.id);
        await store.updateTurn(done.id, { status: 'completed', startedAt: ANCIENT });
        const submitted = await submittedTurn(c.id);
        await store.claimTurn(submitted.id, { heartbeatAt: ANCIENT });
        const waiting = await turnIn(c.id, { status: 'waiting' });
        await store.updateTurn(waiting.id, { startedAt: ANCIENT });
        const mine = [oldRunning.id, oldPending.id, fresh.id, done.id, submitted.id, waiting.id];
        const stale = (
          await store.reconcileStaleTurns({ before: '2001-01-01T00:00:00.000Z', limit: 1000 })
        ).filter((row) => mine.includes(row.id));
        expect(ids(stale).sort()).toEqual([oldRunning.id, oldPending.id].sort());
        for (const row of stale) {
          expect(row).toMatchObject({ status: 'stale', claimToken: null });
          expect(row.completedAt).not.toBeNull();
          expect(await store.loadTurn(row.id)).toEqual(row);
        }
        expect((await store.loadTurn(fresh.id)).status).toBe('running');
        expect((await store.loadTurn(done.id)).status).toBe('completed');
        expect((await store.loadTurn(submitted.id)).status).toBe('running');
        expect((await store.loadTurn(waiting.id)).status).toBe('waiting');
        const again = await store.reconcileStaleTurns({ before: '2001-01-01T00:00:00.000Z' });
        expect(again.filter((row) => mine.includes(row.id))).toEqual([]);
      });

      it('reconcileStaleTurns is bounded by limit; repeated calls drain further batches', async () => {
        const c = await conversation();
        const turns = [await turnIn(c.id), await turnIn(c.id), await turnIn(c.id)];
        for (const turn of turns) await store.updateTurn(turn.id, { startedAt: ANCIENT });
        const before = '2001-01-01T00:00:00.000Z';
        expect(await store.reconcileStaleTurns({ before, limit: 2 })).toHaveLength(2);
        for (let pass = 0; pass < 10; pass++) {
          const batch = await store.reconcileStaleTurns({ before, limit: 2 });
          expect(batch.length).toBeLessThanOrEqual(2);
          if (batch.length === 0) break;
        }
        const statuses = await Promise.all(turns.map(async (t) => (await store.loadTurn(t.id)).status));
        expect(statuses).toEqual(['stale', 'stale', 'stale']);
      });
    });

    describe('transactions', () => {
      it('a write that throws inside atomic leaves no row behind, nested blocks included', async () => {
        const c = await conversation();
        const turn = await turnIn(c.id);
        await expect(
          store.atomic(c.id, async () => {
            await store.appendMessage({ conversationId: c.id, role: 'user', content: 'doomed' });
            await store.atomic(c.id, async () => {
              await turnIn(c.id);
              await store.updateTurn(turn.id, { outputText: 'doomed' });
            });
            throw new Error('boom');
          }),
        ).rejects.toThrow('boom');
        expect(await store.listMessages(c.id)).toEqual([]);
        expect(ids(await store.listTurns({ conversationId: c.id }))).toEqual([turn.id]);
        expect(await store.loadTurn(turn.id)).toEqual(turn);
        expect(await store.latestMessageSequence(c.id)).toBe(0);
      });

      it('an error thrown by a nested block rolls back the outermost transaction', async () => {
        const [x, y] = [await conversation(), await conversation()];
        await expect(
          store.atomic(x.id, async () => {
            await store.appendMessage({ conversationId: x.id, role: 'user', content: 'outer' });
            await store.atomic(y.id, async () => {
              await store.appendMessage({ conversationId: y.id, role: 'user', content: 'inner' });
              await store.createDelivery({ destinationConversationId: y.id, key: `kr-${y.id}`, payload: {} });
              throw new ToolError('inner failed');
            });
          }),
        ).rejects.toBeInstanceOf(ToolError);
        expect(await store.listMessages(x.id)).toEqual([]);
        expect(await store.listMessages(y.id)).toEqual([]);
        expect(await store.listDeliveries({ destinationConversationId: y.id })).toEqual([]);
        // Sequences are allocated afresh after a rollback.
        expect(
          (await store.appendMessage({ conversationId: x.id, role: 'user', content: 'ok' })).sequence,
        ).toBe(1);
      });

      it('atomic is reentrant, returns the block value, and commits nested writes', async () => {
        const [x, y] = [await conversation(), await conversation()];
        const value = await store.atomic(x.id, () =>
          store.atomic(x.id, () =>
            store.atomic(y.id, async () => {
              await store.appendMessage({ conversationId: y.id, role: 'user', content: 'kept' });
              return 42;
            }),
          ),
        );
        expect(value).toBe(42);
        expect(await store.listMessages(y.id)).toHaveLength(1);
        expect(await store.atomic(null, async () => 'none')).toBe('none');
        expect(await store.atomicGraph(() => store.atomic(x.id, async () => 'graph'))).toBe('graph');
      });

      it('concurrent atomic blocks on one conversation do not interleave', async () => {
        const c = await store.createConversation({ agentName: 'a', metadata: { count: 0 } });
        await Promise.all(
          Array.from({ length: 5 }, () =>
            store.atomic(c.id, async () => {
              const current = await store.loadConversation(c.id);
              await sleep(5);
              await store.updateConversation(c.id, {
                metadata: { count: (current.metadata['count'] as number) + 1 },
              });
            }),
          ),
        );
        expect((await store.loadConversation(c.id)).metadata).toEqual({ count: 5 });
      });

      it('concurrent atomicGraph blocks do not interleave', async () => {
        const c = await store.createConversation({ agentName: 'a', metadata: { count: 0 } });
        await Promise.all(
          Array.from({ length: 4 }, () =>
            store.atomicGraph(async () => {
              const current = await store.loadConversation(c.id);
              await sleep(5);
              await store.updateConversation(c.id, {
                metadata: { count: (current.metadata['count'] as number) + 1 },
              });
            }),
          ),
        );
        expect((await store.loadConversation(c.id)).metadata).toEqual({ count: 4 });
      });
    });

    describe('claims and fencing', () => {
      it('DB-01 two concurrent claims of one turn: exactly one wins and the stored token is the winner’s', async () => {
        const c = await conversation();
        const turn = await submittedTurn(c.id);
        const results = await Promise.all([
          store.claimTurn(turn.id, { claimToken: TOKEN_A }),
          store.claimTurn(turn.id, { claimToken: TOKEN_B }),
        ]);
        const winners = results.filter((r) => r !== null);
        expect(winners).toHaveLength(1);
        expect((await store.loadTurn(turn.id)).claimToken).toBe(winners[0]!.claimToken);
        const other = await submittedTurn((await conversation()).id);
        const lane = await Promise.all([
          claimInLane(store, other.id, TOKEN_A),
          claimInLane(store, other.id, TOKEN_B),
        ]);
        const laneWinners = lane.filter((r) => r.claimed);
        expect(laneWinners).toHaveLength(1);
        expect((await store.loadTurn(other.id)).claimToken).toBe(laneWinners[0]!.turn.claimToken);
      });

      it("listLane: a conversation's open turns oldest first, and its newest message sequence, in one read (decision 88)", async () => {
        const c = await conversation();
        expect(await store.listLane(c.id)).toEqual({ turns: [], latestMessageSequence: 0 });
        const [first, second, done] = [
          await submittedTurn(c.id),
          await submittedTurn(c.id),
          await submittedTurn(c.id),
        ];
        await store.updateTurn(done.id, { status: 'completed' });
        await store.appendMessage({ conversationId: c.id, role: 'user', content: 'later' });
        const latest = await store.latestMessageSequence(c.id);
        expect(latest).toBeGreaterThan(0);
        const lane = await store.listLane(c.id);
        expect(ids(lane.turns)).toEqual([first.id, second.id]);
        expect(lane.latestMessageSequence).toBe(latest);
        expect(ids(lane.turns)).toEqual(
          ids(
            await store.listTurns({
              conversationId: c.id,
              status: ['pending', 'waiting', 'running', 'paused'],
            }),
          ),
        );
        // Another conversation's messages and turns are not its own.
        expect(await store.listLane((await conversation()).id)).toEqual({
          turns: [],
          latestMessageSequence: 0,
        });
      });

      it('loadTurnWithWaits: a turn and its waits in one read, as loadTurn and listWaits answer (decision 88)', async () => {
        const c = await conversation();
        const waiter = await submittedTurn(c.id);
        expect(await store.loadTurnWithWaits(waiter.id)).toEqual({
          turn: await store.loadTurn(waiter.id),
          waits: [],
        });
        const targets = [
          await submittedTurn((await conversation()).id),
          await submittedTurn((await conversation()).id),
        ];
        for (const target of targets) await store.createWait({ turnId: waiter.id, targetTurnId: target.id });
        // Another turn's waits are not its own.
        await store.createWait({ turnId: targets[0]!.id, targetTurnId: targets[1]!.id });
        const both = await store.loadTurnWithWaits(waiter.id);
        expect(both.turn).toEqual(await store.loadTurn(waiter.id));
        expect(both.waits).toEqual(await store.listWaits({ turnId: waiter.id }));
        expect(both.waits.map((wait) => wait.targetTurnId).sort()).toEqual(targets.map((t) => t.id).sort());
        await expect(store.loadTurnWithWaits('turn_missing')).rejects.toThrow(RecordNotFound);
      });

      it('DB-02 two submitted turns in one conversation claimed concurrently → only one running', async () => {
        const c = await conversation();
        const [first, second] = [await submittedTurn(c.id), await submittedTurn(c.id)];
        const results = await Promise.all([
          claimInLane(store, second.id, TOKEN_B),
          claimInLane(store, first.id, TOKEN_A),
        ]);
        expect(results.map((r) => r.claimed)).toEqual([false, true]);
        expect(results[0]).toMatchObject({ claimed: false, reason: 'lane_busy' });
        expect(ids(await store.listTurns({ conversationId: c.id, status: 'running' }))).toEqual([first.id]);
        expect(await store.loadTurn(first.id)).toMatchObject({ claimToken: TOKEN_A });
        expect((await store.loadTurn(first.id)).heartbeatAt).not.toBeNull();
        expect(await claimInLane(store, first.id, TOKEN_A)).toMatchObject({ claimed: true });
        expect(await claimInLane(store, first.id, TOKEN_B)).toMatchObject({
          claimed: false,
          reason: 'not_pending',
        });
        // The raw lane race: each claim checks the lane inside the conversation's transaction.
        const d = await conversation();
        const pair = [await submittedTurn(d.id), await submittedTurn(d.id)];
        const raced = await Promise.all(
          pair.map((turn, i) =>
            store.atomic(d.id, async () =>
              (await store.busyConversation(d.id, { includePending: false }))
                ? null
                : store.claimTurn(turn.id, { claimToken: [TOKEN_A, TOKEN_B][i]! }),
            ),
          ),
        );
        expect(raced.filter((r) => r !== null)).toHaveLength(1);
        expect(await store.listTurns({ conversationId: d.id, status: 'running' })).toHaveLength(1);
      });

      it('DB-05 a fenced store whose token was replaced raises LostClaim for appendMessage, updateTurn, claimTurn and writes nothing', async () => {
        const c = await conversation();
        const turn = await submittedTurn(c.id);
        await store.claimTurn(turn.id, { claimToken: TOKEN_A });
        const fenced = await FencedStore.forTurn(store, turn, TOKEN_A);
        await fenced.appendMessage({ conversationId: c.id, role: 'assistant', content: 'while owned' });
        await fenced.updateTurn(turn.id, { heartbeatAt: '2026-01-01T00:00:00.000Z' });
        await store.updateTurn(turn.id, { claimToken: TOKEN_B });
        const before = await store.loadTurn(turn.id);
        // Handlers attached at once: on a pooled backend the three run in parallel.
        const attempts = [
          fenced.appendMessage({ conversationId: c.id, role: 'assistant', content: 'late' }),
          fenced.updateTurn(turn.id, { outputText: 'late' }),
          fenced.claimTurn(turn.id, { from: 'running', to: 'completed' }),
        ].map((attempt) => attempt.catch((e: unknown) => e));
        for (const attempt of attempts) {
          const error = await attempt;
          expect(error).toBeInstanceOf(LostClaim);
          expect((error as Error).message).toBe('turn ownership was revoked');
        }
        expect((await store.listMessages(c.id)).map((m) => m.content[0])).toEqual([
          { type: 'text', text: 'while owned' },
        ]);
        expect(await store.loadTurn(turn.id)).toEqual(before);
        expect(before).toMatchObject({ status: 'running', outputText: null, claimToken: TOKEN_B });
      });
    });

    describe('copies', () => {
      it('mutating a returned record does not change the store', async () => {
        const c = await store.createConversation({ agentName: 'a', metadata: { nested: { v: 1 } } });
        c.metadata['nested'] = { v: 2 };
        const loaded = await store.loadConversation(c.id);
        expect(loaded.metadata).toEqual({ nested: { v: 1 } });
        (loaded.metadata['nested'] as { v: number }).v = 3;
        expect((await store.loadConversation(c.id)).metadata).toEqual({ nested: { v: 1 } });

        const turn = await turnIn(c.id, { options: { state: { parts: [{ type: 'text', text: 'x' }] } } });
        (turn.options['state'] as { parts: unknown[] }).parts.push('junk');
        const [listed] = await store.listTurns({ conversationId: c.id });
        (listed!.options['state'] as { parts: unknown[] }).parts.push('junk');
        expect((await store.loadTurn(turn.id)).options).toEqual({
          state: { parts: [{ type: 'text', text: 'x' }] },
        });

        const message = await store.appendMessage({ conversationId: c.id, role: 'user', content: 'hi' });
        message.content.push({ type: 'text', text: 'junk' });
        const [listedMessage] = await store.listMessages(c.id);
        listedMessage!.content.push({ type: 'text', text: 'junk' });
        expect((await store.loadMessage(message.id)).content).toEqual([{ type: 'text', text: 'hi' }]);

        const input = { q: ['a'] };
        const execution = await store.createToolExecution({
          turnId: turn.id,
          toolCallId: 'c',
          toolName: 't',
          arguments: input,
        });
        input.q.push('caller mutated its input');
        execution.arguments['q'] = 'junk';
        expect((await store.loadToolExecution(execution.id)).arguments).toEqual({ q: ['a'] });

        const delivery = await store.createDelivery({
          destinationConversationId: c.id,
          key: `kcopy-${c.id}`,
          payload: { text: 'p' },
        });
        delivery.payload['text'] = 'junk';
        expect((await store.loadDelivery(delivery.id)).payload).toEqual({ text: 'p' });

        const event = await store.appendEvent({
          turnId: turn.id,
          conversationId: c.id,
          type: 't',
          payload: { a: 1 },
        });
        event.payload['a'] = 2;
        expect((await store.listEvents(turn.id))[0]!.payload).toEqual({ a: 1 });
      });
    });
  });
}
