/**
 * Per-step costs against the size of the data (issue 44), on SQLite and on PostgreSQL, each a
 * ratio of large over small measured in one run, interleaved, so the shared machine's load
 * cancels out:
 *
 * - `scale_budget_ratio_*`: the budget check a model step and a tool call make (`Budget.load`
 *   on the root's row) on a tree of 50,000 tool executions over one of 10 (target ≤ 1.5);
 * - `scale_conversation_turn_ratio_*`: a real turn's p50 (`ask` to its stored result, on the
 *   dev server) in a conversation of 20,000 finished turns over a fresh conversation's (≤ 1.1).
 *
 * Rows are seeded with bulk SQL; the store's triggers keep the budget ledger as for any write.
 * PostgreSQL is vacuumed and analyzed after seeding, as autovacuum would be; SQLite is left
 * without fresh statistics (the store's plans must not need them). PostgreSQL: TURNKIT_BENCH_DATABASE_URL,
 * else TURNKIT_TEST_DATABASE_URL, in a schema dropped at the end; left out, with a warning,
 * when unreachable. SCALE_TURN_PAIRS (15) sets the number of measured turn pairs.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime as TemporalRuntime } from '@temporalio/worker';
import Database from 'better-sqlite3';
import pg from 'pg';
import { DEFAULT_LIMITS } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { Budget } from '../src/engine/step/budget.js';
import { PostgresStore } from '../src/store/postgres-store.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import type { Store } from '../src/store/types.js';
import { createWorker } from '../src/worker.js';
import { benchAgent, benchModel } from './bench-agent.js';
import { mergeBenchResults, percentile, timed } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const pairs = Number(process.env['SCALE_TURN_PAIRS'] ?? 15);
const BIG_TREE = 50_000;
const SMALL_TREE = 10;
const BIG_CONVERSATION = 20_000;
const BUDGET_CHECKS = 400;
const TARGETS = { budget: 1.5, conversationTurn: 1.1 };
const pgBase =
  process.env['TURNKIT_BENCH_DATABASE_URL'] ??
  process.env['TURNKIT_TEST_DATABASE_URL'] ??
  'postgres://postgres@127.0.0.1:5432/turnkit_test';

TemporalRuntime.install({ logger: new DefaultLogger('WARN') });

/** Bulk SQL on the store's database, through a connection of the bench's own. */
interface Seeder {
  /** `count` tool executions of `turnId` (a tenth cancelled, a tenth failed budget-denied). */
  executions(turnId: string, count: number): Promise<void>;
  /** `count` completed turns (each its own tree) in `conversationId`. */
  finishedTurns(conversationId: string, count: number): Promise<void>;
  /** What PostgreSQL's autovacuum would do after the seeding (statistics, dead row versions). */
  settle(): Promise<void>;
  close(): Promise<void>;
}

const STATUS = (n: string) =>
  `CASE WHEN ${n} % 10 = 0 THEN 'cancelled' WHEN ${n} % 10 = 5 THEN 'failed' ELSE 'completed' END`;

function sqliteSeeder(path: string): Seeder {
  const db = new Database(path);
  const now = new Date().toISOString();
  return {
    async executions(turnId, count) {
      db.prepare(
        `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${count})
        INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, error,
            created_at, updated_at)
          SELECT @turnId || '_' || n, @turnId, 'call_' || n, 'tool_' || (n % 7), '{}', ${STATUS('n')},
            CASE WHEN n % 10 = 5 THEN '{"message":"denied","details":{"budget_denied":true}}' END, @now, @now
          FROM g`,
      ).run({ turnId, now });
    },
    async finishedTurns(conversationId, count) {
      db.prepare(
        `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${count})
        INSERT INTO turnkit_turns (id, conversation_id, agent_name, root_turn_id, status, options, cost,
            submitted_at, completed_at, created_at, updated_at)
          SELECT @prefix || n, @conversationId, 'bench', @prefix || n, 'completed', '{}', 0,
            @now, @now, @now, @now
          FROM g`,
      ).run({ prefix: `turn_${conversationId}_`, conversationId, now });
    },
    async settle() {},
    async close() {
      db.close();
    },
  };
}

