/**
 * `npm run bench:retention` (issue 44): a soak of RETENTION_SOAK_TURNS (default 5,000) real
 * one-tool turns, each in a conversation of its own, RETENTION_SOAK_CONCURRENCY (default 16) at
 * a time, on an in-process worker and the dev server, with retention on: a pass
 * (`pruneStore`, what the retention schedule's activity runs) every fifth of the window while
 * the turns run. The window (RETENTION_SOAK_WINDOW_S, default 20 s) is the policy's stream-part
 * grace, event age and conversation age alike, so every row of a finished turn leaves one window
 * after it ended. On SQLite and PostgreSQL (RETENTION_SOAK_BACKENDS).
 *
 * The store's size is sampled every second (rows of every TurnKit table; SQLite: bytes in use,
 * PostgreSQL: the tables' total relation size). Keys, suffixed `_sqlite` / `_pg`:
 * - `retention_soak_stale_stream_parts`: stream parts left at the end whose run ended before
 *   the last pass's window (0 wanted);
 * - `retention_soak_rows_growth_ratio`: mean rows of the last half of the samples taken once
 *   the window was full (two windows in) over the first half's (about 1: it stopped growing);
 *   `retention_soak_bytes_growth_ratio` the same for bytes;
 * - `retention_soak_turns`, `retention_soak_rows_peak`, `retention_soak_passes`,
 *   `retention_soak_largest_batch` (rows one transaction deleted at most) and
 *   `retention_soak_longest_batch_ms` (the longest one ran its statements);
 * - `retention_soak_rows_per_recent_turn_growth_ratio`: the same for rows over the turns that
 *   ended in the last two windows (about 1 when retention keeps up, even while the turn rate
 *   of a shared machine changes, which moves the plain rows ratio);
 *   `retention_soak_bytes_per_recent_turn_growth_ratio` the same for bytes;
 * - `retention_soak_vacuum` (1 with RETENTION_SOAK_VACUUM=1: the policy's `vacuum`) and, on
 *   PostgreSQL, `retention_soak_autovacuum_pg` (1 when the server's autovacuum is on): without
 *   either, PostgreSQL's tables keep growing, as docs/retention.md says.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import pg from 'pg';
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { defineTool } from '../src/agents/tool.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { ScriptedModel } from '../src/models/scripted-model.js';
import type { ModelRequest } from '../src/models/types.js';
import { openStore } from '../src/store/index.js';
import { pruneStore } from '../src/store/retention/prune-store.js';
import type { RetentionPolicy } from '../src/store/retention/retention-policy.js';
import { createWorker } from '../src/worker.js';
import { mergeBenchResults } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const TURNS = Number(process.env['RETENTION_SOAK_TURNS'] ?? 5_000);
const CONCURRENCY = Number(process.env['RETENTION_SOAK_CONCURRENCY'] ?? 16);
const WINDOW_MS = Number(process.env['RETENTION_SOAK_WINDOW_S'] ?? 20) * 1000;
const backends = (process.env['RETENTION_SOAK_BACKENDS'] ?? 'sqlite,postgres')
  .split(',')
  .map((b) => b.trim());
const pgBase =
  process.env['TURNKIT_BENCH_DATABASE_URL'] ??
  process.env['TURNKIT_TEST_DATABASE_URL'] ??
  'postgres://postgres@127.0.0.1:5432/turnkit_test';
const TABLES = [
  'turnkit_conversations',
  'turnkit_messages',
  'turnkit_turns',
  'turnkit_tool_executions',
  'turnkit_deliveries',
  'turnkit_waits',
  'turnkit_events',
  'turnkit_stream_parts',
];
/** RETENTION_SOAK_VACUUM=1: the policy's `vacuum` (PostgreSQL vacuums what each pass deleted from). */
const VACUUM = process.env['RETENTION_SOAK_VACUUM'] === '1';
const policy: RetentionPolicy = {
  streamPartsGraceMs: WINDOW_MS,
  eventsMaxAgeMs: WINDOW_MS,
  conversationsMaxAgeMs: WINDOW_MS,
  vacuum: VACUUM,
};

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  input: z.object({ word: z.string() }),
  execute: ({ word }) => ({ word, meaning: `the meaning of ${word}` }),
});
const answered = (request: ModelRequest) => request.messages.some((m) => m.role === 'tool');
const model = new ScriptedModel({
  soak_retention: (request) =>
    answered(request) ? 'looked it up' : { toolCalls: [{ name: 'lookup', arguments: { word: 'durable' } }] },
});
const agents = new AgentRegistry([
  defineAgent({ name: 'soak_retention', tools: [lookup], limits: { timeout: 3600 } }),
]);

