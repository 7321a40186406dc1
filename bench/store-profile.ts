/**
 * Where a turn's store time goes on PostgreSQL: runs PROFILE_TURNS soak turns (bench/soak-agents.ts)
 * at once on one in-process worker, counting every statement sent to PostgreSQL (by its
 * text), its time, and the time spent waiting for a pooled connection. Not part of
 * `npm run bench`; a tool for tuning the PostgreSQL store (TURNKIT_BENCH_DATABASE_URL, else
 * TURNKIT_TEST_DATABASE_URL; a fresh schema, dropped at the end). PROFILE_BACKEND=sqlite runs the
 * same turns on a SQLite file instead, for this process's CPU per turn to compare.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { samplePostgres } from './pg-sampler.js';
import { SOAK_SHAPES, soakFixture } from './soak-agents.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const turns = Number(process.env['PROFILE_TURNS'] ?? 40);
const base =
  process.env['TURNKIT_BENCH_DATABASE_URL'] ??
  process.env['TURNKIT_TEST_DATABASE_URL'] ??
  'postgres://postgres@127.0.0.1:5432/turnkit_test';

interface Stat {
  count: number;
  ms: number;
}
const statements = new Map<string, Stat>();
let waits = 0;
let waitMs = 0;
let profiling = false;

const clientQuery = pg.Client.prototype.query as (...args: unknown[]) => Promise<unknown>;
(pg.Client.prototype as unknown as { query: unknown }).query = function (
  this: pg.Client,
  ...args: unknown[]
) {
  const first = args[0];
  const text = typeof first === 'string' ? first : String((first as { text?: string }).text ?? '');
  const key = text
    .replace(/\s+/g, ' ')
    .replace(/\$\d+(::\w+)?/g, '?')
    .slice(0, 110);
  const start = performance.now();
  const result = clientQuery.apply(this, args);
  if (profiling && result instanceof Promise) {
    void result.finally(() => {
      const stat = statements.get(key) ?? { count: 0, ms: 0 };
      stat.count++;
      stat.ms += performance.now() - start;
      statements.set(key, stat);
    });
  }
  return result;
};
const poolConnect = pg.Pool.prototype.connect as (...args: unknown[]) => Promise<unknown>;
(pg.Pool.prototype as unknown as { connect: unknown }).connect = function (
  this: pg.Pool,
  ...args: unknown[]
) {
  const start = performance.now();
  const result = poolConnect.apply(this, args);
  if (profiling && result instanceof Promise) {
    void result.finally(() => {
      waits++;
      waitMs += performance.now() - start;
    });
  }
  return result;
};

/** CPU seconds (user + system) of the PostgreSQL backends serving `url`'s database, sampled until stopped. */
function backendCpu(url: string): { stop(): Promise<number> } {
  const seen = new Map<number, number>();
  const baseline = new Map<number, number>();
  const ticks = 100;
  let first = true;
  const sampler = samplePostgres(url, 100, async (client) => {
    const { rows } = await client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    for (const { pid } of rows) {
      try {
        const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        const seconds = (Number(fields[11]) + Number(fields[12])) / ticks;
        if (first) baseline.set(pid, seconds);
        seen.set(pid, seconds);
      } catch {
        // the backend is gone
      }
    }
    first = false;
  });
  return {
    stop: () =>
      sampler
        .stop()
        .then(() => [...seen].reduce((sum, [pid, seconds]) => sum + seconds - (baseline.get(pid) ?? 0), 0)),
  };
}

const sqlite = process.env['PROFILE_BACKEND'] === 'sqlite';
const schema = `turnkit_profile_${Date.now()}`;
const store = await openStore(
  sqlite
    ? join(mkdtempSync(join(tmpdir(), 'turnkit-profile-')), 'profile.sqlite')
    : `${base}${base.includes('?') ? '&' : '?'}schema=${schema}`,
);
const fixture = soakFixture();
const agents = new AgentRegistry(fixture.agents);
const taskQueue = `turnkit-profile-${Date.now()}`;
const temporal = new Client({ connection: await Connection.connect({ address }) });
const worker = await createWorker({ store, agents, model: fixture.model, taskQueue, address });
const client = new TurnKitClient({ store, agents, temporal, taskQueue });
const turn = async (i: number) => {
  const run = await client.run(SOAK_SHAPES[i % SOAK_SHAPES.length]!, `profile turn ${i}`);
  const record = await run.result();
  if (record.status !== 'completed') throw new Error(`turn ${run.turnId} ended ${record.status}`);
};

await worker.run(
  (async () => {
    await Promise.all([0, 1].map(turn));
    const cpu = sqlite ? { stop: async () => 0 } : backendCpu(base);
    await new Promise((r) => setTimeout(r, 300));
    const nodeBefore = process.cpuUsage();
    profiling = true;
    const start = performance.now();
    await Promise.all(Array.from({ length: turns }, (_, i) => turn(i)));
    const seconds = (performance.now() - start) / 1000;
    profiling = false;
    const node = process.cpuUsage(nodeBefore);
    const pgCpu = await cpu.stop();
    const total = [...statements.values()].reduce((sum, s) => sum + s.count, 0);
    const totalMs = [...statements.values()].reduce((sum, s) => sum + s.ms, 0);
    console.log(`${turns} turns in ${seconds.toFixed(1)} s (${(turns / seconds).toFixed(2)}/s)`);
    console.log(`statements: ${total} (${(total / turns).toFixed(1)} per turn), ${totalMs.toFixed(0)} ms`);
    console.log(
      `cpu per turn: this process ${((node.user + node.system) / 1000 / turns).toFixed(1)} ms, PostgreSQL backends ${((pgCpu * 1000) / turns).toFixed(1)} ms`,
    );
    console.log(
      `pool connects: ${waits} (${(waits / turns).toFixed(1)} per turn), waiting ${waitMs.toFixed(0)} ms`,
    );
    const rows = [...statements.entries()].sort((a, b) => b[1].ms - a[1].ms);
    for (const [sql, stat] of rows.slice(0, 30)) {
      console.log(
        `${(stat.count / turns).toFixed(1).padStart(6)}/turn ${(stat.ms / stat.count).toFixed(1).padStart(7)} ms  ${sql}`,
      );
    }
  })(),
);
await store.close();
if (!sqlite) {
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
}
await temporal.connection.close();
