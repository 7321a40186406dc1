import pg from 'pg';
import { StoreError } from '../errors.js';
import { MIGRATIONS } from './sql/schema.js';
import type { Row, SqlConnection, SqlDriver } from './sql/sql-store.js';
import { SqlStore } from './sql/sql-store.js';

/** `?` placeholders (the shared SQL) → `$1, $2, …`. */
function numbered(sql: string): string {
  let index = 0;
  return sql.replace(/\?/g, () => `$${++index}`);
}

const MIGRATION_LOCK = 'turnkit:migrations';

function describePgError(url: string, error: unknown): unknown {
  const code = (error as { code?: string })?.code ?? '';
  const message = error instanceof Error ? error.message : String(error);
  const where = (() => {
    try {
      const parsed = new URL(url);
      return `${parsed.hostname}:${parsed.port || 5432}/${parsed.pathname.slice(1)}`;
    } catch {
      return 'the configured server';
    }
  })();
  if (
    ['ECONNREFUSED', 'ENOTFOUND', 'ETIMEDOUT', 'ECONNRESET', '57P01', '57P03', '08006', '08001'].includes(
      code,
    )
  ) {
    return new StoreError(
      `PostgreSQL at ${where} is unreachable (${message}): start it or fix TURNKIT_DATABASE_URL`,
      { cause: error, retryable: true },
    );
  }
  if (code === '3D000')
    return new StoreError(`database ${where} does not exist: create it (createdb)`, { cause: error });
  if (code === '23505') return new StoreError(`unique constraint violated: ${message}`, { cause: error });
  if (code === '40P01')
    return new StoreError(`deadlock detected, the transaction was rolled back: ${message}`, {
      cause: error,
      retryable: true,
    });
  return error;
}

class PostgresDriver implements SqlDriver {
  readonly backend = 'postgres' as const;
  readonly #pool: pg.Pool;
  readonly #url: string;

  constructor(url: string, options: pg.PoolConfig = {}) {
    this.#url = url;
    this.#pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 10_000, ...options });
    // An idle client losing its server must not crash the process; the next query reports it.
    this.#pool.on('error', () => undefined);
  }

  async transaction<T>(fn: (connection: SqlConnection) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    const connection: SqlConnection = {
      all: async (sql, params) => (await client.query(numbered(sql), [...params])).rows as Row[],
    };
    try {
      await client.query('BEGIN');
      const result = await fn(connection);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  // Advisory transaction locks work for rows that do not exist yet and for the graph lock;
  // they are released at commit or rollback. Lock order is always graph → root → own.
  async lock(connection: SqlConnection, key: string): Promise<void> {
    await connection.all('SELECT pg_advisory_xact_lock(hashtext(?))', [`turnkit:${key}`]);
  }

  async query(sql: string, params: readonly unknown[]): Promise<Row[]> {
    return (await this.#pool.query(numbered(sql), [...params])).rows as Row[];
  }

  describeError(error: unknown): unknown {
    return describePgError(this.#url, error);
  }

  async migrate(): Promise<void> {
    try {
      await this.transaction(async (connection) => {
        await connection.all('SELECT pg_advisory_xact_lock(hashtext(?))', [MIGRATION_LOCK]);
        await connection.all(
          'CREATE TABLE IF NOT EXISTS turnkit_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
          [],
        );
        const applied = new Set(
          (await connection.all('SELECT version FROM turnkit_schema_migrations', [])).map((r) =>
            Number(r['version']),
          ),
        );
        for (const migration of MIGRATIONS) {
          if (applied.has(migration.version)) continue;
          for (const statement of migration.statements) await connection.all(statement, []);
          await connection.all(
            'INSERT INTO turnkit_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)',
            [migration.version, migration.name, new Date().toISOString()],
          );
        }
      });
    } catch (error) {
      await this.#pool.end().catch(() => undefined);
      throw describePgError(this.#url, error);
    }
  }

  close(): Promise<void> {
    return this.#pool.end();
  }
}

/** PostgreSQL for production: row-level CAS, advisory locks per conversation and for the wait graph. */
export class PostgresStore extends SqlStore {
  private constructor(driver: PostgresDriver) {
    super(driver);
  }

  static async open(url: string, options: pg.PoolConfig = {}): Promise<PostgresStore> {
    const driver = new PostgresDriver(url, options);
    await driver.migrate();
    return new PostgresStore(driver);
  }
}