/** Reads the store's size: its rows, its bytes, and the stream parts a pass should have removed. */
interface SizeProbe {
  rows(): Promise<number>;
  bytes(): Promise<number>;
  staleStreamParts(cutoffIso: string): Promise<number>;
  /** PostgreSQL: whether the server's autovacuum is on. */
  autovacuum(): Promise<boolean>;
  close(): Promise<void>;
}

const STALE_PARTS = (param: string) => `SELECT COUNT(*) AS n FROM turnkit_stream_parts p
  WHERE NOT EXISTS (SELECT 1 FROM turnkit_turns u WHERE u.root_turn_id = p.root_turn_id
    AND (u.status NOT IN ('completed', 'failed', 'cancelled') OR u.completed_at IS NULL OR u.completed_at >= ${param}))`;

async function probeOf(backend: string, url: string, schema?: string): Promise<SizeProbe> {
  if (backend === 'sqlite') {
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(url, { readonly: true });
    const one = (sql: string, ...params: unknown[]) =>
      Number(Object.values(db.prepare(sql).get(...params) as object)[0]);
    return {
      rows: async () => TABLES.reduce((sum, table) => sum + one(`SELECT COUNT(*) FROM ${table}`), 0),
      bytes: async () =>
        one(
          'SELECT (page_count - freelist_count) * page_size FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()',
        ),
      staleStreamParts: async (cutoff) => one(STALE_PARTS('?'), cutoff),
      autovacuum: async () => false,
      close: async () => void db.close(),
    };
  }
  const client = new pg.Client({ connectionString: pgBase });
  await client.connect();
  await client.query(`SET search_path TO "${schema}"`);
  const one = async (sql: string, params: unknown[] = []) =>
    Number(Object.values((await client.query(sql, params)).rows[0] as object)[0]);
  return {
    rows: async () => {
      let sum = 0;
      for (const table of TABLES) sum += await one(`SELECT COUNT(*) FROM ${table}`);
      return sum;
    },
    bytes: async () => {
      let sum = 0;
      for (const table of TABLES) sum += await one(`SELECT pg_total_relation_size('${table}')`);
      return sum;
    },
    staleStreamParts: (cutoff) => one(STALE_PARTS('$1::timestamptz'), [cutoff]),
    autovacuum: async () => (await client.query('SHOW autovacuum')).rows[0].autovacuum === 'on',
    close: () => client.end(),
  };
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(values.length, 1);

async function soak(
  backend: string,
  connection: NativeConnection,
  temporal: Client,
): Promise<Record<string, number>> {
  const suffix = backend === 'postgres' ? '_pg' : '_sqlite';
  const stamp = Date.now();
  let url: string;
  let schema: string | undefined;
  let drop: () => Promise<void>;
  if (backend === 'postgres') {
    schema = `turnkit_retention_soak_${stamp}`;
    url = `${pgBase}${pgBase.includes('?') ? '&' : '?'}schema=${schema}`;
    drop = async () => {
      const admin = new pg.Client({ connectionString: pgBase });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    };
  } else if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'turnkit-retention-soak-'));
    url = join(dir, 'soak.sqlite');
    drop = async () => rmSync(dir, { recursive: true, force: true });
  } else {
    throw new Error(`bench:retention: unknown backend ${backend} (sqlite or postgres)`);
  }
  const store = await openStore(url);
  const probe = await probeOf(backend, url, schema);
  const taskQueue = `turnkit-retention-soak-${backend}-${stamp}`;
  const worker = await createWorker({ store, agents, model, connection, taskQueue });
  const client = new TurnKitClient({ store, agents, temporal, taskQueue });
  const samples: { at: number; rows: number; bytes: number; done: number }[] = [];
  let passes = 0;
  let largestBatch = 0;
  let longestBatchMs = 0;
  let lastCutoff = new Date(0).toISOString();
  let done = 0;
  let running = true;
  const started = Date.now();
  try {
    await worker.worker.runUntil(async () => {
      const pruner = (async () => {
        while (running) {
          const at = new Date();
          const report = await pruneStore(store, policy, { now: at });
          lastCutoff = new Date(at.getTime() - WINDOW_MS).toISOString();
          passes++;
          largestBatch = Math.max(largestBatch, report.largestBatch);
          longestBatchMs = Math.max(longestBatchMs, report.longestBatchMs);
          await new Promise((resolve) => setTimeout(resolve, WINDOW_MS / 5));
        }
      })();
      const sampler = (async () => {
        while (running) {
          samples.push({
            at: Date.now() - started,
            rows: await probe.rows(),
            bytes: await probe.bytes(),
            done,
          });
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      })();
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < TURNS) {
            next++;
            const run = await client.run('soak_retention', 'look up durable');
            await run.result();
            if (++done % 500 === 0) console.log(`  ${backend}: ${done} turns`);
          }
        }),
      );
      running = false;
      await Promise.all([pruner, sampler]);
    });
    const full = samples.filter((sample) => sample.at >= 2 * WINDOW_MS);
    const half = Math.floor(full.length / 2);
    const growth = (key: 'rows' | 'bytes') =>
      full.length < 4
        ? NaN
        : mean(full.slice(half).map((s) => s[key])) / mean(full.slice(0, half).map((s) => s[key]));
    // Rows per turn that ended in the last two windows (a turn's rows stay about one window
    // after it ended): steady when retention keeps up, whatever the turn rate does.
    const doneBefore = (at: number) => [...samples].reverse().find((sample) => sample.at <= at)?.done ?? 0;
    const perTurnGrowth = (key: 'rows' | 'bytes') => {
      const perTurn = full.map((s) => s[key] / Math.max(1, s.done - doneBefore(s.at - 2 * WINDOW_MS)));
      return perTurn.length < 4 ? NaN : mean(perTurn.slice(half)) / mean(perTurn.slice(0, half));
    };
    const keys = {
      [`retention_soak_turns${suffix}`]: done,
      [`retention_soak_seconds${suffix}`]: Math.round((Date.now() - started) / 100) / 10,
      [`retention_soak_stale_stream_parts${suffix}`]: await probe.staleStreamParts(lastCutoff),
      [`retention_soak_rows_growth_ratio${suffix}`]: Math.round(growth('rows') * 100) / 100,
      [`retention_soak_rows_per_recent_turn_growth_ratio${suffix}`]:
        Math.round(perTurnGrowth('rows') * 100) / 100,
      [`retention_soak_bytes_growth_ratio${suffix}`]: Math.round(growth('bytes') * 100) / 100,
      [`retention_soak_bytes_per_recent_turn_growth_ratio${suffix}`]:
        Math.round(perTurnGrowth('bytes') * 100) / 100,
      [`retention_soak_rows_peak${suffix}`]: Math.max(...samples.map((s) => s.rows)),
      [`retention_soak_passes${suffix}`]: passes,
      [`retention_soak_largest_batch${suffix}`]: largestBatch,
      [`retention_soak_longest_batch_ms${suffix}`]: longestBatchMs,
      [`retention_soak_vacuum${suffix}`]: VACUUM ? 1 : 0,
      ...(backend === 'postgres' ? { retention_soak_autovacuum_pg: (await probe.autovacuum()) ? 1 : 0 } : {}),
    };
    console.log(backend, keys);
    return keys;
  } finally {
    running = false;
    await probe.close();
    await store.close();
    await drop();
  }
}

console.log(
  `TurnKit retention soak: ${TURNS} one-tool turns, ${CONCURRENCY} at a time, window ${WINDOW_MS / 1000} s (shared machine)`,
);
const connection = await NativeConnection.connect({ address });
const temporal = new Client({ connection: await Connection.connect({ address }) });
const results: Record<string, number> = {};
try {
  for (const backend of backends) Object.assign(results, await soak(backend, connection, temporal));
} finally {
  await connection.close();
  await temporal.connection.close();
}
mergeBenchResults({ retention_soak_measuredAt: new Date().toISOString(), ...results });
