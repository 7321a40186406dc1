/**
 * `npm run bench:chaos` (not in CI, not in `npm run bench`): issue 27's chaos workload. Two
 * worker processes (test/fixtures/chaos-worker.ts) serve CHAOS_RUNS roots — tool loops
 * (`looper`) and fan-outs to three sub-agents (`fanout`) — whose model calls take
 * CHAOS_MODEL_MS (± 50 %); every CHAOS_KILL_EVERY_MS one of the two workers is SIGKILLed and a
 * replacement spawned (the next kill waits until it polls). Prints, per backend: roots
 * completed and failed, failed turns of the whole trees, kills, wall time, how long the
 * replacements took to start, the load average, and on PostgreSQL what the server's sessions
 * did (sampled from pg_stat_activity every 250 ms).
 *
 * Environment: CHAOS_BACKENDS (`postgres,sqlite`), CHAOS_RUNS (300), CHAOS_MODEL_MS (4000),
 * CHAOS_KILL_EVERY_MS (3000), CHAOS_WAVE (20 submissions) and CHAOS_PAUSE_MS (2500 between
 * waves), TURNKIT_TEST_DATABASE_URL (PostgreSQL server), TEMPORAL_ADDRESS. Self-contained, so
 * it can be copied into an older checkout and compared back to back.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { AgentRegistry } from '../src/agents/registry.js';
import type { RunHandle } from '../src/client/run-handle.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { openStore } from '../src/store/index.js';
import type { TurnRecord } from '../src/store/types.js';
import { chaosFixture } from '../test/fixtures/chaos-agents.js';

const RUNS = Number(process.env['CHAOS_RUNS'] ?? 300);
const MODEL_MS = Number(process.env['CHAOS_MODEL_MS'] ?? 4_000);
const KILL_EVERY_MS = Number(process.env['CHAOS_KILL_EVERY_MS'] ?? 3_000);
const WAVE = Number(process.env['CHAOS_WAVE'] ?? 20);
const PAUSE_MS = Number(process.env['CHAOS_PAUSE_MS'] ?? 2_500);
const BACKENDS = (process.env['CHAOS_BACKENDS'] ?? 'postgres,sqlite').split(',').filter(Boolean);
const PG_URL = process.env['TURNKIT_TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const script = fileURLToPath(new URL('../test/fixtures/chaos-worker.ts', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * CPU seconds a process used, itself and (with `children`) its reaped children: the bench
 * reaps its workers, so their CPU lands in its own cutime/cstime; the PostgreSQL postmaster
 * reaps its backends. Undefined where /proc does not say.
 */
function cpuSeconds(pid: number | 'self', children: boolean): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    // Fields 14–17 of proc(5) (utime, stime, cutime, cstime) are 11–14 here, in clock ticks.
    const ticks = fields[11]! + fields[12]! + (children ? fields[13]! + fields[14]! : 0);
    return ticks / 100;
  } catch {
    return undefined;
  }
}
/** Whose CPU a chaos run spent: the dev server, PostgreSQL, the workers, the bench client. */
function cpuMeter() {
  const pidOf = (name: string) =>
    Number(
      readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .find((d) => {
          try {
            const comm = readFileSync(`/proc/${d}/comm`, 'utf8').trim();
            const parent = Number(readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
            return (
              comm === name &&
              (name !== 'postgres' || readFileSync(`/proc/${parent}/comm`, 'utf8').trim() !== 'postgres')
            );
          } catch {
            return false;
          }
        }) ?? NaN,
    );
  const temporalPid = pidOf('temporal');
  const postgresPid = pidOf('postgres');
  const read = () => ({
    temporal: Number.isFinite(temporalPid) ? cpuSeconds(temporalPid, true) : undefined,
    postgres: Number.isFinite(postgresPid) ? cpuSeconds(postgresPid, true) : undefined,
    workers: cpuSeconds('self', true)! - cpuSeconds('self', false)!,
    bench: cpuSeconds('self', false),
  });
  const before = read();
  return () => {
    const after = read();
    return Object.fromEntries(
      Object.entries(after).map(([k, v]) => {
        const b = before[k as keyof typeof before];
        return [k, v === undefined || b === undefined ? null : Math.round(v - b)];
      }),
    );
  };
}

interface Spawned {
  child: ChildProcess;
  spawnedAt: number;
  ready: Promise<number>;
  alive(): boolean;
}

/**
 * The workers run the compiled package, as production workers do (`npm run build`, decision
 * 34): the fixture's worker and agents are transpiled once, their `src/` imports pointed at
 * `dist/`, so a replacement pays node's start and not tsx's (about 3 s of CPU at load). A
 * checkout without `dist/` runs them from source through tsx, as it did.
 */
async function compiledWorker(): Promise<string | undefined> {
  const dist = fileURLToPath(new URL('../dist/', import.meta.url));
  if (!existsSync(join(dist, 'worker.js'))) return undefined;
  const ts = (await import('typescript')).default;
  // Inside node_modules, so the transpiled files resolve zod and the SDK as the package does.
  const dir = mkdtempSync(fileURLToPath(new URL('../node_modules/.turnkit-chaos-', import.meta.url)));
  for (const name of ['chaos-worker', 'chaos-agents']) {
    const source = readFileSync(
      fileURLToPath(new URL(`../test/fixtures/${name}.ts`, import.meta.url)),
      'utf8',
    );
    const { outputText } = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    writeFileSync(
      join(dir, `${name}.js`),
      outputText.replaceAll("'../../src/", `'${pathToFileURL(dist).href}`),
    );
  }
  return join(dir, 'chaos-worker.js');
}
const compiled = await compiledWorker();

function spawnWorker(env: Record<string, string>): Spawned {
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, compiled ? [compiled] : ['--import', 'tsx', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  let alive = true;
  const ready = new Promise<number>((resolve) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('fault-worker ready')) resolve(performance.now() - spawnedAt);
      if (output.length > 20_000) output = output.slice(-10_000);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', () => {
      alive = false;
      resolve(Number.NaN);
    });
  });
  return { child, spawnedAt, ready, alive: () => alive };
}

