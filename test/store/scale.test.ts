/**
 * Per-step costs that do not grow with the store (issue 44), on real SQLite files and real
 * PostgreSQL: the statements the lane, the claim and the busy check send find a conversation's
 * open turns by the lane's partial index (asserted on their query plans, with the conversation
 * holding thousands of finished turns); a turn's messages come from their own index; a budget
 * check is one statement reading one row, whatever the tree holds; the ledger equals a count of
 * the rows after real runs; and a store written by the previous release upgrades with every row
 * readable and its counters right.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULT_LIMITS, defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { Budget } from '../../src/engine/step/budget.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { MIGRATIONS_TABLE } from '../../src/store/sql/migrate.js';
import { MIGRATIONS } from '../../src/store/sql/schema.js';
import { planStable, SqliteStore } from '../../src/store/sqlite-store.js';
import { consoleReadsOf } from '../../src/store/console-reads.js';
import { claimInLane } from '../../src/store/tree.js';
import { answeringTurn, appendPostMessage, recordPost } from '../../src/engine/lane/post-record.js';
import type { BudgetUsage, Store, TurnRecord } from '../../src/store/types.js';
import { LANE_TURN_STATUSES } from '../../src/store/types.js';
import { installStatementCounter, startCounting, stopCounting } from '../../bench/statement-counter.js';
import type { Statement } from '../../bench/statement-counter.js';
import { startDriverKit } from '../helpers/driver-kit.js';
import { describePostgres, dropPgTestSchema, pgTestSchema, pgTestUrl } from '../helpers/postgres.js';

installStatementCounter();

const FINISHED_TURNS = 5_000;
const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/stores/${name}`, import.meta.url));

/** A store and a second connection of the test's own to the same database. */
interface Harness {
  store: Store;
  /** The plan the database chooses for a statement the store sent, as one line. */
  explain(sql: string, params: readonly unknown[]): Promise<string>;
  /** PostgreSQL: the generic plan of a prepared statement, as it serves from its sixth call on. */
  explainGeneric(sql: string, params: readonly unknown[]): Promise<string>;
  /** `count` finished turns (each its own tree) in one conversation, in one bulk statement. */
  seedFinishedTurns(conversationId: string, count: number): Promise<void>;
  /** `count` messages in a conversation that has none yet, in one bulk statement. */
  seedMessages(conversationId: string, count: number): Promise<void>;
  /** `count` executions of `turnId`: a tenth cancelled, a tenth budget-denied, the rest done. */
  seedExecutions(turnId: string, count: number): Promise<void>;
  /** Planner statistics, as autovacuum (PostgreSQL) or PRAGMA optimize (SQLite) keep them. */
  analyze(): Promise<void>;
  /** Runs a statement written in the SQL both engines speak. */
  run(sql: string): Promise<void>;
  close(): Promise<void>;
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'turnkit-scale-'));
  dirs.push(dir);
  return dir;
};

const EXECUTION_STATUS_SQL = (n: string) =>
  `CASE WHEN ${n} % 10 = 0 THEN 'cancelled' WHEN ${n} % 10 = 5 THEN 'failed' ELSE 'completed' END`;

