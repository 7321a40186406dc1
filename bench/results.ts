/**
 * What the benchmarks share: timing, percentiles, merging their keys into bench-results.json,
 * and a store that counts the message rows it reads.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Store } from '../src/store/types.js';

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** How long `fn` takes, in milliseconds. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

/** Runs `fn` `total` times, `width` at a time; resolves with the calls per second. */
export async function throughput(
  total: number,
  width: number,
  fn: (i: number) => Promise<unknown>,
): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < total) await fn(next++);
    }),
  );
  return (total / (performance.now() - start)) * 1000;
}

/**
 * CPU time spent while `fn` runs: this process's (the client and the worker, all threads; on
 * Linux also by thread kind) and, when its pid is known and /proc can be read, the Temporal
 * server's; all in milliseconds.
 */
export async function cpuDuring<T>(
  serverPid: number | null,
  fn: () => Promise<T>,
): Promise<{
  value: T;
  ownMs: number;
  byThread: Record<ThreadKind, number> | null;
  serverMs: number | null;
  wallMs: number;
}> {
  const own = process.cpuUsage();
  const threads = threadCpuMs();
  const server = serverPid === null ? null : processCpuMs(serverPid);
  const start = performance.now();
  const value = await fn();
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(own);
  const threadsAfter = threadCpuMs();
  const serverAfter = serverPid === null ? null : processCpuMs(serverPid);
  return {
    value,
    ownMs: (used.user + used.system) / 1000,
    byThread:
      threads && threadsAfter
        ? (Object.fromEntries(
            Object.entries(threadsAfter).map(([kind, ms]) => [kind, ms - threads[kind as ThreadKind]]),
          ) as Record<ThreadKind, number>)
        : null,
    serverMs: server === null || serverAfter === null ? null : serverAfter - server,
    wallMs,
  };
}

/**
 * This process's threads, by what they run: `main` (activities, the client, the SDK's
 * plumbing), `workflow` (the SDK's workflow threads), `core` (the SDK's Rust runtime) and
 * `v8` (V8's helpers: the garbage collector, the compiler), the rest as `other`.
 */
export type ThreadKind = 'main' | 'workflow' | 'core' | 'v8' | 'other';

function threadKind(tid: string, name: string): ThreadKind {
  if (tid === String(process.pid)) return 'main';
  if (name === 'WorkerThread') return 'workflow';
  if (name.startsWith('tokio-') || name.startsWith('workflow-proces')) return 'core';
  if (name.startsWith('V8') || name.startsWith('v8:')) return 'v8';
  return 'other';
}

/** CPU ms of this process's threads by kind, from /proc (Linux, 100 ticks a second); else null. */
function threadCpuMs(): Record<ThreadKind, number> | null {
  try {
    const total: Record<ThreadKind, number> = { main: 0, workflow: 0, core: 0, v8: 0, other: 0 };
    for (const tid of readdirSync('/proc/self/task')) {
      const { name, cpuMs } = procStat(`/proc/self/task/${tid}/stat`);
      total[threadKind(tid, name)] += cpuMs;
    }
    return total;
  } catch {
    return null;
  }
}

/** A process's user + system CPU time in ms from /proc (Linux, 100 ticks per second), or null. */
function processCpuMs(pid: number): number | null {
  try {
    return procStat(`/proc/${pid}/stat`).cpuMs;
  } catch {
    return null;
  }
}

/** A /proc `stat` file's name (comm) and user + system CPU in ms (100 ticks a second). */
function procStat(path: string): { name: string; cpuMs: number } {
  const stat = readFileSync(path, 'utf8');
  const close = stat.lastIndexOf(')');
  const fields = stat.slice(close + 2).split(' ');
  return {
    name: stat.slice(stat.indexOf('(') + 1, close),
    cpuMs: (Number(fields[11]) + Number(fields[12])) * 10,
  };
}

/**
 * The local dev server's pid, for its CPU time: TEMPORAL_SERVER_PID, or the pid file
 * `./temporal-dev.sh` keeps for the address's port. Null for a remote server.
 */
export function devServerPid(address: string): number | null {
  const fromEnv = Number(process.env['TEMPORAL_SERVER_PID']);
  if (Number.isInteger(fromEnv) && fromEnv > 0) return fromEnv;
  const [host, port] = address.split(':');
  if (host !== '127.0.0.1' && host !== 'localhost') return null;
  const file = port === '7233' ? '.temporal/server.pid' : `.temporal/server-${port}.pid`;
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 && processCpuMs(pid) !== null ? pid : null;
  } catch {
    return null;
  }
}

/** Writes `keys` into bench-results.json, keeping whatever the other benchmarks wrote there. */
export function mergeBenchResults(keys: Record<string, unknown>): void {
  let existing: Record<string, unknown> = {};
  if (existsSync('bench-results.json')) {
    try {
      existing = JSON.parse(readFileSync('bench-results.json', 'utf8')) as Record<string, unknown>;
    } catch {
      existing = {};
    }
  }
  writeFileSync('bench-results.json', `${JSON.stringify({ ...existing, ...keys }, null, 2)}\n`);
  console.log('\nmerged into bench-results.json');
}

/** The store, counting the message rows its `listMessages` returns: what a reader pulled. */
export function countingMessageReads(store: Store): { store: Store; rows: () => number } {
  let rows = 0;
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      if (property !== 'listMessages') {
        const value = Reflect.get(target, property, receiver) as unknown;
        // The store's private fields need the store itself as `this`.
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      }
      return async (...args: Parameters<Store['listMessages']>) => {
        const found = await target.listMessages(...args);
        rows += found.length;
        return found;
      };
    },
  });
  return { store: counted, rows: () => rows };
}
