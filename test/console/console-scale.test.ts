/**
 * Issue 44 item 1 (audit #1, #3, #22): the web console's lists are pages the store answers,
 * on SQLite and on PostgreSQL, through the console's real HTTP handler. Rows are seeded with
 * bulk SQL; the console is read with fetch. Keyset cursors page across concurrent inserts
 * with no duplicate and no gap; a conversation's aggregates equal a brute-force count over all
 * its turns; the approvals page answers 200 with the right cards among 40,000 unfinished turns.
 */
import type { Server } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { createConsoleHandler } from '../../src/console.js';
import type { ConsoleApproval, ConsoleConversationSummary, ConsoleTurnSummary } from '../../src/console.js';
import { ConfigError } from '../../src/errors.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import type { Store } from '../../src/store/types.js';
import { describePostgres, openPgTestStore, pgTestUrl } from '../helpers/postgres.js';
import { connectClient } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

/** The few SQL expressions the seeding needs, per dialect. */
interface Bulk {
  /** Runs seeding SQL. */
  exec(sql: string): Promise<void>;
  /** A FROM item of integers `i` from 1 to n. */
  series(n: number): string;
  /** 2026-01-01 plus `seconds` (an SQL expression) as a time column value. */
  time(seconds: string): string;
  /** A JSON object column value from key/expression pairs (expressions already SQL). */
  object(pairs: Record<string, string>): string;
  /** SQLite's query plan of a statement (SQLite only). */
  plan?(sql: string): string;
  close(): Promise<void>;
}

interface Backend {
  store: Store;
  bulk: Bulk;
  close(): Promise<void>;
}

async function openSqlite(): Promise<Backend> {
  const path = tempSqliteUrl('console-scale');
  const store = await SqliteStore.open(path);
  const db = new Database(path);
  db.pragma('busy_timeout = 10000');
  const bulk: Bulk = {
    exec: async (sql) => void db.exec(sql),
    series: (n) =>
      `(WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${n}) SELECT i FROM s) AS s`,
    time: (seconds) => `strftime('%Y-%m-%dT%H:%M:%fZ', '2026-01-01', '+' || (${seconds}) || ' seconds')`,
    object: (pairs) => `json_object(${Object.entries(pairs).flatMap(([k, v]) => [`'${k}'`, v])})`,
    plan: (sql) =>
      (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[])
        .map((row) => row.detail)
        .join(' | '),
    close: async () => void db.close(),
  };
  return { store, bulk, close: async () => (await store.close(), await bulk.close()) };
}

async function openPostgres(): Promise<Backend> {
  const { store, schema, drop } = await openPgTestStore();
  const client = new pg.Client({ connectionString: pgTestUrl() });
  await client.connect();
  await client.query(`SET search_path TO "${schema}"`);
  const bulk: Bulk = {
    exec: async (sql) => void (await client.query(sql)),
    series: (n) => `generate_series(1, ${n}) AS s(i)`,
    time: (seconds) => `('2026-01-01T00:00:00Z'::timestamptz + (${seconds}) * interval '1 second')`,
    object: (pairs) => `jsonb_build_object(${Object.entries(pairs).flatMap(([k, v]) => [`'${k}'`, v])})`,
    close: async () => void (await client.end()),
  };
  return { store, bulk, close: async () => (await bulk.close(), await drop()) };
}

/** Conversations `c_<n>` and `turns` turns spread over them, one second apart in threes (ties on time). */
async function seed(
  bulk: Bulk,
  options: { conversations: number; turns: number; status?: string; conversationOf?: string; agent?: string },
) {
  const { conversations, turns } = options;
  await bulk.exec(
    `INSERT INTO turnkit_conversations (id, agent_name, metadata, created_at, updated_at)
      SELECT 'conv_' || (100000 + i), 'scale_agent', ${bulk.object({})}, ${bulk.time('i')}, ${bulk.time('i')}
      FROM ${bulk.series(conversations)}`,
  );
  const conversation = options.conversationOf ?? `'conv_' || (100000 + 1 + (i * i) % ${conversations})`;
  await bulk.exec(
    `INSERT INTO turnkit_turns (id, conversation_id, agent_name, root_turn_id, status, options, usage, cost, created_at, updated_at)
      SELECT 'turn_' || (1000000 + i), ${conversation}, ${options.agent ?? "CASE WHEN i % 4 = 0 THEN 'other_agent' ELSE 'scale_agent' END"},
        'turn_' || (1000000 + i), ${options.status ? `'${options.status}'` : "CASE WHEN i % 5 = 0 THEN 'failed' ELSE 'completed' END"},
        ${bulk.object({ principal: bulk.object({ id: "CASE WHEN i % 3 = 0 THEN 'joanna' ELSE 'ann' END", tenant: "'t' || (i % 2)" }) })},
        ${bulk.object({ total_tokens: 'i' })}, i * 0.001, ${bulk.time('i / 3')}, ${bulk.time('i / 3')}
      FROM ${bulk.series(turns)}`,
  );
}

