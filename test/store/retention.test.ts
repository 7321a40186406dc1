/**
 * Retention (decision 64) on real SQLite files and real PostgreSQL: what a prune removes,
 * what it keeps, and that it deletes a bounded batch per transaction. The pass runs with a
 * clock two hours ahead, so rows written now are "old" without waiting.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readRunStream } from '../../src/client/run-stream.js';
import { ArgumentError, ConfigError } from '../../src/errors.js';
import { pruneStore } from '../../src/store/retention/prune-store.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import type { NewStreamPart, Store, TurnRecord } from '../../src/store/types.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';

const HOUR = 60 * 60 * 1000;
const AHEAD = () => new Date(Date.now() + 2 * HOUR);
/** Ended after the pass's cutoff (now + 2 h − 1 h grace): inside the grace window. */
const RECENTLY = () => new Date(Date.now() + 1.5 * HOUR).toISOString();
const TABLES = [
  'turnkit_conversations',
  'turnkit_messages',
  'turnkit_turns',
  'turnkit_tool_executions',
  'turnkit_deliveries',
  'turnkit_waits',
  'turnkit_events',
  'turnkit_stream_parts',
] as const;

interface Backend {
  store: Store;
  count(table: string, where?: string, params?: unknown[]): Promise<number>;
  close(): Promise<void>;
}

