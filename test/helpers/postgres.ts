/**
 * PostgreSQL for tests. `TURNKIT_TEST_DATABASE_URL` (default
 * postgres://postgres@127.0.0.1:5432/turnkit_test) names the server; the database is created
 * when missing. Every store a test opens lives in a fresh schema of its own, so test files
 * running in parallel never share rows, and the schema is dropped afterwards.
 *
 * In CI (`CI` set) PostgreSQL suites never skip: an unreachable server fails them. Elsewhere
 * an unreachable server skips only those suites, with a loud warning saying how to run them.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, it } from 'vitest';
import { PostgresStore } from '../../src/store/postgres-store.js';

export function pgTestUrl(): string {
  return process.env['TURNKIT_TEST_DATABASE_URL'] || 'postgres://postgres@127.0.0.1:5432/turnkit_test';
}

/** Why PostgreSQL cannot be used, or null when it can (the test database exists afterwards). */
async function probe(): Promise<string | null> {
  const url = new URL(pgTestUrl());
  const database = decodeURIComponent(url.pathname.slice(1)) || 'postgres';
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 3_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) {
      // Parallel test files may race to create it; losing that race is fine.
      await client
        .query(`CREATE DATABASE "${database.replace(/"/g, '""')}"`)
        .catch((error: { code?: string }) => {
          if (error.code !== '42P04' && error.code !== '23505') throw error;
        });
    }
    return null;
  } catch (error) {
    return error instanceof Error
      ? error.message || String((error as { code?: string }).code)
      : String(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}

const problem = await probe();

/** Whether the PostgreSQL test server answers (probed once per test file). */
export const postgresAvailable = problem === null;

function where(): string {
  const url = new URL(pgTestUrl());
  return `${url.hostname}:${url.port || 5432}${url.pathname}`;
}

let warned = false;

/**
 * `describe` for a suite that needs PostgreSQL. Unreachable server: in CI the suite fails
 * with a test saying so; elsewhere it is skipped with a warning.
 */
export function describePostgres(name: string, fn: () => void): void {
  if (postgresAvailable) {
    describe(name, fn);
    return;
  }
  const message = `PostgreSQL is unreachable at ${where()} (${problem})`;
  if (process.env['CI']) {
    describe(name, () => {
      it('needs a reachable PostgreSQL (CI never skips the PostgreSQL suites)', () => {
        throw new Error(`${message}: start it (scripts/services.sh) or set TURNKIT_TEST_DATABASE_URL`);
      });
    });
    return;
  }
  if (!warned) {
    warned = true;
    console.warn(
      `\n!!! PostgreSQL suites SKIPPED: ${message}.\n` +
        '!!! Start PostgreSQL on 127.0.0.1:5432 (trust auth, user postgres) or set TURNKIT_TEST_DATABASE_URL,\n' +
        '!!! then run the tests again. In CI (CI=true) these suites fail instead of skipping.\n',
    );
  }
  describe.skip(name, fn);
}

/** A fresh schema name, unique per call. */
export function pgTestSchema(): string {
  return `turnkit_test_${process.pid}_${randomBytes(4).toString('hex')}`;
}

/** Drops a test schema and everything in it. */
export async function dropPgTestSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: pgTestUrl() });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema.replace(/"/g, '""')}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** A migrated PostgresStore in a fresh schema; `drop` closes it and drops the schema. */
export async function openPgTestStore(schema = pgTestSchema()): Promise<{
  store: PostgresStore;
  schema: string;
  drop(): Promise<void>;
}> {
  const store = await PostgresStore.open(pgTestUrl(), { schema });
  return {
    store,
    schema,
    async drop() {
      await store.close();
      await dropPgTestSchema(schema);
    },
  };
}
