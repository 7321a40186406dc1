/**
 * What retention keeps and for how long (decision 64): the lifetime of each row kind that may
 * leave the store. Durations are milliseconds; a kind left out is kept forever, except stream
 * parts, which only a live stream needs.
 */
import { ArgumentError } from '../../errors.js';

export interface RetentionPolicy {
  /**
   * Stream parts of a run leave this long after every turn of its tree ended, so a client
   * reconnecting within the window still resumes. Default one hour; `null` keeps them.
   */
  streamPartsGraceMs?: number | null;
  /** Events of a finished turn leave once they are this old. Default: kept. */
  eventsMaxAgeMs?: number | null;
  /** Whole finished conversations leave after this long without activity. Default: kept. */
  conversationsMaxAgeMs?: number | null;
  /** Only the newest N conversations (sub-agents' not counted) are kept. Default: all. */
  conversationsKeepLatest?: number | null;
  /** Rows one transaction deletes at most (default 500): SQLite's write lock stays short. */
  batchSize?: number;
  /**
   * PostgreSQL: after a pass that deleted rows, `VACUUM (ANALYZE)` each table it deleted
   * from, so their space is reused at once, not when autovacuum next passes (for a server
   * where autovacuum is off or lags behind the deletes). Default false. SQLite reuses the
   * pages it frees by itself: ignored there.
   */
  vacuum?: boolean;
}

/** A policy with its defaults applied and every value checked. */
interface ResolvedRetentionPolicy {
  streamPartsGraceMs: number | null;
  eventsMaxAgeMs: number | null;
  conversationsMaxAgeMs: number | null;
  conversationsKeepLatest: number | null;
  batchSize: number;
  vacuum: boolean;
}

const DEFAULT_STREAM_PARTS_GRACE_MS = 60 * 60 * 1000;
const DEFAULT_RETENTION_BATCH_SIZE = 500;
/** Above this, one batch could hold SQLite's write lock for more than a few tens of milliseconds. */
const MAX_BATCH_SIZE = 10_000;

function duration(name: string, value: number | null | undefined, fallback: number | null): number | null {
  if (value === undefined) return fallback;
  if (value === null) return null;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
    throw new ArgumentError(
      `retention ${name} must be a duration in milliseconds (>= 0), got ${JSON.stringify(value)}`,
    );
  return value;
}

function count(name: string, value: number | null | undefined, min: number, max: number): number | null {
  if (value === undefined || value === null) return null;
  if (!Number.isSafeInteger(value) || value < min || value > max)
    throw new ArgumentError(
      `retention ${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`,
    );
  return value;
}

function flag(name: string, value: boolean | undefined): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean')
    throw new ArgumentError(`retention ${name} must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

export function resolveRetentionPolicy(policy: RetentionPolicy = {}): ResolvedRetentionPolicy {
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy))
    throw new ArgumentError('a retention policy must be an object');
  return {
    streamPartsGraceMs: duration(
      'streamPartsGraceMs',
      policy.streamPartsGraceMs,
      DEFAULT_STREAM_PARTS_GRACE_MS,
    ),
    eventsMaxAgeMs: duration('eventsMaxAgeMs', policy.eventsMaxAgeMs, null),
    conversationsMaxAgeMs: duration('conversationsMaxAgeMs', policy.conversationsMaxAgeMs, null),
    conversationsKeepLatest: count(
      'conversationsKeepLatest',
      policy.conversationsKeepLatest,
      0,
      Number.MAX_SAFE_INTEGER,
    ),
    batchSize: count('batchSize', policy.batchSize, 1, MAX_BATCH_SIZE) ?? DEFAULT_RETENTION_BATCH_SIZE,
    vacuum: flag('vacuum', policy.vacuum),
  };
}
