/**
 * `npm run bench` (runs alone too): the store statements a bench turn sends (bench/bench-agent.ts:
 * one model call, one terminal tool, output), on SQLite and on PostgreSQL, and how often the
 * worker reads the turn's own row, by activity. TURN_STORE_TURNS (20) sequential turns on one
 * in-process worker against the dev server, after 3 unmeasured ones. Statement counts do not
 * depend on load. PostgreSQL: TURNKIT_BENCH_DATABASE_URL, else TURNKIT_TEST_DATABASE_URL, in a
 * fresh schema dropped at the end; left out, with a warning, when it cannot be reached.
 *
 * TURN_STORE_LOG=file appends the last turn's statements, for reading what each activity sends.
 *
 * What counts as a statement, and what as a transaction: bench/turn-store-figures.ts.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime as TemporalRuntime,
  Worker,
} from '@temporalio/worker';
import pg from 'pg';
import { createTurnActivities } from '../src/activities/turn-activities.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { Runtime } from '../src/engine/runtime.js';
import { ConfigError } from '../src/errors.js';
import { openStore } from '../src/store/index.js';
import { benchAgent, benchModel } from './bench-agent.js';
import { mergeBenchResults } from './results.js';
import { countAs, installStatementCounter, startCounting, stopCounting } from './statement-counter.js';
import type { Statement } from './statement-counter.js';
import { summarizeTurns, type TurnStoreFigures } from './turn-store-figures.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const turns = Number(process.env['TURN_STORE_TURNS'] ?? 20);
if (!Number.isInteger(turns) || turns < 1)
  throw new ConfigError(`TURN_STORE_TURNS must be a whole number of turns, at least 1 (got ${turns})`);
const warmup = 3;
const pgBase =
  process.env['TURNKIT_BENCH_DATABASE_URL'] ??
  process.env['TURNKIT_TEST_DATABASE_URL'] ??
  'postgres://postgres@127.0.0.1:5432/turnkit_test';

const redacted = (url: string) => url.replace(/\/\/[^@/]*@/, '//');

installStatementCounter();
// The figures are the output: the worker's state changes would bury them.
TemporalRuntime.install({ logger: new DefaultLogger('WARN') });
const agents = new AgentRegistry([benchAgent]);
const connection = await NativeConnection.connect({ address });
const temporal = new Client({ connection: await Connection.connect({ address }) });
const workflowBundle = await bundleWorkflowCode({
  workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
  logger: { log() {}, trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error },
});

type Activities = Record<string, (...args: never[]) => Promise<unknown>>;

/** The activities, each charging its statements to its own name. */
function labelled(activities: Activities): Activities {
  return Object.fromEntries(
    Object.entries(activities).map(([name, fn]) => [
      name,
      (...args: never[]) => countAs(name, () => fn(...args)),
    ]),
  );
}

/** Runs the bench turns on a store at `url`; each turn's statements, with its id. */
async function measure(url: string): Promise<TurnStoreFigures> {
  const store = await openStore(url);
  const runtime = new Runtime({ store, agents, model: benchModel, defaultModel: 'scripted' });
  const taskQueue = `turnkit-turn-store-${randomBytes(4).toString('hex')}`;
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowBundle,
    activities: labelled(createTurnActivities(runtime) as unknown as Activities),
  });
  const client = new TurnKitClient({ store, agents, temporal, taskQueue });
  const turn = async (): Promise<string> => {
    const run = await countAs('client', () => client.run('bench', 'What is the answer?'));
    const record = await countAs('client', () => run.result());
    if (record.status !== 'completed')
      throw new Error(`bench turn ended ${record.status}: ${record.error?.message}`);
    return run.turnId;
  };
  try {
    return await worker.runUntil(async () => {
      for (let i = 0; i < warmup; i++) await turn();
      const measured: { turnId: string; statements: Statement[] }[] = [];
      for (let i = 0; i < turns; i++) {
        startCounting();
        const turnId = await turn();
        measured.push({ turnId, statements: stopCounting() });
      }
      const dump = process.env['TURN_STORE_LOG'];
      if (dump)
        appendFileSync(dump, `${JSON.stringify({ url: redacted(url), ...measured.at(-1) }, null, 1)}\n`);
      return summarizeTurns(measured);
    });
  } finally {
    await store.close();
  }
}

async function measurePostgres(): Promise<TurnStoreFigures | null> {
  const schema = `turnkit_turn_store_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: pgBase });
  try {
    await admin.connect();
  } catch (error) {
    console.warn(
      `turn store bench: PostgreSQL unreachable at ${redacted(pgBase)}, its keys are left out:`,
      error,
    );
    return null;
  }
  try {
    return await measure(`${pgBase}${pgBase.includes('?') ? '&' : '?'}schema=${schema}`);
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

function print(name: string, figures: TurnStoreFigures): void {
  console.log(`\n${name}: ${turns} bench turns`);
  for (const [key, value] of Object.entries(figures.summary)) console.log(`  ${key.padEnd(28)} ${value}`);
  console.log('  by activity, per turn:      statements transactions turn-row reads');
  for (const [activity, counts] of Object.entries(figures.byLabel)) {
    const columns = [counts.statements, counts.transactions, counts.rowLoads].map((v) =>
      String(v).padStart(6),
    );
    console.log(`    ${activity.padEnd(26)} ${columns.join('       ')}`);
  }
  console.log('  turn-row reads by phase:', JSON.stringify(figures.rowLoadsByPhase));
  console.log('  statements by kind:', JSON.stringify(figures.byKind));
}

const sqlite = await measure(join(mkdtempSync(join(tmpdir(), 'turnkit-turn-store-')), 'bench.sqlite'));
print('SQLite', sqlite);
const postgres = await measurePostgres();
if (postgres) print('PostgreSQL', postgres);

mergeBenchResults({
  turn_store_measuredAt: new Date().toISOString(),
  turn_store_statements: sqlite.summary.statements,
  turn_store_statements_sqlite: sqlite.summary.statements,
  turn_store_statements_worker: sqlite.summary.worker_statements,
  turn_store_statements_client: sqlite.summary.client_statements,
  turn_store_transactions: sqlite.summary.transactions,
  turn_store_round_trips: sqlite.summary.round_trips,
  turn_row_loads: sqlite.summary.worker_row_loads,
  ...(postgres
    ? {
        turn_store_statements_pg: postgres.summary.statements,
        turn_store_statements_worker_pg: postgres.summary.worker_statements,
        turn_store_round_trips_pg: postgres.summary.round_trips,
        turn_row_loads_pg: postgres.summary.worker_row_loads,
      }
    : {}),
});
await temporal.connection.close();
await connection.close();
