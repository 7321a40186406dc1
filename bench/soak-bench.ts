/**
 * `npm run bench:soak`: SOAK_TURNS (default 1,000) turns started at once, of mixed shape (every
 * other one a tool loop, `soak_loop`, the rest a fan-out to three sub-agents, `soak_fanout`;
 * bench/soak-agents.ts), on two worker processes (bench/soak-worker.ts), first on PostgreSQL,
 * then on SQLite (SOAK_BACKENDS=postgres,sqlite). Before each soak, the same number of floor
 * workflows (bench/workflows.ts) run at the same concurrency on the same two processes.
 *
 * Per backend: completed count, throughput (top-level turns/s from the first start to the
 * last end) and its ratio to the floor's, p50/p99 latency (start to result), worker RSS (both
 * processes, after a full GC) once the first half of the turns completed and once all did,
 * and on PostgreSQL the peak number of connections to the database (pg_stat_activity, sampled
 * every 50 ms, the sampler's own excluded). Merges its keys into bench-results.json.
 *
 * PostgreSQL: TURNKIT_BENCH_DATABASE_URL, else TURNKIT_TEST_DATABASE_URL; each run uses a
 * fresh schema, dropped at the end.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { openStore } from '../src/store/index.js';
import { samplePostgres } from './pg-sampler.js';
import { spawnBenchWorker, stopBenchWorkers } from './processes.js';
import { mergeBenchResults, percentile } from './results.js';
import { SOAK_SHAPES, soakFixture } from './soak-agents.js';
import type { SoakMemory } from './soak-worker.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const turns = Number(process.env['SOAK_TURNS'] ?? 1000);
const backends = (process.env['SOAK_BACKENDS'] ?? 'postgres,sqlite').split(',').map((b) => b.trim());
const pgBase =
  process.env['TURNKIT_BENCH_DATABASE_URL'] ??
  process.env['TURNKIT_TEST_DATABASE_URL'] ??
  'postgres://postgres@127.0.0.1:5432/turnkit_test';
const script = fileURLToPath(new URL('./soak-worker.ts', import.meta.url));
const WORKERS = 2;
const MB = 1024 * 1024;

const temporal = new Client({ connection: await Connection.connect({ address }) });
const { agents } = soakFixture();

type Memory = Omit<SoakMemory, 'type' | 'pid'>;

/** Asks every worker for its memory (after a GC) and sums the answers. */
function memoryOf(children: ChildProcess[]): Promise<Memory> {
  return Promise.all(
    children.map(
      (child) =>
        new Promise<SoakMemory>((resolve) => {
          const onMessage = (message: unknown) => {
            if ((message as SoakMemory).type !== 'memory') return;
            child.off('message', onMessage);
            resolve(message as SoakMemory);
          };
          child.on('message', onMessage);
          child.send({ type: 'memory' });
        }),
    ),
  ).then((all) => {
    const sum = (key: keyof Memory) => all.reduce((total, m) => total + m[key], 0);
    return {
      rss: sum('rss'),
      heapUsed: sum('heapUsed'),
      heapTotal: sum('heapTotal'),
      external: sum('external'),
    };
  });
}

/** Samples the number of connections to the database until stopped; `stop()` gives the peak. */
function connectionSampler(url: string): { stop(): Promise<number> } {
  let peak = 0;
  const sampler = samplePostgres(url, 50, async (client) => {
    const { rows } = await client.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    peak = Math.max(peak, rows[0]!.n);
  });
  return { stop: () => sampler.stop().then(() => peak) };
}

/** Runs `count` calls of `fn` at once; resolves with the wall time and each call's latency. */
async function allAtOnce(
  count: number,
  fn: (i: number) => Promise<void>,
  onDone: (done: number) => Promise<void> | void = () => undefined,
): Promise<{ seconds: number; latencies: number[] }> {
  const latencies: number[] = [];
  let done = 0;
  const start = performance.now();
  const checkpoints: Promise<void>[] = [];
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const begun = performance.now();
      await fn(i);
      latencies.push(performance.now() - begun);
      checkpoints.push(Promise.resolve(onDone(++done)));
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  await Promise.all(checkpoints);
  return { seconds, latencies };
}

