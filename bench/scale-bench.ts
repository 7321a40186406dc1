/**
 * `npm run bench:scale` (issue 44): what a read costs in a large store against a small one, on
 * SQLite and PostgreSQL (SCALE_BACKENDS, default sqlite,postgres). Each backend gets two stores
 * seeded by bulk SQL (bench/scale-seed.ts): a small one of 10,000 turns and a large one of
 * BENCH_SCALE_LARGE turns (default 1,000,000). Every read goes through a public API, so the
 * figures measure whatever the store and console do after a change:
 *
 * - `scale_console_turns_ratio`: console `GET /api/turns?limit=20`, large store over small,
 *   served by `createConsoleHandler` in a process of its own (bench/scale-console-server.ts);
 *   `scale_console_rss_mb`: that process's peak RSS growth while it serves the large store's
 *   pages (VmHWM after them minus VmRSS before the first).
 * - `scale_approvals_ratio`: `GET /api/approvals`, 100,000 unfinished turns (or a tenth of a
 *   smaller large store) over 100, 20 calls awaiting approval in each, on the newest unfinished
 *   turns (where new calls arrive);
 *   `scale_approvals_http_status`: the large store's answer (200 wanted).
 * - `scale_messages_ratio`: `client.messagesAfter(conversation, 0, { limit: 100 })` in a
 *   conversation of 100,000 messages over one of 1,000.
 * - `scale_input_status_ratio`: `client.inputStatus` of a queued post in a conversation of
 *   20,000 turns over one of 10.
 *
 * Each figure is the median of SCALE_REPEATS (default 15) calls after one warm-up, the small
 * store's and the large one's calls alternating (both consoles run at once), so a load that
 * comes and goes on a shared machine weighs on both sides of a ratio alike. Keys end in
 * `_sqlite` and `_pg`, and are merged into bench-results.json.
 *
 * Hook: a module listed in SCALE_EXTRA (comma-separated paths, default none) exports
 * `measureScale(context: ScaleContext)` and returns keys of its own. The budget and
 * conversation-turn ratios come from bench/scale-store-bench.ts, which bench:scale runs next.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import type { PostRequest } from '../src/contract/post-request.js';
import { appendPostMessage, recordPost } from '../src/engine/lane/post-record.js';
import { openStore } from '../src/store/index.js';
import type { Store } from '../src/store/types.js';
import { spawnBenchWorker, stopBenchWorkers } from './processes.js';
import { mergeBenchResults, timed } from './results.js';
import type { ScaleBackend, TurnSeed } from './scale-seed.js';
import { seedApprovals, seedMessages, seedTarget, seedTurns } from './scale-seed.js';

const SMALL = 10_000;
const LARGE = Number(process.env['BENCH_SCALE_LARGE'] ?? 1_000_000);
const REPEATS = Number(process.env['SCALE_REPEATS'] ?? 15);
const backends = (process.env['SCALE_BACKENDS'] ?? 'sqlite,postgres').split(',').map((b) => b.trim());
const pgBase =
  process.env['TURNKIT_BENCH_DATABASE_URL'] ??
  process.env['TURNKIT_TEST_DATABASE_URL'] ??
  'postgres://postgres@127.0.0.1:5432/turnkit_test';
const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const consoleServer = fileURLToPath(new URL('./scale-console-server.ts', import.meta.url));
const APPROVALS = 20;
const MESSAGES_LARGE = 100_000;
const MESSAGES_SMALL = 1_000;
const LANE_LARGE = 20_000;
const LANE_SMALL = 10;

/** What a SCALE_EXTRA module's `measureScale` gets. */
export interface ScaleContext {
  backend: ScaleBackend;
  /** `_sqlite` or `_pg`: the suffix of every key. */
  suffix: string;
  small: { url: string; turns: number };
  large: { url: string; turns: number };
  temporal: Client;
  repeats: number;
}

interface ScaleStore {
  url: string;
  schema?: string;
  drop(): Promise<void>;
}

