import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PostgresStore } from '../../src/store/postgres-store.js';

export const PG_TEST_URL =
  process.env['TURNKIT_TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/turnkit_test';

/** Whether PostgreSQL answers; creates the test database when the server has none. */
export async function postgresAvailable(): Promise<boolean> {
  const url = new URL(PG_TEST_URL);
  const database = url.pathname.slice(1);
  url.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 3_000 });
  try {
    await admin.connect();
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0)
      await admin.query(`CREATE DATABASE "${database.replace(/"/g, '')}"`).catch(() => undefined);
    return true;
  } catch {
    return false;
  } finally {
    await admin.end().catch(() => undefined);
  }
}

/**
 * In CI the PostgreSQL suites never skip: an unreachable server fails them. Elsewhere a
 * missing server skips only those suites, loudly.
 */
export async function requirePostgres(): Promise<boolean> {
  const available = await postgresAvailable();
  if (!available && process.env['CI']) {
    throw new Error(`PostgreSQL is unreachable at ${PG_TEST_URL}; CI never skips the PostgreSQL suites`);
  }
  if (!available) {
    console.warn(
      `\n!!! PostgreSQL suites SKIPPED: nothing answers at ${PG_TEST_URL}.\n` +
        '!!! Start PostgreSQL (or set TURNKIT_TEST_DATABASE_URL) and run npm test again.\n',
    );
  }
  return available;
}

/** A PostgresStore in a fresh schema of its own, so parallel test files never share rows. */
export async function openPgTestStore(): Promise<{
  store: PostgresStore;
  schema: string;
  drop(): Promise<void>;
}> {
  const schema = `turnkit_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_TEST_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const store = await PostgresStore.open(PG_TEST_URL, { options: `-c search_path=${schema}` });
  return {
    store,
    schema,
    async drop() {
      await store.close();
      const client = new pg.Client({ connectionString: PG_TEST_URL });
      await client.connect();
      await client.query(`DROP SCHEMA ${schema} CASCADE`);
      await client.end();
    },
  };
}