async function sqliteHarness(path = join(tempDir(), 'scale.sqlite')): Promise<Harness> {
  const store = await SqliteStore.open(path);
  const db = new Database(path);
  const now = new Date().toISOString();
  // The statement as the store prepares it (`planStable`): its one plan, whatever the values.
  const explain = async (sql: string, params: readonly unknown[]) => {
    const rows = db.prepare(`EXPLAIN QUERY PLAN ${planStable(sql)}`).all(...params) as { detail: string }[];
    return rows.map((row) => row.detail).join(' | ');
  };
  return {
    store,
    explain,
    explainGeneric: explain,
    async seedFinishedTurns(conversationId, count) {
      db.prepare(
        `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${count})
        INSERT INTO turnkit_turns (id, conversation_id, agent_name, root_turn_id, status, options, cost,
            submitted_at, completed_at, created_at, updated_at)
          SELECT @prefix || n, @conversationId, 'agent', @prefix || n, 'completed', '{}', 0, @now, @now, @now, @now
          FROM g`,
      ).run({ prefix: `turn_seed_${conversationId}_`, conversationId, now });
    },
    async seedMessages(conversationId, count) {
      db.prepare(
        `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${count})
        INSERT INTO turnkit_messages (id, conversation_id, role, kind, sequence, content, metadata, created_at)
          SELECT @prefix || n, @conversationId, 'user', 'text', n, '[]', '{}', @now FROM g`,
      ).run({ prefix: `msg_seed_${conversationId}_`, conversationId, now });
    },
    async seedExecutions(turnId, count) {
      db.prepare(
        `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${count})
        INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, error,
            created_at, updated_at)
          SELECT @turnId || n, @turnId, 'call_' || n, CASE WHEN n % 2 = 0 THEN 'search' ELSE 'fetch' END, '{}',
            ${EXECUTION_STATUS_SQL('n')},
            CASE WHEN n % 10 = 5 THEN '{"message":"denied","details":{"budget_denied":true}}' END, @now, @now
          FROM g`,
      ).run({ turnId, now });
    },
    async analyze() {
      db.pragma('optimize=0x10002');
    },
    async run(sql) {
      db.exec(sql);
    },
    async close() {
      db.close();
      await store.close();
    },
  };
}

async function postgresHarness(schema = pgTestSchema()): Promise<Harness> {
  const store = await PostgresStore.open(pgTestUrl(), { schema });
  const client = new pg.Client({ connectionString: pgTestUrl(), options: `-c search_path=${schema}` });
  await client.connect();
  return {
    store,
    async explain(sql, params) {
      const { rows } = await client.query(`EXPLAIN ${sql}`, [...params]);
      return rows.map((row: Record<string, string>) => row['QUERY PLAN']!.trim()).join(' | ');
    },
    async explainGeneric(sql, params) {
      const literal = (value: unknown) =>
        typeof value === 'number' ? String(value) : `'${String(value).replace(/'/g, "''")}'`;
      await client.query('SET plan_cache_mode = force_generic_plan');
      await client.query(`PREPARE scale_generic AS ${sql}`);
      try {
        const { rows } = await client.query(
          `EXPLAIN EXECUTE scale_generic(${params.map(literal).join(', ')})`,
        );
        return rows.map((row: Record<string, string>) => row['QUERY PLAN']!.trim()).join(' | ');
      } finally {
        await client.query('DEALLOCATE scale_generic');
        await client.query('RESET plan_cache_mode');
      }
    },
    async seedFinishedTurns(conversationId, count) {
      await client.query(
        `INSERT INTO turnkit_turns (id, conversation_id, agent_name, root_turn_id, status, options, cost,
            submitted_at, completed_at, created_at, updated_at)
          SELECT $1 || n, $2, 'agent', $1 || n, 'completed', '{}', 0, now(), now(), now(), now()
          FROM generate_series(1, $3::integer) AS g(n)`,
        [`turn_seed_${conversationId}_`, conversationId, count],
      );
    },
    async seedMessages(conversationId, count) {
      await client.query(
        `INSERT INTO turnkit_messages (id, conversation_id, role, kind, sequence, content, metadata, created_at)
          SELECT $1 || n, $2, 'user', 'text', n, '[]', '{}', now() FROM generate_series(1, $3::integer) AS g(n)`,
        [`msg_seed_${conversationId}_`, conversationId, count],
      );
    },
    async seedExecutions(turnId, count) {
      await client.query(
        `INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, error,
            created_at, updated_at)
          SELECT $1 || n, $1, 'call_' || n, CASE WHEN n % 2 = 0 THEN 'search' ELSE 'fetch' END, '{}',
            ${EXECUTION_STATUS_SQL('n')},
            CASE WHEN n % 10 = 5 THEN '{"message":"denied","details":{"budget_denied":true}}'::jsonb END,
            now(), now()
          FROM generate_series(1, $2::integer) AS g(n)`,
        [turnId, count],
      );
    },
    async analyze() {
      await client.query('ANALYZE');
    },
    async run(sql) {
      await client.query(sql);
    },
    async close() {
      await client.end();
      await store.close();
      await dropPgTestSchema(schema);
    },
  };
}