function describeRetention(name: string, open: () => Promise<Backend>): void {
  describe(`scale: retention (${name})`, () => {
    let backend: Backend;
    let store: Store;
    beforeEach(async () => {
      backend = await open();
      store = backend.store;
    });
    afterEach(async () => {
      await backend.close();
    });

    const parts = (root: string, turnId: string, n: number): NewStreamPart[] =>
      Array.from({ length: n }, (_, i) => ({
        rootTurnId: root,
        turnId,
        type: 'tool.call' as const,
        payload: { tool_call_id: `c${i}`, name: 'lookup', arguments: { i } },
      }));

    /** A root turn with `n` stream parts, left `running` or ended at `completedAt`. */
    async function run(n: number, ended?: string): Promise<TurnRecord> {
      const conversation = await store.createConversation({ agentName: 'agent' });
      const turn = await store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        status: 'running',
      });
      await store.appendStreamParts(parts(turn.id, turn.id, n));
      if (ended === undefined) return turn;
      await store.appendStreamParts([
        { rootTurnId: turn.id, turnId: turn.id, type: 'finish', payload: { status: 'completed' } },
      ]);
      return store.updateTurn(turn.id, { status: 'completed', completedAt: ended });
    }

    /** The next part a client resuming after `cursor` reads, through the real stream reader. */
    async function resumeAfter(root: string, cursor: string): Promise<string | null> {
      const stop = new AbortController();
      for await (const part of readRunStream(store, root, {
        after: cursor,
        signal: stop.signal,
        pollMs: 5,
      })) {
        stop.abort();
        return part.cursor;
      }
      return null;
    }

    it('scale: a prune leaves every live run able to resume its stream, and removes the parts of runs that ended before the window', async () => {
      const live = [await run(5), await run(7)];
      // A run whose root ended but whose sub-agent still runs (a detached child): still live.
      const parent = await run(4, new Date().toISOString());
      const childConversation = await store.createConversation({ agentName: 'helper' });
      const child = await store.createTurn({
        conversationId: childConversation.id,
        agentName: 'helper',
        parentTurnId: parent.id,
        rootTurnId: parent.id,
        status: 'running',
      });
      await store.appendStreamParts(parts(parent.id, child.id, 3));
      const recent = [await run(6, RECENTLY())];
      const ended = [await run(9, new Date().toISOString()), await run(8, new Date().toISOString())];
      const before = new Map<string, string[]>();
      for (const turn of [...live, parent, ...recent]) {
        before.set(
          turn.id,
          (await store.listStreamParts(turn.id)).map((part) => String(part.sequence)),
        );
      }

      const report = await pruneStore(store, { streamPartsGraceMs: HOUR, batchSize: 4 }, { now: AHEAD() });

      for (const turn of ended) expect(await store.listStreamParts(turn.id)).toEqual([]);
      expect(report.deleted.streamParts).toBe(9 + 1 + 8 + 1);
      for (const turn of [...live, parent, ...recent]) {
        const cursors = before.get(turn.id)!;
        expect((await store.listStreamParts(turn.id)).map((part) => String(part.sequence))).toEqual(cursors);
        expect(await resumeAfter(turn.id, cursors[1]!)).toBe(cursors[2]);
      }
      expect(report.largestBatch).toBeLessThanOrEqual(4);
      expect(report.batches).toBeGreaterThanOrEqual(5);
    });

    it('scale: a dry run counts what a prune removes and writes nothing', async () => {
      await run(5, new Date().toISOString());
      const old = await fullConversation();
      await store.appendEvent({
        turnId: old.turn.id,
        conversationId: old.conversation,
        type: 'turn.completed',
      });
      const counts = async () => {
        const all: number[] = [];
        for (const table of TABLES) all.push(await backend.count(table));
        return all;
      };
      const was = await counts();
      const policy = {
        streamPartsGraceMs: HOUR,
        eventsMaxAgeMs: HOUR,
        conversationsMaxAgeMs: HOUR,
        batchSize: 2,
      };

      const dry = await pruneStore(store, policy, { now: AHEAD(), dryRun: true });
      expect(await counts()).toEqual(was);
      expect(dry).toMatchObject({ dryRun: true, batches: 0, largestBatch: 0 });

      const real = await pruneStore(store, policy, { now: AHEAD() });
      expect(real.deleted).toEqual(dry.deleted);
      expect(real.deleted.conversations).toBe(3);
      expect(await counts()).toEqual(TABLES.map(() => 0));
    });

    /** A finished conversation with every kind of row, and a sub-agent conversation under it. */
    async function fullConversation(status: 'completed' | 'pending' | 'running' = 'completed') {
      const conversation = await store.createConversation({
        agentName: 'agent',
        metadata: { principal: 'p' },
      });
      for (let i = 0; i < 7; i++)
        await store.appendMessage({ conversationId: conversation.id, role: 'user', content: `m${i}` });
      const turn = await store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        status: 'running',
      });
      const execution = await store.createToolExecution({
        turnId: turn.id,
        toolCallId: 'call1',
        toolName: 'delegate',
      });
      const sub = await store.createConversation({
        agentName: 'helper',
        metadata: { parent_conversation_id: conversation.id, parent_turn_id: turn.id },
      });
      await store.appendMessage({ conversationId: sub.id, role: 'user', content: 'task' });
      const child = await store.createTurn({
        conversationId: sub.id,
        agentName: 'helper',
        parentTurnId: turn.id,
        parentToolExecutionId: execution.id,
        rootTurnId: turn.id,
        status: 'completed',
      });
      await store.createWait({ turnId: turn.id, targetTurnId: child.id });
      await store.appendEvent({ turnId: turn.id, conversationId: conversation.id, type: 'turn.started' });
      await store.appendEvent({ turnId: child.id, conversationId: sub.id, type: 'turn.started' });
      await store.appendStreamParts(parts(turn.id, child.id, 3));
      await store.createDelivery({
        destinationConversationId: conversation.id,
        key: `k-${conversation.id}`,
        payload: { text: 'hi' },
      });
      if (status === 'completed')
        await store.updateTurn(turn.id, { status: 'completed', completedAt: new Date().toISOString() });
      if (status === 'pending')
        await store.createTurn({
          conversationId: conversation.id,
          agentName: 'agent',
          submittedAt: new Date().toISOString(),
        });
      return { conversation: conversation.id, sub: sub.id, turn, child };
    }

    const rowsOf = async (conversationId: string) => ({
      conversations: await backend.count('turnkit_conversations', 'id = ?', [conversationId]),
      messages: await backend.count('turnkit_messages', 'conversation_id = ?', [conversationId]),
      turns: await backend.count('turnkit_turns', 'conversation_id = ?', [conversationId]),
      events: await backend.count('turnkit_events', 'conversation_id = ?', [conversationId]),
      deliveries: await backend.count('turnkit_deliveries', 'destination_conversation_id = ?', [
        conversationId,
      ]),
    });

    it('scale: whole conversations leave with all their rows; those with an unfinished turn are kept', async () => {
      const finished = await fullConversation('completed');
      const queued = await fullConversation('pending');
      const running = await fullConversation('running');
      await store.createConversation({ id: 'mcp_manifest', agentName: 'turnkit:mcp', metadata: {} });
      const keptBefore = [await rowsOf(queued.conversation), await rowsOf(running.conversation)];

      const report = await pruneStore(store, { conversationsMaxAgeMs: HOUR, batchSize: 3 }, { now: AHEAD() });

      for (const id of [finished.conversation, finished.sub])
        expect(await rowsOf(id)).toEqual({
          conversations: 0,
          messages: 0,
          turns: 0,
          events: 0,
          deliveries: 0,
        });
      expect(await backend.count('turnkit_tool_executions', 'turn_id = ?', [finished.turn.id])).toBe(0);
      expect(await backend.count('turnkit_waits', 'turn_id = ?', [finished.turn.id])).toBe(0);
      expect(await backend.count('turnkit_stream_parts', 'root_turn_id = ?', [finished.turn.id])).toBe(0);
      expect([await rowsOf(queued.conversation), await rowsOf(running.conversation)]).toEqual(keptBefore);
      expect(await backend.count('turnkit_stream_parts', 'root_turn_id = ?', [running.turn.id])).toBe(3);
      expect(await backend.count('turnkit_conversations', 'id = ?', ['mcp_manifest'])).toBe(1);
      expect(report.deleted).toMatchObject({
        conversations: 2,
        messages: 8,
        turns: 2,
        toolExecutions: 1,
        waits: 1,
      });
      expect(report.keptConversations).toBe(2);
      expect(report.largestBatch).toBeLessThanOrEqual(3);
    });

    it('scale: keep-latest keeps the newest conversations and removes the older finished ones', async () => {
      const made = [];
      for (let i = 0; i < 5; i++) {
        made.push(await fullConversation('completed'));
        // Newest by creation time: no two conversations share a millisecond.
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const report = await pruneStore(store, { streamPartsGraceMs: null, conversationsKeepLatest: 2 });
      const left: number[] = [];
      for (const c of made)
        left.push(await backend.count('turnkit_conversations', 'id = ?', [c.conversation]));
      expect(left).toEqual([0, 0, 0, 1, 1]);
      expect(report.deleted.conversations).toBe(6);
    });

    it('scale: events leave at their age once their turn ended; a running turn keeps its log', async () => {
      const conversation = await store.createConversation({ agentName: 'agent' });
      const done = await store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        status: 'completed',
      });
      const busy = await store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        status: 'running',
      });
      for (let i = 0; i < 5; i++) {
        await store.appendEvent({ turnId: done.id, conversationId: conversation.id, type: 'step' });
        await store.appendEvent({ turnId: busy.id, conversationId: conversation.id, type: 'step' });
      }
      const report = await pruneStore(store, { eventsMaxAgeMs: HOUR, batchSize: 2 }, { now: AHEAD() });
      expect(await store.listEvents(done.id)).toEqual([]);
      expect((await store.listEvents(busy.id)).map((event) => event.sequence)).toEqual([1, 2, 3, 4, 5]);
      expect(report.deleted.events).toBe(5);
      expect(report.largestBatch).toBeLessThanOrEqual(2);
      // Within the age nothing goes.
      const fresh = await store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        status: 'completed',
      });
      await store.appendEvent({ turnId: fresh.id, conversationId: conversation.id, type: 'step' });
      await pruneStore(store, { eventsMaxAgeMs: HOUR });
      expect(await store.listEvents(fresh.id)).toHaveLength(1);
    });

    it('scale: with vacuum, a prune on PostgreSQL vacuums the tables it deleted from and no other; SQLite reuses its pages without', async () => {
      await run(3, new Date().toISOString());
      const live = await run(2);
      const report = await pruneStore(store, { streamPartsGraceMs: HOUR, vacuum: true }, { now: AHEAD() });
      expect(report.deleted.streamParts).toBe(4);
      expect(await store.listStreamParts(live.id)).toHaveLength(2);
      if (name === 'sqlite') return void expect(report.vacuumed).toEqual([]);
      expect(report.vacuumed).toEqual(['turnkit_stream_parts']);
      const vacuumed = (table: string) =>
        backend.count(
          'pg_stat_user_tables',
          'schemaname = current_schema() AND relname = ? AND last_vacuum IS NOT NULL',
          [table],
        );
      expect(await vacuumed('turnkit_stream_parts')).toBe(1);
      expect(await vacuumed('turnkit_events')).toBe(0);
      const dry = await pruneStore(store, { vacuum: true }, { now: AHEAD(), dryRun: true });
      expect(dry.vacuumed).toEqual([]);
      await expect(pruneStore(store, { vacuum: 'yes' as never })).rejects.toBeInstanceOf(ArgumentError);
    });

    it('scale: a bad policy is an ArgumentError and prunes nothing', async () => {
      const turn = await run(3, new Date().toISOString());
      await expect(pruneStore(store, { batchSize: 0 }, { now: AHEAD() })).rejects.toBeInstanceOf(
        ArgumentError,
      );
      await expect(pruneStore(store, { eventsMaxAgeMs: -1 })).rejects.toBeInstanceOf(ArgumentError);
      expect(await store.listStreamParts(turn.id)).toHaveLength(4);
    });
  });
}