function postgresSeeder(url: string, schema: string): Seeder {
  const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
  const connected = client.connect();
  return {
    async executions(turnId, count) {
      await connected;
      await client.query(
        `INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, error,
            created_at, updated_at)
          SELECT $1 || '_' || n, $1, 'call_' || n, 'tool_' || (n % 7), '{}', ${STATUS('n')},
            CASE WHEN n % 10 = 5 THEN '{"message":"denied","details":{"budget_denied":true}}'::jsonb END,
            now(), now()
          FROM generate_series(1, $2::integer) AS g(n)`,
        [turnId, count],
      );
    },
    async finishedTurns(conversationId, count) {
      await connected;
      await client.query(
        `INSERT INTO turnkit_turns (id, conversation_id, agent_name, root_turn_id, status, options, cost,
            submitted_at, completed_at, created_at, updated_at)
          SELECT $1 || n, $2, 'bench', $1 || n, 'completed', '{}', 0, now(), now(), now(), now()
          FROM generate_series(1, $3::integer) AS g(n)`,
        [`turn_${conversationId}_`, conversationId, count],
      );
    },
    async settle() {
      await connected;
      // Seeding updated each tree's ledger row once per seeded row, in one transaction: the dead
      // versions are what autovacuum clears within its next round on a table this small.
      await client.query('VACUUM ANALYZE');
    },
    async close() {
      await connected;
      await client.end();
    },
  };
}

/** Budget checks on a tree of BIG_TREE executions and one of SMALL_TREE, alternated. */
async function budgetRatio(store: Store, seeder: Seeder) {
  const conversation = await store.createConversation({ agentName: 'bench' });
  const roots = [];
  for (const size of [SMALL_TREE, BIG_TREE]) {
    const root = await store.createTurn({ conversationId: conversation.id, agentName: 'bench' });
    await seeder.executions(root.id, size);
    roots.push(await store.loadTurn(root.id));
  }
  await seeder.settle();
  const [small, big] = roots as [(typeof roots)[0], (typeof roots)[0]];
  const check = (root: typeof small) => Budget.load(store, root.id, DEFAULT_LIMITS, { root });
  const counted = (await check(big)).toolExecutions;
  if (counted !== BIG_TREE * 0.8) throw new Error(`scale bench: the big tree counts ${counted} executions`);
  const times = { small: [] as number[], big: [] as number[] };
  for (let i = 0; i < 20; i++) await Promise.all([check(small), check(big)]);
  for (let i = 0; i < BUDGET_CHECKS; i++) {
    times.small.push(await timed(() => check(small)));
    times.big.push(await timed(() => check(big)));
  }
  const [smallP50, bigP50] = [percentile(times.small, 50), percentile(times.big, 50)];
  return { smallP50, bigP50, ratio: bigP50 / smallP50 };
}

/** Real turns alternated between a fresh conversation and one of BIG_CONVERSATION finished turns. */
async function conversationTurnRatio(
  store: Store,
  seeder: Seeder,
  temporal: Client,
  connection: NativeConnection,
) {
  const agents = new AgentRegistry([benchAgent]);
  const taskQueue = `turnkit-scale-${randomBytes(4).toString('hex')}`;
  const worker = await createWorker({ store, agents, model: benchModel, connection, taskQueue });
  const client = new TurnKitClient({ store, agents, temporal, taskQueue });
  const big = await client.conversation('bench');
  await seeder.finishedTurns(big.id, BIG_CONVERSATION);
  await seeder.settle();
  const turn = async (conversation: typeof big, text: string) =>
    timed(async () => {
      const record = await (await conversation.ask(text)).result();
      if (record.status !== 'completed') throw new Error(`scale bench: a turn ended ${record.status}`);
    });
  return worker.worker.runUntil(async () => {
    const warmup = await client.conversation('bench');
    for (let i = 0; i < 3; i++) await turn(warmup, `warm-up ${i}`);
    const fresh = await client.conversation('bench');
    const times = { fresh: [] as number[], big: [] as number[] };
    for (let i = 0; i < pairs; i++) {
      times.fresh.push(await turn(fresh, `question ${i}`));
      times.big.push(await turn(big, `question ${i}`));
    }
    const [freshP50, bigP50] = [percentile(times.fresh, 50), percentile(times.big, 50)];
    return { freshP50, bigP50, ratio: bigP50 / freshP50 };
  });
}