/** The counters recomputed from every row of the tree. */
async function bruteForce(store: Store, rootTurnId: string): Promise<BudgetUsage> {
  const turns = await store.listTurns({ rootTurnId });
  const executions = await store.listToolExecutions({ turnIds: turns.map((turn) => turn.id) });
  const byName: Record<string, number> = {};
  for (const execution of executions) {
    if (execution.status === 'cancelled' || execution.error?.details?.['budget_denied'] === true) continue;
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
}

/** The statements `fn` sent. */
async function statementsOf(fn: () => Promise<unknown>): Promise<Statement[]> {
  startCounting();
  try {
    await fn();
  } catch (error) {
    stopCounting();
    throw error;
  }
  return stopCounting();
}

const A_SCAN_OF_TURNS = /SCAN turnkit_turns\b(?! USING)|Seq Scan on turnkit_turns\b/;

function defineScaleTests(backend: 'sqlite' | 'postgres', open: () => Promise<Harness>): void {
  it(`scale: the claim, the lane step, posts and the busy check find a conversation's open turns by the lane index among ${FINISHED_TURNS} finished ones (${backend})`, async () => {
    const h = await open();
    try {
      const conversation = await h.store.createConversation({ agentName: 'agent' });
      await h.seedFinishedTurns(conversation.id, FINISHED_TURNS);
      const submittedAt = new Date().toISOString();
      const head = await h.store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        submittedAt,
      });
      const next = await h.store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        submittedAt,
      });
      for (const statistics of ['none', 'analyzed']) {
        if (statistics === 'analyzed') await h.analyze();
        // Without statistics PostgreSQL plans a table it has never analyzed by size alone;
        // autovacuum analyzes it as it grows, so only the analyzed plans are asserted there.
        if (backend === 'postgres' && statistics === 'none') continue;
        const statements = await statementsOf(async () => {
          expect((await claimInLane(h.store, next.id, 'token_next')).claimed).toBe(false);
          expect(await h.store.busyConversation(conversation.id)).toBe(true);
          expect(await h.store.busyConversation(conversation.id, { includePending: false })).toBe(false);
          const lane = await h.store.listTurns({
            conversationId: conversation.id,
            status: [...LANE_TURN_STATUSES],
          });
          expect(lane.map((turn) => turn.id)).toEqual([head.id, next.id]);
          expect(
            await h.store.listTurns({ conversationId: conversation.id, status: ['pending'] }),
          ).toHaveLength(2);
        });
        const laneReads = statements.filter((s) => /FROM turnkit_turns WHERE conversation_id = /.test(s.sql));
        expect(laneReads.length).toBeGreaterThanOrEqual(5);
        for (const statement of laneReads) {
          const plan = await h.explain(statement.sql, statement.params);
          expect(plan, `${statistics}: ${statement.sql}`).toContain('turnkit_turns_lane');
          expect(plan).not.toMatch(A_SCAN_OF_TURNS);
        }
      }
      expect((await claimInLane(h.store, head.id, 'token_head')).claimed).toBe(true);
    } finally {
      await h.close();
    }
  });

  it(`scale: the approvals inbox walks the awaiting calls by their index and probes each one's turn by its key, among ${FINISHED_TURNS} unfinished turns with statistics older than the calls (${backend})`, async () => {
    const h = await open();
    try {
      const conversation = await h.store.createConversation({ agentName: 'agent' });
      await h.seedFinishedTurns(conversation.id, FINISHED_TURNS);
      const prefix = `turn_seed_${conversation.id}_`;
      await h.run(
        `UPDATE turnkit_turns SET status = 'waiting', completed_at = NULL WHERE conversation_id = '${conversation.id}'`,
      );
      const call = (turn: number, n: number) =>
        h.run(
          `INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, created_at, updated_at)
            VALUES ('exec_gate_${n}', '${prefix}${turn}', 'call_gate_${n}', 'wire', '{}', 'awaiting_approval',
              '2026-01-01T00:00:${String(n).padStart(2, '0')}Z', '2026-01-01T00:00:${String(n).padStart(2, '0')}Z')`,
        );
      // Statistics taken while the calls waiting are on the lowest turn ids; then calls arrive
      // on the highest ids, as on new turns. PostgreSQL's plan for the EXISTS join then
      // merge-joined the calls with the turns' key, walking every turn below the highest one
      // (decision 76).
      for (let n = 0; n < 20; n += 1) await call(1_000 + n, n);
      await h.analyze();
      for (const [n, turn] of [999, 4_999, 998].entries()) await call(turn, 20 + n);
      await h.run(`UPDATE turnkit_turns SET status = 'completed' WHERE id = '${prefix}998'`);
      const reads = consoleReadsOf(h.store);
      const statements = await statementsOf(async () => {
        const calls = await reads.awaitingApprovals({ limit: 50 });
        expect(calls.map((c) => [c.execution.toolCallId, c.turn.id])).toEqual([
          ...Array.from({ length: 20 }, (_, n) => [`call_gate_${n}`, `${prefix}${1_000 + n}`]),
          ['call_gate_20', `${prefix}999`],
          ['call_gate_21', `${prefix}4999`],
        ]);
      });
      const [read] = statements.filter((s) => /FROM turnkit_tool_executions/.test(s.sql));
      const plan = await h.explain(read!.sql, read!.params);
      console.log('PLAN', plan);
      // (PostgreSQL reads a table of 23 executions whole; SQLite walks their index.)
      if (backend === 'sqlite') expect(plan).toContain('turnkit_tool_executions_status_created');
      expect(plan).not.toMatch(/Merge Join|Hash Join|SCAN turnkit_turns\b|Seq Scan on turnkit_turns\b/);
      expect(plan).toMatch(
        backend === 'postgres'
          ? /Index Cond: \(id = e\.turn_id\)/
          : /SEARCH t (EXISTS )?USING INDEX sqlite_autoindex_turnkit_turns_1 \(id=\?\)/,
      );
    } finally {
      await h.close();
    }
  });

  it(`scale: a queued post's answering turn is found by the context index among ${FINISHED_TURNS} finished turns, in PostgreSQL's generic plan too (${backend})`, async () => {
    const h = await open();
    try {
      const conversation = await h.store.createConversation({ agentName: 'agent' });
      await h.seedFinishedTurns(conversation.id, FINISHED_TURNS);
      await h.store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        status: 'running',
        submittedAt: new Date().toISOString(),
      });
      const request = {
        requestId: 'queued',
        text: 'one more thing',
        principal: null,
        policy: 'queue' as const,
        media: [],
        signature: null,
      };
      const message = await h.store.atomic(conversation.id, async () => {
        const posted = await appendPostMessage(h.store, conversation.id, request);
        await recordPost(h.store, conversation.id, { request, disposition: 'queued', message: posted });
        return posted;
      });
      await h.analyze();
      const statements = await statementsOf(async () => {
        expect(await answeringTurn(h.store, conversation.id, message.sequence)).toBeNull();
      });
      const [read] = statements.filter((s) => /FROM turnkit_turns/.test(s.sql));
      for (const plan of [
        await h.explain(read!.sql, read!.params),
        await h.explainGeneric(read!.sql, read!.params),
      ]) {
        expect(plan).toContain('turnkit_turns_conversation_context');
        expect(plan).not.toMatch(A_SCAN_OF_TURNS);
      }
      // The lane's next turn sees the post; the one after it too, and the first is the answer.
      const answer = await h.store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        contextMessageSequence: message.sequence,
        submittedAt: new Date().toISOString(),
      });
      await h.store.createTurn({
        conversationId: conversation.id,
        agentName: 'agent',
        contextMessageSequence: message.sequence + 1,
        submittedAt: new Date().toISOString(),
      });
      expect((await answeringTurn(h.store, conversation.id, message.sequence))?.id).toBe(answer.id);
    } finally {
      await h.close();
    }
  });

  it(`scale: a turn's executions of one tool (the skills a model step offers) and a console page of them are read by an index among ${FINISHED_TURNS} of its executions (${backend})`, async () => {
    const h = await open();
    try {
      const conversation = await h.store.createConversation({ agentName: 'agent' });
      const turn = await h.store.createTurn({ conversationId: conversation.id, agentName: 'agent' });
      await h.seedExecutions(turn.id, FINISHED_TURNS);
      for (const statistics of ['none', 'analyzed']) {
        if (statistics === 'analyzed') await h.analyze();
        // PostgreSQL plans a table it never analyzed by size alone (see the lane test above).
        if (backend === 'postgres' && statistics === 'none') continue;
        const statements = await statementsOf(async () => {
          expect(await h.store.listToolExecutions({ turnId: turn.id, toolName: 'load_skill' })).toEqual([]);
          expect(await h.store.listToolExecutions({ turnId: turn.id, toolName: 'search' })).toHaveLength(
            FINISHED_TURNS / 2,
          );
        });
        const [read] = statements.filter((s) => /FROM turnkit_tool_executions/.test(s.sql));
        expect(await h.explain(read!.sql, read!.params), statistics).toContain(
          'turnkit_tool_executions_turn_tool',
        );
        // The console's page of a turn's executions walks them in order, not all of them sorted.
        const page = await statementsOf(async () => {
          expect(await consoleReadsOf(h.store).toolExecutions(turn.id, { limit: 50 })).toHaveLength(50);
        });
        const pagePlan = await h.explain(page[0]!.sql, page[0]!.params);
        expect(pagePlan, statistics).toContain('turnkit_tool_executions_turn_created');
        expect(pagePlan, statistics).not.toMatch(/TEMP B-TREE|Sort/);
      }
    } finally {
      await h.close();
    }
  });

  it(`scale: finding 13, a turn's messages are read by the (conversation_id, turn_id, sequence) index (${backend})`, async () => {
    const h = await open();
    try {
      const conversation = await h.store.createConversation({ agentName: 'agent' });
      const turn = await h.store.createTurn({ conversationId: conversation.id, agentName: 'agent' });
      await h.seedMessages(conversation.id, FINISHED_TURNS);
      const own = await h.store.appendMessage({
        conversationId: conversation.id,
        turnId: turn.id,
        role: 'assistant',
        content: 'mine',
      });
      // SQLite: without statistics (the case finding 13 is about); PostgreSQL: as autovacuum leaves it.
      if (backend === 'postgres') await h.analyze();
      const statements = await statementsOf(async () => {
        const messages = await h.store.listMessages(conversation.id, { turnId: turn.id });
        expect(messages.map((m) => m.id)).toEqual([own.id]);
      });
      const [read] = statements.filter((s) => /FROM turnkit_messages/.test(s.sql));
      expect(await h.explain(read!.sql, read!.params)).toContain('turnkit_messages_conversation_turn');
    } finally {
      await h.close();
    }
  });

  it(`scale: CORE-27 a budget check is one statement reading one row, at 10 executions as at 5,000 (${backend})`, async () => {
    const h = await open();
    try {
      const conversation = await h.store.createConversation({ agentName: 'agent' });
      const trees: TurnRecord[] = [];
      for (const executions of [10, 5_000]) {
        const root = await h.store.createTurn({ conversationId: conversation.id, agentName: 'agent' });
        await h.seedExecutions(root.id, executions);
        trees.push(await h.store.loadTurn(root.id));
      }
      for (const root of trees) {
        let budget: Budget | undefined;
        const statements = await statementsOf(async () => {
          budget = await Budget.load(h.store, root.id, DEFAULT_LIMITS, { root });
        });
        expect(statements.map((s) => s.sql)).toEqual([
          expect.stringMatching(/FROM turnkit_budget_ledger WHERE root_turn_id = /),
        ]);
        const expected = await bruteForce(h.store, root.id);
        expect(budget!.toolExecutions).toBe(expected.toolExecutions);
        expect(Object.fromEntries(budget!.toolExecutionsByName)).toEqual(expected.toolExecutionsByName);
        expect(await h.store.budgetUsage(root.id)).toEqual(expected);
      }
      expect((await h.store.budgetUsage(trees[1]!.id)).toolExecutions).toBe(4_000);
    } finally {
      await h.close();
    }
  });

  it(`scale: CORE-27 BG-06 the ledger equals a count of the rows after runs with tools, sub-agents and failures (${backend})`, async () => {
    const h = await open();
    const work = defineTool({
      name: 'work',
      description: 'Works.',
      input: z.object({}),
      execute: () => ({ ok: true }),
    });
    const broken = defineTool({
      name: 'broken',
      description: 'Fails.',
      input: z.object({}),
      execute: () => {
        throw new Error('broken on purpose');
      },
    });
    const answered = (request: { messages: readonly { role: string }[] }) =>
      request.messages.some((m) => m.role === 'tool');
    const model = new ScriptedModel({
      child: (request) =>
        answered(request)
          ? 'child done'
          : {
              toolCalls: [
                { name: 'work', arguments: {} },
                { name: 'broken', arguments: {} },
              ],
            },
      parent: (request) =>
        answered(request)
          ? 'parent done'
          : {
              toolCalls: [
                { name: 'child', arguments: { task: 'one' } },
                { name: 'child', arguments: { task: 'two' } },
                { name: 'missing_tool', arguments: {} },
              ],
            },
    });
    const child = defineAgent({ name: 'child', tools: [work, broken] });
    const kit = await startDriverKit({
      agents: [child, defineAgent({ name: 'parent', subAgents: [child], limits: { maxToolExecutions: 5 } })],
      model,
      store: h.store,
    });
    try {
      for (let i = 0; i < 2; i++) {
        const run = await kit.client.run('parent', 'Fan out');
        await run.result();
        const tree = await h.store.listTurns({ rootTurnId: run.turnId });
        expect(tree.length).toBe(3);
        const executions = await h.store.listToolExecutions({ turnIds: tree.map((t) => t.id) });
        // The run met every kind of row the counting rules tell apart.
        expect(executions.some((e) => e.error?.details?.['budget_denied'] === true)).toBe(true);
        expect(
          executions.some((e) => e.status === 'failed' && e.error?.details?.['budget_denied'] !== true),
        ).toBe(true);
        expect(await h.store.budgetUsage(run.turnId)).toEqual(await bruteForce(h.store, run.turnId));
        expect((await h.store.budgetUsage(run.turnId)).iterations).toBeGreaterThan(2);
      }
    } finally {
      await kit.stop();
      await h.close();
    }
  });
}