function stop(worker: Spawned): Promise<void> {
  if (!worker.alive()) return Promise.resolve();
  return new Promise((resolve) => {
    worker.child.once('exit', () => resolve());
    worker.child.kill('SIGTERM');
    setTimeout(() => worker.child.kill('SIGKILL'), 8_000).unref();
  });
}

const median = (values: number[]) => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor(sorted.length / 2)]! : Number.NaN;
};

interface PgFigures {
  samples: number;
  maxSessions: number;
  maxActive: number;
  maxIdleInTransaction: number;
  /** The longest a session sat idle inside a transaction, and its last statement. */
  longestIdleInTransactionMs: number;
  longestIdleInTransactionQuery: string;
  /** Sessions waiting for a lock (advisory locks: the store's conversation and graph locks). */
  maxLockWaits: number;
  lockWaitSamples: number;
  longestLockWaitMs: number;
  longestLockWaitQuery: string;
}

/** Samples pg_stat_activity of the bench's database every 250 ms until stopped. */
function samplePg(database: string): { stop(): Promise<PgFigures> } {
  const client = new pg.Client({ connectionString: PG_URL });
  const figures: PgFigures = {
    samples: 0,
    maxSessions: 0,
    maxActive: 0,
    maxIdleInTransaction: 0,
    longestIdleInTransactionMs: 0,
    longestIdleInTransactionQuery: '',
    maxLockWaits: 0,
    lockWaitSamples: 0,
    longestLockWaitMs: 0,
    longestLockWaitQuery: '',
  };
  let stopped = false;
  const loop = (async () => {
    await client.connect();
    while (!stopped) {
      const { rows } = await client.query<{
        state: string | null;
        wait: string | null;
        idle_ms: number;
        query_ms: number;
        query: string;
      }>(
        `SELECT state, wait_event_type AS wait, query,
                extract(epoch FROM now() - state_change) * 1000 AS idle_ms,
                extract(epoch FROM now() - query_start) * 1000 AS query_ms
           FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
        [database],
      );
      let idleTx = 0;
      let lockWaits = 0;
      for (const row of rows) {
        if (row.state?.startsWith('idle in transaction')) {
          idleTx += 1;
          if (Number(row.idle_ms) > figures.longestIdleInTransactionMs) {
            figures.longestIdleInTransactionMs = Math.round(Number(row.idle_ms));
            figures.longestIdleInTransactionQuery = row.query.slice(0, 160);
          }
        }
        if (row.wait === 'Lock') {
          lockWaits += 1;
          if (Number(row.query_ms) > figures.longestLockWaitMs) {
            figures.longestLockWaitMs = Math.round(Number(row.query_ms));
            figures.longestLockWaitQuery = row.query.slice(0, 160);
          }
        }
      }
      figures.maxSessions = Math.max(figures.maxSessions, rows.length);
      figures.maxActive = Math.max(figures.maxActive, rows.filter((r) => r.state === 'active').length);
      figures.maxIdleInTransaction = Math.max(figures.maxIdleInTransaction, idleTx);
      figures.maxLockWaits = Math.max(figures.maxLockWaits, lockWaits);
      if (lockWaits) figures.lockWaitSamples += 1;
      figures.samples += 1;
      await sleep(250);
    }
    await client.end();
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return figures;
    },
  };
}

/**
 * Where a turn workflow's time went, from its Temporal history: how many workflow tasks it
 * had, waiting for them to be picked up (on a worker's sticky queue, and on the shared queue),
 * running them, waiting for activity tasks, running them (seconds), and how many workflow
 * tasks timed out (taken by a worker that died; left on a dead worker's sticky queue);
 * averaged over `sample` random turns of the run.
 */
async function historyBreakdown(temporal: Client, runs: RunHandle[], sample = 25) {
  const picked = [...runs].sort(() => Math.random() - 0.5).slice(0, sample);
  const sum = {
    wall: 0,
    wfts: 0,
    wftWait: 0,
    wftWaitSticky: 0,
    wftWaitShared: 0,
    wftRun: 0,
    actWait: 0,
    actRun: 0,
    wftTimeouts: 0,
    wftStartTimeouts: 0,
    wftStickyTimeouts: 0,
  };
  const seconds = (a: unknown, b: unknown) =>
    Number((a as { seconds?: unknown })?.seconds ?? 0) -
    Number((b as { seconds?: unknown })?.seconds ?? 0) +
    (Number((a as { nanos?: number })?.nanos ?? 0) - Number((b as { nanos?: number })?.nanos ?? 0)) / 1e9;
  for (const run of picked) {
    const events = (await temporal.workflow.getHandle(run.workflowId).fetchHistory()).events ?? [];
    const byId = new Map(events.map((e) => [Number(e.eventId), e]));
    const at = (id: unknown) => byId.get(Number(id))?.eventTime;
    sum.wall += seconds(events.at(-1)?.eventTime, events[0]?.eventTime);
    for (const e of events) {
      if (e.workflowTaskStartedEventAttributes) {
        const scheduled = byId.get(Number(e.workflowTaskStartedEventAttributes.scheduledEventId));
        const wait = seconds(e.eventTime, scheduled?.eventTime);
        // TaskQueueKind 2 is a worker's sticky queue.
        const sticky = Number(scheduled?.workflowTaskScheduledEventAttributes?.taskQueue?.kind) === 2;
        sum.wfts += 1;
        sum.wftWait += wait;
        if (sticky) sum.wftWaitSticky += wait;
        else sum.wftWaitShared += wait;
      }
      if (e.workflowTaskCompletedEventAttributes)
        sum.wftRun += seconds(e.eventTime, at(e.workflowTaskCompletedEventAttributes.startedEventId));
      if (e.workflowTaskTimedOutEventAttributes) {
        sum.wftTimeouts += 1;
        // TimeoutType 1 is start-to-close (a worker took the task and never answered); 2,
        // schedule-to-start (a dead worker's sticky queue).
        const type = Number(e.workflowTaskTimedOutEventAttributes.timeoutType);
        if (type === 1) sum.wftStartTimeouts += 1;
        if (type === 2) sum.wftStickyTimeouts += 1;
      }
      if (e.activityTaskStartedEventAttributes)
        sum.actWait += seconds(e.eventTime, at(e.activityTaskStartedEventAttributes.scheduledEventId));
      if (e.activityTaskCompletedEventAttributes)
        sum.actRun += seconds(e.eventTime, at(e.activityTaskCompletedEventAttributes.startedEventId));
    }
  }
  return Object.fromEntries(
    Object.entries(sum).map(([key, value]) => [
      key,
      Math.round((value / Math.max(1, picked.length)) * 10) / 10,
    ]),
  );
}

async function chaos(backend: string, temporal: Client): Promise<Record<string, unknown>> {
  const started = performance.now();
  const load = loadavg()[0]!;
  const cpu = cpuMeter();
  const dir = mkdtempSync(join(tmpdir(), `turnkit-chaos-bench-${backend}-`));
  const schema = `chaos_${Date.now().toString(36)}`;
  const url = backend === 'sqlite' ? join(dir, 'turnkit.sqlite') : `${PG_URL}?schema=${schema}`;
  const store = await openStore(url);
  const log = join(dir, 'chaos.log');
  const taskQueue = `turnkit-chaos-bench-${backend}-${Date.now()}`;
  const client = new TurnKitClient({
    store,
    agents: new AgentRegistry(chaosFixture({ log, flavor: 'client' }).agents),
    temporal,
    taskQueue,
  });
  const sampler = backend === 'postgres' ? samplePg(new URL(PG_URL).pathname.slice(1)) : undefined;
  const env = {
    TURNKIT_TEST_DATABASE_URL: url,
    TURNKIT_TEST_LOG: log,
    TURNKIT_TEST_TASK_QUEUE: taskQueue,
    TURNKIT_CHAOS_MODEL_MS: String(MODEL_MS),
    ...bundles,
  };
  let spawned = 0;
  const spawnOne = () => spawnWorker({ ...env, TURNKIT_TEST_FLAVOR: `w${++spawned}` });
  const pool: Spawned[] = [spawnOne(), spawnOne()];
  const all = [...pool];
  const starts: number[] = [];
  await Promise.all(pool.map((w) => w.ready));

  let kills = 0;
  let killing = true;
  const killer = (async () => {
    while (killing) {
      await sleep(KILL_EVERY_MS);
      const live = pool.filter((w) => w.alive());
      if (!killing || live.length < 2) continue;
      const victim = live[Math.floor(Math.random() * live.length)]!;
      victim.child.kill('SIGKILL');
      kills += 1;
      pool.splice(pool.indexOf(victim), 1);
      const replacement = spawnOne();
      all.push(replacement);
      pool.push(replacement);
      starts.push(await replacement.ready);
    }
  })();

  const runs: RunHandle[] = [];
  let finished: TurnRecord[];
  try {
    for (let i = 0; i < RUNS; i++) {
      const agent = i % 2 === 0 ? 'looper' : 'fanout';
      runs.push(await client.run(agent, `Chaos run ${i} (${agent})`));
      if (i % WAVE === WAVE - 1) await sleep(PAUSE_MS);
    }
    finished = await Promise.all(runs.map((run) => run.result()));
  } finally {
    killing = false;
    await killer.catch(() => undefined);
    await Promise.all(all.map(stop));
  }
  const seconds = (performance.now() - started) / 1000;
  let failedTurns = 0;
  const errors = new Map<string, number>();
  for (const run of runs) {
    for (const turn of await store.listTurns({ rootTurnId: run.rootTurnId })) {
      if (turn.status === 'completed') continue;
      failedTurns += 1;
      const key = `${turn.status}: ${turn.error?.class ?? ''} ${turn.error?.message ?? ''}`.slice(0, 120);
      errors.set(key, (errors.get(key) ?? 0) + 1);
    }
  }
  const lines = existsSync(log) ? readFileSync(log, 'utf8').split('\n') : [];
  const retries = lines.filter((l) => l.startsWith('retry:')).length;
  const figures = {
    backend,
    runs: RUNS,
    completedRoots: finished.filter((t) => t.status === 'completed').length,
    failedRoots: finished.filter((t) => t.status !== 'completed').length,
    failedTurns,
    kills,
    retries,
    seconds: Math.round(seconds),
    workerStartMedianMs: Math.round(median(starts)),
    workerStartMaxMs: Math.round(Math.max(0, ...starts.filter(Number.isFinite))),
    load1AtStart: load,
    load1AtEnd: loadavg()[0],
    cpuSeconds: cpu(),
    ...(sampler ? { pg: await sampler.stop() } : {}),
    rootHistories: await historyBreakdown(temporal, runs),
    errors: Object.fromEntries(errors),
  };
  await store.close();
  if (backend === 'postgres') {
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
  return figures;
}

/**
 * Prebuilt workflow bundles for the workers, where this checkout has them (decision 34); an
 * older checkout's workers bundle at boot, as they did.
 */
async function prebuiltBundles(): Promise<Record<string, string>> {
  const worker: Record<string, unknown> = await import('../src/worker.js');
  const write = worker['writeTurnWorkflowBundles'];
  if (typeof write !== 'function') return {};
  const dir = mkdtempSync(join(tmpdir(), 'turnkit-chaos-bundles-'));
  await (write as (dir: string) => Promise<unknown>)(dir);
  return { TURNKIT_WORKFLOW_BUNDLES: dir };
}
const bundles = await prebuiltBundles();
console.log(
  `chaos: workers run ${compiled ? 'the compiled package' : 'from source (tsx)'} and ${bundles['TURNKIT_WORKFLOW_BUNDLES'] ? 'load prebuilt bundles' : 'bundle at boot'}; load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);

const connection = await Connection.connect({ address });
const temporal = new Client({ connection });
for (const backend of BACKENDS) {
  const figures = await chaos(backend, temporal);
  console.log(`chaos ${JSON.stringify(figures)}`);
}
await connection.close();