function newStore(backend: ScaleBackend, name: string): ScaleStore {
  if (backend === 'postgres') {
    const schema = `turnkit_scale_${name}_${Date.now()}`;
    return {
      url: `${pgBase}${pgBase.includes('?') ? '&' : '?'}schema=${schema}`,
      schema,
      async drop() {
        const admin = new pg.Client({ connectionString: pgBase });
        await admin.connect();
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), `turnkit-scale-${name}-`));
  return {
    url: join(dir, 'scale.sqlite'),
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * The median of REPEATS timed calls of each of `small` and `large`, after one warm-up of each,
 * the calls alternating: whatever else loads the shared machine weighs on both alike.
 */
async function measurePair(
  small: () => Promise<unknown>,
  large: () => Promise<unknown>,
): Promise<{ small: number; large: number }> {
  await small();
  await large();
  const times = { small: [] as number[], large: [] as number[] };
  for (let i = 0; i < REPEATS; i++) {
    times.small.push(await timed(small));
    times.large.push(await timed(large));
  }
  return { small: median(times.small), large: median(times.large) };
}

const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/** The migrated schema, then the rows by bulk SQL. */
async function seed(
  backend: ScaleBackend,
  store: ScaleStore,
  fill: (target: Awaited<ReturnType<typeof seedTarget>>) => Promise<void>,
) {
  await (await openStore(store.url)).close();
  const target = await seedTarget(backend, backend === 'postgres' ? pgBase : store.url, store.schema);
  try {
    await fill(target);
  } finally {
    await target.close();
  }
}

/** A queued post in a busy conversation, written as the lane writes one. */
async function queuedPost(store: Store, conversationId: string): Promise<string> {
  await store.createTurn({
    conversationId,
    agentName: 'agent_0',
    status: 'running',
    submittedAt: new Date().toISOString(),
  });
  const request: PostRequest = {
    requestId: `queued-${conversationId}`,
    text: 'one more thing',
    principal: null,
    policy: 'queue',
    media: [],
    signature: null,
  };
  await store.atomic(conversationId, async () => {
    const message = await appendPostMessage(store, conversationId, request);
    await recordPost(store, conversationId, { request, disposition: 'queued', message });
  });
  return request.requestId;
}

function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

interface ConsoleFigures {
  turnsMs: { small: number; large: number };
  rssGrowthMb: number;
  approvalsMs: { small: number; large: number } | null;
  approvalsStatus: number;
}

/** A console over `url` in a process of its own; `get` answers a path's HTTP status. */
async function consoleProcess(
  url: string,
): Promise<{ child: ChildProcess; get(path: string): Promise<number> }> {
  let port = 0;
  const child: ChildProcess = await spawnBenchWorker(
    consoleServer,
    { SCALE_STORE_URL: url },
    'listening',
    (message) => {
      port = (message as { port: number }).port;
    },
  );
  while (port === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  return {
    child,
    async get(path) {
      const response = await fetch(`http://127.0.0.1:${port}${path}`);
      await response.arrayBuffer();
      return response.status;
    },
  };
}

/**
 * The consoles over the small and the large store, each in its own process, asked in turn:
 * their turns pages, the large one's RSS growth, their approvals.
 */
async function consoleFigures(smallUrl: string, largeUrl: string): Promise<ConsoleFigures> {
  const small = await consoleProcess(smallUrl);
  const large = await consoleProcess(largeUrl);
  const turns = (server: typeof small) => async () => {
    const status = await server.get('/api/turns?limit=20');
    if (status !== 200) throw new Error(`GET /api/turns answered ${status}`);
  };
  try {
    const before = memoryOf(large.child.pid!);
    const turnsMs = await measurePair(turns(small), turns(large));
    const after = memoryOf(large.child.pid!);
    let approvalsStatus = 200;
    const approvalsMs = await measurePair(
      () => small.get('/api/approvals'),
      async () => {
        approvalsStatus = await large.get('/api/approvals');
      },
    );
    return {
      turnsMs,
      rssGrowthMb: after.peakMb - before.rssMb,
      approvalsMs: approvalsStatus === 200 ? approvalsMs : null,
      approvalsStatus,
    };
  } finally {
    await stopBenchWorkers([small.child, large.child]);
  }
}

async function extraMeasures(context: ScaleContext): Promise<Record<string, number>> {
  const listed = process.env['SCALE_EXTRA']?.split(',').filter(Boolean) ?? [];
  const keys: Record<string, number> = {};
  for (const path of listed) {
    const module = (await import(pathToFileURL(path).href)) as {
      measureScale?: (context: ScaleContext) => Promise<Record<string, number>>;
    };
    if (!module.measureScale) throw new Error(`${path} exports no measureScale(context)`);
    Object.assign(keys, await module.measureScale(context));
  }
  return keys;
}

async function scale(backend: ScaleBackend, temporal: Client): Promise<Record<string, unknown>> {
  const suffix = backend === 'postgres' ? '_pg' : '_sqlite';
  const base = Math.floor(Date.now() / 1000) - 2 * (LARGE + SMALL);
  const openLarge = Math.min(100_000, Math.floor(LARGE / 10));
  const smallSeed: TurnSeed = {
    prefix: 'ts',
    turns: SMALL,
    perConversation: 10,
    unfinishedEvery: SMALL / 100,
    base,
  };
  const largeSeed: TurnSeed = {
    prefix: 'tl',
    turns: LARGE,
    perConversation: 10,
    unfinishedEvery: Math.max(1, Math.floor(LARGE / openLarge)),
    base,
  };
  const small = newStore(backend, 'small');
  const large = newStore(backend, 'large');
  try {
    let started = performance.now();
    await seed(backend, small, async (t) => {
      await seedTurns(t, smallSeed);
      await seedApprovals(t, smallSeed, APPROVALS);
    });
    await seed(backend, large, async (t) => {
      await seedTurns(t, largeSeed);
      await seedApprovals(t, largeSeed, APPROVALS);
      await seedMessages(t, 'conv_msgs_large', MESSAGES_LARGE, base);
      await seedMessages(t, 'conv_msgs_small', MESSAGES_SMALL, base);
      await seedTurns(t, {
        prefix: 'lanel',
        turns: LANE_LARGE,
        perConversation: LANE_LARGE,
        unfinishedEvery: 0,
        base,
      });
      await seedTurns(t, {
        prefix: 'lanes',
        turns: LANE_SMALL,
        perConversation: LANE_SMALL,
        unfinishedEvery: 0,
        base,
      });
    });
    const seedSeconds = (performance.now() - started) / 1000;
    console.log(`${backend}: seeded ${SMALL} and ${LARGE} turns in ${seedSeconds.toFixed(0)} s`);

    started = performance.now();
    const store = await openStore(large.url);
    const laneLarge = 'lanelc_000000000000000000000000';
    const laneSmall = 'lanesc_000000000000000000000000';
    const requestLarge = await queuedPost(store, laneLarge);
    const requestSmall = await queuedPost(store, laneSmall);
    const client = new TurnKitClient({
      store,
      agents: new AgentRegistry(),
      temporal,
      taskQueue: 'turnkit-scale-bench',
    });
    const messages = await measurePair(
      () => client.messagesAfter('conv_msgs_small', 0, { limit: 100 }),
      () => client.messagesAfter('conv_msgs_large', 0, { limit: 100 }),
    );
    const status = await measurePair(
      () => client.inputStatus(laneSmall, requestSmall),
      async () => {
        if ((await client.inputStatus(laneLarge, requestLarge))?.disposition !== 'queued')
          throw new Error('inputStatus did not find the queued post');
      },
    );
    await store.close();

    const consoles = await consoleFigures(small.url, large.url);
    const keys: Record<string, unknown> = {
      [`scale_large_turns${suffix}`]: LARGE + LANE_LARGE + LANE_SMALL + 2,
      [`scale_seed_seconds${suffix}`]: round(seedSeconds, 1),
      [`scale_console_turns_ms${suffix}`]: round(consoles.turnsMs.large),
      [`scale_console_turns_ratio${suffix}`]: round(consoles.turnsMs.large / consoles.turnsMs.small),
      [`scale_console_rss_mb${suffix}`]: round(consoles.rssGrowthMb, 1),
      [`scale_approvals_open_turns${suffix}`]: openLarge,
      [`scale_approvals_http_status${suffix}`]: consoles.approvalsStatus,
      [`scale_approvals_ratio${suffix}`]: consoles.approvalsMs
        ? round(consoles.approvalsMs.large / consoles.approvalsMs.small)
        : null,
      [`scale_messages_ratio${suffix}`]: round(messages.large / messages.small),
      [`scale_input_status_ratio${suffix}`]: round(status.large / status.small),
      ...(await extraMeasures({
        backend,
        suffix,
        small: { url: small.url, turns: SMALL },
        large: { url: large.url, turns: LARGE },
        temporal,
        repeats: REPEATS,
      })),
    };
    console.log(`${backend}: measured in ${((performance.now() - started) / 1000).toFixed(0)} s`, keys);
    return keys;
  } finally {
    await small.drop();
    await large.drop();
  }
}

const connection = await Connection.connect({ address });
const temporal = new Client({ connection });
const results: Record<string, unknown> = {};
try {
  for (const backend of backends) {
    if (backend !== 'sqlite' && backend !== 'postgres')
      throw new Error(`bench:scale: unknown backend ${backend} (sqlite or postgres)`);
    Object.assign(results, await scale(backend, temporal));
  }
} finally {
  await connection.close();
}
mergeBenchResults(results);