/** What the 0.2.0 fixture holds (test/fixtures/stores/write-release-store.ts). */
async function expectReleaseRowsUpgraded(store: Store): Promise<void> {
  const main = await store.loadConversation('conv_main');
  expect(main).toMatchObject({ agentName: 'support', forkedFromConversationId: null });
  await store.loadConversation('conv_side');
  const root = await store.loadTurn('turn_root');
  expect(root).toMatchObject({ status: 'completed', cost: 0.25, outputText: 'done' });
  expect(root.usage?.total_tokens).toBe(120);
  expect(await store.loadTurn('turn_child')).toMatchObject({ rootTurnId: 'turn_root', cost: 0.125 });
  expect((await store.loadTurn('turn_queued')).options).toEqual({ iterations: 4 });
  const executions = await store.listToolExecutions({ turnIds: ['turn_root', 'turn_child'] });
  expect(executions).toHaveLength(8);
  for (const execution of executions) expect(await store.loadToolExecution(execution.id)).toEqual(execution);
  const messages = await store.listMessages('conv_main');
  expect(messages.map((m) => m.sequence)).toEqual(messages.map((_, i) => i + 1));
  expect(messages).toHaveLength(10);
  expect(await store.listMessages('conv_main', { turnId: 'turn_root' })).toHaveLength(9);
  expect(await store.listMessages('conv_side')).toHaveLength(1);
  expect(await store.listEvents('turn_root')).toHaveLength(1);
  expect(await store.listStreamParts('turn_root')).toHaveLength(1);
  expect(await store.listWaits({ turnId: 'turn_root' })).toHaveLength(1);
  const [delivery] = await store.listDeliveries({ destinationConversationId: 'conv_main' });
  expect(delivery?.deliveredAt).not.toBeNull();
  expect(await store.nextDeliveryTrigger('conv_main')).toMatchObject({ id: delivery!.messageId });

  expect(await store.budgetUsage('turn_root')).toEqual({
    iterations: 5,
    cost: 0.375,
    toolExecutions: 6,
    toolExecutionsByName: { search: 3, lookup: 1, 'we"ird.name': 1, research: 1 },
  });
  expect(await store.budgetUsage('turn_root')).toEqual(await bruteForce(store, 'turn_root'));
  expect(await store.budgetUsage('turn_queued')).toEqual({
    iterations: 4,
    cost: 0.5,
    toolExecutions: 0,
    toolExecutionsByName: {},
  });
  // The upgraded store goes on counting.
  await store.createToolExecution({ turnId: 'turn_child', toolCallId: 'call_c2', toolName: 'we"ird.name' });
  expect((await store.budgetUsage('turn_root')).toolExecutionsByName['we"ird.name']).toBe(2);
  expect(await store.busyConversation('conv_main')).toBe(true);
}