async function serve(store: Store): Promise<{ url: string; close(): Promise<void> }> {
  const client = new TurnKitClient({ store, agents: new AgentRegistry(), temporal: await connectClient() });
  const handler = createConsoleHandler({ client });
  const server: Server = createServer((request, response) => void handler(request, response));
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/api/`,
    close: () => new Promise((closed) => server.close(() => closed())),
  };
}

async function get<T>(url: string): Promise<T> {
  const response = await fetch(url);
  const body = (await response.json()) as T & { error?: string };
  if (response.status !== 200) throw new Error(`GET ${url}: ${response.status} ${body.error}`);
  return body;
}

/** Every page of a list, from the first on; `between` runs after each page (concurrent writes). */
async function allPages<T>(
  url: (cursor: string | null) => string,
  rows: (page: never) => T[],
  between: () => Promise<void> = async () => undefined,
): Promise<T[]> {
  const seen: T[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 1_000; pages += 1) {
    const page: { nextCursor: string | null } = await get<{ nextCursor: string | null }>(url(cursor));
    seen.push(...rows(page as never));
    await between();
    cursor = page.nextCursor;
    if (cursor === null) return seen;
  }
  throw new Error('the pages never ended');
}

function defineScaleTests(name: string, open: () => Promise<Backend>) {
  describe(`scale: web console reads on ${name}`, () => {
    let backend: Backend;
    let served: { url: string; close(): Promise<void> };
    beforeAll(async () => {
      backend = await open();
      served = await serve(backend.store);
    });
    afterAll(async () => {
      await served?.close();
      await backend?.close();
    });

    it('scale: turn cursors page across concurrent inserts with no duplicate and no gap, both orders, filters in the store', async () => {
      await seed(backend.bulk, { conversations: 20, turns: 600 });
      const before = await backend.store.listTurns({ agentName: 'scale_agent' });
      const racing: Promise<unknown>[] = [];
      const insert = async () => {
        // Writes between two page reads, and one racing the next read.
        for (let n = 0; n < 2; n += 1)
          await backend.store.createTurn({ conversationId: 'conv_100001', agentName: 'scale_agent' });
        racing.push(backend.store.createTurn({ conversationId: 'conv_100002', agentName: 'scale_agent' }));
      };
      for (const order of ['desc', 'asc']) {
        const pages = await allPages<ConsoleTurnSummary>(
          (cursor) =>
            `${served.url}turns?agent=scale_agent&order=${order}&limit=37${cursor ? `&cursor=${cursor}` : ''}`,
          (page: { turns: ConsoleTurnSummary[] }) => page.turns,
          insert,
        );
        const ids = pages.map((t) => t.id);
        expect(new Set(ids).size, `${order}: no duplicate`).toBe(ids.length);
        const seen = new Set(ids);
        expect(
          before.filter((t) => !seen.has(t.id)).map((t) => t.id),
          `${order}: no gap`,
        ).toEqual([]);
        expect(pages.every((t) => t.agentName === 'scale_agent')).toBe(true);
        const keys = pages.map((t) => `${t.createdAt} ${t.id}`);
        const sorted = [...keys].sort();
        expect(keys).toEqual(order === 'asc' ? sorted : sorted.reverse());
      }
      await Promise.all(racing);
      expect((await backend.store.listTurns({ agentName: 'scale_agent' })).length).toBeGreaterThan(
        before.length,
      );

      // The principal filter is exact on the principal or one of its fields: `ann` is not `joanna`.
      const anns = await allPages<ConsoleTurnSummary>(
        (cursor) => `${served.url}turns?principal=ann&limit=200${cursor ? `&cursor=${cursor}` : ''}`,
        (page: { turns: ConsoleTurnSummary[] }) => page.turns,
      );
      const bulkAnns = anns.filter((t) => /^turn_1\d{6}$/.test(t.id));
      expect(bulkAnns.length).toBe(400);
      expect(bulkAnns.every((t) => (t.principal as { id: string }).id === 'ann')).toBe(true);
      // A time window and roots, in SQL too.
      const window = await get<{ turns: ConsoleTurnSummary[] }>(
        `${served.url}turns?since=2026-01-01T00:00:10Z&until=2026-01-01T00:00:20Z&roots=true&limit=500`,
      );
      expect(window.turns.map((t) => t.id).sort()).toEqual(
        Array.from({ length: 30 }, (_, n) => `turn_${1000000 + 30 + n}`),
      );
      // A cursor this console never gave is a 400 with the fix.
      const bad = await fetch(`${served.url}turns?cursor=nonsense`);
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: string }).error).toMatch(/nextCursor/);
    });

    it('scale: conversation counts, tokens and cost equal a brute-force count over all their turns, paged by cursor', async () => {
      // One conversation of 300 turns (more than any page), the rest spread out.
      await backend.bulk.exec(
        `INSERT INTO turnkit_conversations (id, agent_name, metadata, created_at, updated_at)
          VALUES ('conv_big', 'big_agent', ${backend.bulk.object({})}, ${backend.bulk.time('100000')}, ${backend.bulk.time('100000')})`,
      );
      await backend.bulk.exec(
        `INSERT INTO turnkit_turns (id, conversation_id, agent_name, root_turn_id, status, options, usage, cost, created_at, updated_at)
          SELECT 'turn_big_' || (1000 + i), 'conv_big', 'big_agent', 'turn_big_' || (1000 + i), 'completed',
            ${backend.bulk.object({})}, ${backend.bulk.object({ total_tokens: '2 * i' })}, 0.5, ${backend.bulk.time('200000 + i')}, ${backend.bulk.time('200000 + i')}
          FROM ${backend.bulk.series(300)}`,
      );
      const listed = await allPages<ConsoleConversationSummary>(
        (cursor) => `${served.url}conversations?limit=7${cursor ? `&cursor=${cursor}` : ''}`,
        (page: { conversations: ConsoleConversationSummary[] }) => page.conversations,
      );
      const ids = listed.map((c) => c.id);
      expect(new Set(ids).size).toBe(ids.length);
      const all = await backend.store.listTurns({});
      const byConversation = new Map<string, typeof all>();
      for (const turn of all)
        byConversation.set(turn.conversationId, [...(byConversation.get(turn.conversationId) ?? []), turn]);
      expect(new Set(ids)).toEqual(new Set(byConversation.keys()));
      for (const row of listed) {
        const turns = byConversation.get(row.id)!;
        const newest = [...turns].sort((a, b) =>
          `${b.createdAt} ${b.id}`.localeCompare(`${a.createdAt} ${a.id}`),
        )[0]!;
        expect(row.turns, row.id).toBe(turns.length);
        expect(row.tokens, row.id).toBe(turns.reduce((sum, t) => sum + (t.usage?.total_tokens ?? 0), 0));
        expect(row.cost, row.id).toBeCloseTo(
          turns.reduce((sum, t) => sum + t.cost, 0),
          6,
        );
        expect(row.lastTurnId, row.id).toBe(newest.id);
        expect(row.lastStatus, row.id).toBe(newest.status);
      }
      const big = listed.find((c) => c.id === 'conv_big')!;
      expect(big.turns).toBe(300);
      expect(big.tokens).toBe(300 * 301);
    });

    it('scale: approvals among 40,000 unfinished turns answer 200 with exactly the calls awaiting a decision, oldest first', async () => {
      await backend.bulk.exec(
        `INSERT INTO turnkit_conversations (id, agent_name, metadata, created_at, updated_at)
          VALUES ('conv_open', 'open_agent', ${backend.bulk.object({})}, ${backend.bulk.time('0')}, ${backend.bulk.time('0')})`,
      );
      await backend.bulk.exec(
        `INSERT INTO turnkit_turns (id, conversation_id, agent_name, root_turn_id, status, options, cost, created_at, updated_at)
          SELECT 'turn_open_' || (1000000 + i), 'conv_open', 'open_agent', 'turn_open_' || (1000000 + i),
            CASE WHEN i % 2 = 0 THEN 'pending' ELSE 'waiting' END, ${backend.bulk.object({})}, 0,
            ${backend.bulk.time('i')}, ${backend.bulk.time('i')}
          FROM ${backend.bulk.series(40_000)}`,
      );
      // Each open turn has finished calls; three await a decision; one awaiting call's turn has ended.
      await backend.bulk.exec(
        `INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, created_at, updated_at)
          SELECT 'exec_' || (1000000 + i), 'turn_open_' || (1000000 + i), 'call_' || i, 'lookup',
            ${backend.bulk.object({})}, 'completed', ${backend.bulk.time('i')}, ${backend.bulk.time('i')}
          FROM ${backend.bulk.series(40_000)}`,
      );
      const gated = [39_001, 17, 20_001];
      for (const [n, i] of gated.entries())
        await backend.bulk.exec(
          `INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, created_at, updated_at)
            VALUES ('exec_gate_${n}', 'turn_open_${1000000 + i}', 'call_gate_${n}', 'charge_card',
              ${backend.bulk.object({ amount: String(n + 1) })}, 'awaiting_approval', ${backend.bulk.time(String(50_000 + n))}, ${backend.bulk.time(String(50_000 + n))})`,
        );
      await backend.bulk.exec(
        `INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, created_at, updated_at)
          SELECT 'exec_done_' || (1000 + i), 'turn_' || (1000000 + i), 'call_done', 'charge_card',
            ${backend.bulk.object({})}, 'awaiting_approval', ${backend.bulk.time('i')}, ${backend.bulk.time('i')}
          FROM ${backend.bulk.series(5)}`,
      );
      const response = await fetch(`${served.url}approvals`);
      expect(response.status).toBe(200);
      const { approvals, nextCursor } = (await response.json()) as {
        approvals: ConsoleApproval[];
        nextCursor: string | null;
      };
      expect(approvals.map((a) => [a.turnId, a.toolCallId, a.toolName, a.agentName, a.arguments])).toEqual(
        gated.map((i, n) => [
          `turn_open_${1000000 + i}`,
          `call_gate_${n}`,
          'charge_card',
          'open_agent',
          { amount: n + 1 },
        ]),
      );
      expect(nextCursor).toBeNull();
      // Paged: one card a page, the same three in order.
      const paged = await allPages<ConsoleApproval>(
        (cursor) => `${served.url}approvals?limit=1${cursor ? `&cursor=${cursor}` : ''}`,
        (page: { approvals: ConsoleApproval[] }) => page.approvals,
      );
      expect(paged.map((a) => a.toolCallId)).toEqual(['call_gate_0', 'call_gate_1', 'call_gate_2']);
      // On SQLite, the plan: the executions by their status index, each turn by its key.
      const plan = backend.bulk.plan?.(
        `SELECT e.* FROM turnkit_tool_executions e WHERE e.status = 'awaiting_approval' AND (SELECT t.status
          FROM turnkit_turns t WHERE t.id = e.turn_id) IN ('running', 'waiting', 'paused', 'pending')
          ORDER BY e.created_at, e.id LIMIT 50`,
      );
      if (plan !== undefined) {
        expect(plan).toContain('USING INDEX turnkit_tool_executions_status_created');
        expect(plan).not.toMatch(/SCAN|TEMP B-TREE/);
      }
    });
  });
}

describe('scale: a store without paged console reads', () => {
  it('scale: the console refuses a store that has no consoleReads() with a ConfigError, and serves the memory store in SQL', async () => {
    const store = new MemoryStore();
    const temporal = await connectClient();
    try {
      // A store written outside TurnKit: every method of the contract, no paged console reads.
      const custom = new Proxy(store, {
        get: (target, key) => (key === 'consoleReads' ? undefined : Reflect.get(target, key, target)),
      });
      const customClient = new TurnKitClient({ store: custom, agents: new AgentRegistry(), temporal });
      expect(() => createConsoleHandler({ client: customClient })).toThrow(ConfigError);
      expect(() => createConsoleHandler({ client: customClient })).toThrow(/consoleReads\(\)/);
      // The memory store is the SQL store on SQLite in memory: its lists are answered in SQL.
      const served = await serve(store);
      try {
        const conversation = await store.createConversation({ agentName: 'memory_agent' });
        const turn = await store.createTurn({ conversationId: conversation.id, agentName: 'memory_agent' });
        const page = await get<{ turns: ConsoleTurnSummary[] }>(`${served.url}turns?limit=5`);
        expect(page.turns.map((t) => t.id)).toEqual([turn.id]);
      } finally {
        await served.close();
      }
    } finally {
      await store.close();
    }
  });
});

defineScaleTests('sqlite', openSqlite);
describePostgres('scale: web console on postgres', () => defineScaleTests('postgres', openPostgres));