async function measure(
  name: string,
  store: Store,
  seeder: Seeder,
  temporal: Client,
  connection: NativeConnection,
): Promise<Record<string, number>> {
  try {
    const budget = await budgetRatio(store, seeder);
    const turns = await conversationTurnRatio(store, seeder, temporal, connection);
    console.log(
      `${name}: budget check p50 ${budget.smallP50.toFixed(3)} ms (${SMALL_TREE} executions) vs ` +
        `${budget.bigP50.toFixed(3)} ms (${BIG_TREE}): ${budget.ratio.toFixed(2)}×`,
    );
    console.log(
      `${name}: turn p50 ${turns.freshP50.toFixed(1)} ms (fresh conversation) vs ` +
        `${turns.bigP50.toFixed(1)} ms (${BIG_CONVERSATION} finished turns): ${turns.ratio.toFixed(2)}×`,
    );
    return {
      [`scale_budget_ratio_${name}`]: budget.ratio,
      [`scale_budget_small_p50_ms_${name}`]: budget.smallP50,
      [`scale_budget_big_p50_ms_${name}`]: budget.bigP50,
      [`scale_conversation_turn_ratio_${name}`]: turns.ratio,
      [`scale_conversation_turn_fresh_p50_ms_${name}`]: turns.freshP50,
      [`scale_conversation_turn_big_p50_ms_${name}`]: turns.bigP50,
    };
  } finally {
    await seeder.close();
    await store.close();
  }
}

const connection = await NativeConnection.connect({ address });
const temporal = new Client({ connection: await Connection.connect({ address }) });
const results: Record<string, number> = {};

const sqlitePath = join(mkdtempSync(join(tmpdir(), 'turnkit-scale-bench-')), 'scale.sqlite');
Object.assign(
  results,
  await measure('sqlite', await SqliteStore.open(sqlitePath), sqliteSeeder(sqlitePath), temporal, connection),
);

const schema = `turnkit_scale_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: pgBase });
const reachable = await admin.connect().then(
  () => true,
  (error: unknown) => {
    console.warn('scale bench: PostgreSQL unreachable, its keys are left out:', error);
    return false;
  },
);
if (reachable) {
  try {
    const store = await PostgresStore.open(pgBase, { schema });
    Object.assign(results, await measure('pg', store, postgresSeeder(pgBase, schema), temporal, connection));
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

const verdict = (value: number | undefined, target: number) =>
  value === undefined ? 'not measured' : `<= ${target}: ${value <= target ? 'met' : 'missed'}`;
mergeBenchResults({
  scale_store_measuredAt: new Date().toISOString(),
  ...results,
  scale_budget_ratio_target: `sqlite ${verdict(results['scale_budget_ratio_sqlite'], TARGETS.budget)}; pg ${verdict(results['scale_budget_ratio_pg'], TARGETS.budget)}`,
  scale_conversation_turn_ratio_target: `sqlite ${verdict(results['scale_conversation_turn_ratio_sqlite'], TARGETS.conversationTurn)}; pg ${verdict(results['scale_conversation_turn_ratio_pg'], TARGETS.conversationTurn)}`,
});
await connection.close();
await temporal.connection.close();
