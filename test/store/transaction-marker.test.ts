/**
 * Issue 28, finding 7: user code (event listeners, the authorization policy) never runs inside
 * an open store transaction — on real SQLite and PostgreSQL stores.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { Runtime } from '../../src/engine/runtime.js';
import { StoreError } from '../../src/errors.js';
import { openStore } from '../../src/store/index.js';
import { inStoreTransaction } from '../../src/store/transaction-marker.js';
import type { EventRecord, Store, TurnRecord } from '../../src/store/types.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const agent = defineAgent({ name: 'quiet' });

function cases(name: string, open: () => Promise<{ store: Store; close(): Promise<void> }>) {
  describe(name, () => {
    let store: Store;
    let close: () => Promise<void>;
    let turn: TurnRecord;
    const heard: { type: string; inTransaction: boolean; status: string }[] = [];
    const policyCalls: boolean[] = [];
    let runtime: Runtime;
    beforeAll(async () => {
      ({ store, close } = await open());
      runtime = new Runtime({
        store,
        agents: new AgentRegistry([agent]),
        authorization: () => {
          policyCalls.push(inStoreTransaction());
          return true;
        },
        onEvent: async (event: EventRecord) => {
          // A listener reads what the event reports: committed, seen from outside any transaction.
          const row = await store.loadTurn(event.turnId);
          heard.push({ type: event.type, inTransaction: inStoreTransaction(), status: row.status });
        },
      });
      const conversation = await store.createConversation({ agentName: agent.name });
      turn = await store.createTurn({ conversationId: conversation.id, agentName: agent.name });
    });
    afterAll(async () => close?.());

    it(`security: the authorization policy called inside an open ${name} transaction throws, and the transaction's writes roll back`, async () => {
      const before = await store.listTurns({ conversationId: turn.conversationId });
      await expect(
        store.atomic(turn.conversationId, async () => {
          await store.createTurn({ conversationId: turn.conversationId, agentName: agent.name });
          await runtime.authorize('tool', null, { turn: turn.id });
        }),
      ).rejects.toThrow(StoreError);
      await expect(store.atomic(null, () => runtime.authorize('cancel', null, {}))).rejects.toThrow(
        /authorization policy was called inside an open store transaction/,
      );
      expect(policyCalls).toEqual([]);
      expect(await store.listTurns({ conversationId: turn.conversationId })).toHaveLength(before.length);
      // Outside any transaction it runs.
      await runtime.authorize('tool', null, { turn: turn.id });
      expect(policyCalls).toEqual([false]);
    });

    it(`security: on ${name}, listeners hear of an event appended inside a transaction only after its commit, and never of one rolled back`, async () => {
      heard.length = 0;
      await store.atomic(turn.conversationId, async () => {
        await runtime.emit(turn, 'test.inside', {});
        await store.updateTurn(turn.id, { status: 'cancelled' });
        // Not yet: the write it reports may still roll back.
        expect(heard).toEqual([]);
      });
      expect(heard).toEqual([{ type: 'test.inside', inTransaction: false, status: 'cancelled' }]);
      await expect(
        store.atomic(turn.conversationId, async () => {
          await runtime.emit(turn, 'test.rolled_back', {});
          throw new Error('the write fails');
        }),
      ).rejects.toThrow('the write fails');
      expect(heard.map((h) => h.type)).toEqual(['test.inside']);
      expect((await store.listEvents(turn.id)).map((e) => e.type)).toEqual(['test.inside']);
    });
  });
}

cases('SQLite', async () => {
  const store = await openStore(tempSqliteUrl());
  return { store, close: () => store.close() };
});

describePostgres('PostgreSQL', () => {
  cases('PostgreSQL', async () => {
    const { store, drop } = await openPgTestStore();
    return { store, close: drop };
  });
});