describe('scale on SQLite', () => {
  defineScaleTests('sqlite', () => sqliteHarness());

  it('scale: an upgrade of a store file written by release 0.2.0 keeps every row readable and counts its budgets', async () => {
    const path = join(tempDir(), 'release.sqlite');
    copyFileSync(fixture('turnkit-0.2.0.sqlite'), path);
    const store = await SqliteStore.open(path);
    try {
      expect(store.migrations.applied).toEqual(MIGRATIONS.filter((m) => m.version > 4).map((m) => m.version));
      await expectReleaseRowsUpgraded(store);
    } finally {
      await store.close();
    }
  });

  it('scale: a store at each earlier schema version (1 to 4) upgrades to the latest and counts its budgets', async () => {
    const types = {
      text: 'TEXT',
      int: 'INTEGER',
      bigint: 'INTEGER',
      json: 'TEXT',
      time: 'TEXT',
      cost: 'REAL',
      serial: 'INTEGER PRIMARY KEY AUTOINCREMENT',
    };
    const now = new Date().toISOString();
    for (const from of [1, 2, 3, 4]) {
      const path = join(tempDir(), `schema-${from}.sqlite`);
      const db = new Database(path);
      db.exec(
        `CREATE TABLE ${MIGRATIONS_TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`,
      );
      for (const migration of MIGRATIONS.filter((m) => m.version <= from)) {
        for (const statement of migration.statements(types, 'sqlite')) db.exec(statement);
        db.prepare(`INSERT INTO ${MIGRATIONS_TABLE} VALUES (?, ?, ?)`).run(
          migration.version,
          migration.name,
          now,
        );
      }
      db.prepare(
        `INSERT INTO turnkit_conversations (id, agent_name, metadata, created_at, updated_at) VALUES ('conv_old', 'a', '{}', ?, ?)`,
      ).run(now, now);
      db.prepare(
        `INSERT INTO turnkit_turns (id, conversation_id, agent_name, root_turn_id, status, options, cost, created_at, updated_at)
          VALUES ('turn_old', 'conv_old', 'a', 'turn_old', 'completed', '{"state":{"iterations":2}}', 0.5, ?, ?)`,
      ).run(now, now);
      for (const [id, status] of [
        ['e1', 'completed'],
        ['e2', 'completed'],
        ['e3', 'cancelled'],
      ])
        db.prepare(
          `INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, created_at, updated_at)
            VALUES (?, 'turn_old', ?, 'search', '{}', ?, ?, ?)`,
        ).run(id, id, status, now, now);
      db.close();
      const store = await SqliteStore.open(path);
      try {
        expect(store.migrations.applied).toEqual(
          MIGRATIONS.filter((m) => m.version > from).map((m) => m.version),
        );
        expect(await store.loadTurn('turn_old')).toMatchObject({ status: 'completed', cost: 0.5 });
        expect(await store.budgetUsage('turn_old')).toEqual({
          iterations: 2,
          cost: 0.5,
          toolExecutions: 2,
          toolExecutionsByName: { search: 2 },
        });
      } finally {
        await store.close();
      }
    }
  });
});

describePostgres('scale on PostgreSQL', () => {
  defineScaleTests('postgres', () => postgresHarness());

  it('scale: an upgrade of a database dumped from release 0.2.0 keeps every row readable and counts its budgets', async () => {
    const schema = pgTestSchema();
    const dump = readFileSync(fixture('turnkit-0.2.0.pg.sql'), 'utf8').replaceAll(
      'turnkit_release_fixture',
      schema,
    );
    const client = new pg.Client({ connectionString: pgTestUrl() });
    await client.connect();
    try {
      await client.query(dump);
    } finally {
      await client.end();
    }
    const store = await PostgresStore.open(pgTestUrl(), { schema });
    try {
      expect(store.migrations.applied).toEqual(MIGRATIONS.filter((m) => m.version > 4).map((m) => m.version));
      await expectReleaseRowsUpgraded(store);
    } finally {
      await store.close();
      await dropPgTestSchema(schema);
    }
  });
});