async function soak(backend: string): Promise<Record<string, number>> {
  const stamp = Date.now();
  let url: string;
  let cleanup: () => Promise<void>;
  if (backend === 'postgres') {
    const schema = `turnkit_soak_${stamp}`;
    url = `${pgBase}${pgBase.includes('?') ? '&' : '?'}schema=${schema}`;
    cleanup = async () => {
      const admin = new pg.Client({ connectionString: pgBase });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    };
  } else if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'turnkit-soak-'));
    url = join(dir, 'soak.sqlite');
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  } else {
    throw new Error(`soak bench: unknown backend ${backend} (postgres or sqlite)`);
  }
  const store = await openStore(url);
  const taskQueue = `turnkit-soak-${backend}-${stamp}`;
  const floorQueue = `${taskQueue}-floor`;
  const client = new TurnKitClient({ store, agents: new AgentRegistry(agents), temporal, taskQueue });
  const children = await Promise.all(
    Array.from({ length: WORKERS }, () =>
      spawnBenchWorker(
        script,
        {
          SOAK_DATABASE_URL: url,
          SOAK_TASK_QUEUE: taskQueue,
          SOAK_FLOOR_TASK_QUEUE: floorQueue,
          NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --expose-gc`.trim(),
        },
        'soak-worker ready',
      ),
    ),
  );
  const sampler = backend === 'postgres' ? connectionSampler(pgBase) : undefined;
  try {
    const floor = (i: number) =>
      temporal.workflow.execute('floorWorkflow', { taskQueue: floorQueue, workflowId: `${floorQueue}-${i}` });
    let completed = 0;
    const turn = async (i: number) => {
      const run = await client.run(SOAK_SHAPES[i % SOAK_SHAPES.length]!, `soak turn ${i}`);
      const record = await run.result();
      if (record.status === 'completed') completed++;
      else
        console.warn(`soak ${backend}: turn ${run.turnId} ended ${record.status}: ${record.error?.message}`);
    };
    // Warm up both workflow caches and the bundles' first runs.
    await allAtOnce(4 * WORKERS, floor);
    await allAtOnce(4 * WORKERS, turn);
    completed = 0;

    const floorRun = await allAtOnce(turns, floor);
    const memory: Memory[] = [];
    const half = Math.ceil(turns / 2);
    const soakRun = await allAtOnce(turns, turn, async (done) => {
      if (done === half || done === turns) memory.push(await memoryOf(children));
    });
    const peakConnections = await sampler?.stop();

    const throughput = turns / soakRun.seconds;
    const floorThroughput = turns / floorRun.seconds;
    const [first, second] = memory as [Memory, Memory];
    const b = backend;
    return {
      [`soak_completed_${b}`]: completed,
      [`soak_throughput_${b}`]: throughput,
      [`soak_floor_throughput_${b}`]: floorThroughput,
      [`soak_vs_floor_throughput_${b}`]: throughput / floorThroughput,
      [`soak_p50_ms_${b}`]: percentile(soakRun.latencies, 50),
      [`soak_p99_ms_${b}`]: percentile(soakRun.latencies, 99),
      [`soak_floor_p50_ms_${b}`]: percentile(floorRun.latencies, 50),
      [`soak_rss_first_half_mb_${b}`]: first.rss / MB,
      [`soak_rss_second_half_mb_${b}`]: second.rss / MB,
      [`soak_rss_growth_${b}`]: second.rss / first.rss,
      [`soak_heap_growth_${b}`]: second.heapUsed / first.heapUsed,
      // Where the RSS is: V8's reserved heap, buffers, and the rest (native: the Rust core, code).
      [`soak_heap_total_growth_${b}`]: second.heapTotal / first.heapTotal,
      [`soak_external_growth_${b}`]: second.external / first.external,
      [`soak_native_first_half_mb_${b}`]: (first.rss - first.heapTotal - first.external) / MB,
      [`soak_native_second_half_mb_${b}`]: (second.rss - second.heapTotal - second.external) / MB,
      ...(peakConnections === undefined ? {} : { soak_pg_peak_connections: peakConnections }),
    };
  } finally {
    await sampler?.stop();
    await stopBenchWorkers(children);
    await store.close();
    await cleanup();
  }
}

const started = Date.now();
const results: Record<string, number> = {};
for (const backend of backends) {
  console.log(`soak: ${turns} turns on ${backend}, ${WORKERS} worker processes…`);
  Object.assign(results, await soak(backend));
}
const both = (key: string, pick: (a: number, b: number) => number) => {
  const pair = [results[`${key}_postgres`], results[`${key}_sqlite`]];
  if (pair.every((v) => v !== undefined)) results[key] = pick(pair[0]!, pair[1]!);
};
both('soak_completed', Math.min);
both('soak_rss_growth', Math.max);
if (results['soak_throughput_postgres'] && results['soak_throughput_sqlite']) {
  results['soak_pg_vs_sqlite_throughput'] =
    results['soak_throughput_postgres'] / results['soak_throughput_sqlite'];
}

const targets: Record<string, [string, number]> = {
  soak_completed: ['>=', turns],
  soak_completed_postgres: ['>=', turns],
  soak_completed_sqlite: ['>=', turns],
  soak_pg_vs_sqlite_throughput: ['>=', 1.0],
  soak_rss_growth: ['<=', 1.1],
};
console.log(
  `\nTurnKit soak (${turns} turns at once, ${WORKERS} workers, ${((Date.now() - started) / 1000).toFixed(0)} s)\n`,
);
for (const [key, value] of Object.entries(results)) {
  const target = targets[key];
  const verdict = target
    ? `${target[0]} ${target[1]} ${(target[0] === '<=' ? value <= target[1] : value >= target[1]) ? 'ok' : 'MISSED'}`
    : '';
  console.log(key.padEnd(36), value.toFixed(3).padStart(12), ` ${verdict}`);
}
mergeBenchResults({ soak_measuredAt: new Date().toISOString(), soak_turns: turns, ...results });
await temporal.connection.close();