describeRetention('sqlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'turnkit-retention-'));
  const store = await SqliteStore.open(join(dir, 'store.sqlite'));
  const Database = (await import('better-sqlite3')).default;
  const db = new Database(join(dir, 'store.sqlite'), { readonly: true });
  return {
    store,
    async count(table, where = '1 = 1', params = []) {
      return Number(
        (db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`).get(...params) as { n: number }).n,
      );
    },
    async close() {
      db.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describePostgres('retention on PostgreSQL', () => {
  describeRetention('postgres', async () => {
    const opened = await openPgTestStore();
    const pg = (await import('pg')).default;
    const { pgTestUrl } = await import('../helpers/postgres.js');
    const client = new pg.Client({ connectionString: pgTestUrl() });
    await client.connect();
    await client.query(`SET search_path TO "${opened.schema}"`);
    return {
      store: opened.store,
      async count(table, where = '1 = 1', params = []) {
        let i = 0;
        const sql = `SELECT COUNT(*) AS n FROM ${table} WHERE ${where.replace(/\?/g, () => `$${++i}`)}`;
        return Number((await client.query(sql, params)).rows[0].n);
      },
      async close() {
        await client.end();
        await opened.drop();
      },
    };
  });
});

describe('scale: retention needs a SQL store', () => {
  it('scale: pruning a store that is not SQLite or PostgreSQL is a ConfigError', async () => {
    const custom = { backend: 'custom' } as unknown as Store;
    await expect(pruneStore(custom)).rejects.toBeInstanceOf(ConfigError);
  });
});
