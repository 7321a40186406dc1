import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { StoreError } from '../errors.js';
import { MIGRATIONS } from './sql/schema.js';
import type { Row, SqlConnection, SqlDriver } from './sql/sql-store.js';
import { SqlStore } from './sql/sql-store.js';

/** A promise-chain mutex: one transaction at a time on the single connection. */
class Mutex {
  #tail: Promise<void> = Promise.resolve();

  async run<T>(fn: () => Promise<T>): Promise<T> {
    const previous = this.#tail;
    let release: () => void = () => undefined;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

function describeSqliteError(path: string, error: unknown): unknown {
  const code = (error as { code?: string })?.code ?? '';
  const message = error instanceof Error ? error.message : String(error);
  if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') {
    return new StoreError(
      `${path} is not a usable SQLite database (${message}): move it away or point TURNKIT_DATABASE_URL at another file`,
      { cause: error },
    );
  }
  if (code === 'SQLITE_READONLY' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_PERM') {
    return new StoreError(
      `cannot write the SQLite database ${path} (${message}): check that the file and its directory are writable`,
      { cause: error },
    );
  }
  if (code === 'SQLITE_BUSY') {
    return new StoreError(`SQLite database ${path} stayed locked by another process: ${message}`, {
      cause: error,
      retryable: true,
    });
  }
  if (code.startsWith('SQLITE_CONSTRAINT'))
    return new StoreError(`constraint violated in ${path}: ${message}`, { cause: error });
  return error;
}

class SqliteDriver implements SqlDriver {
  readonly backend: 'sqlite' | 'memory';
  readonly #db: Database.Database;
  readonly #mutex = new Mutex();
  readonly #path: string;

  constructor(path: string, backend: 'sqlite' | 'memory') {
    this.backend = backend;
    this.#path = path;
    this.#db = new Database(path, { timeout: 15_000 });
  }

  get db(): Database.Database {
    return this.#db;
  }

  #connection: SqlConnection = {
    all: async (sql, params) => this.#run(sql, params),
  };

  #run(sql: string, params: readonly unknown[]): Row[] {
    const statement = this.#db.prepare(sql);
    const values = params.map((value) => (typeof value === 'boolean' ? Number(value) : value));
    return statement.reader ? (statement.all(...values) as Row[]) : (statement.run(...values), []);
  }

  // BEGIN IMMEDIATE takes the database's write lock up front, which serializes writers
  // across processes; the in-process mutex keeps two async chains out of one transaction.
  transaction<T>(fn: (connection: SqlConnection) => Promise<T>): Promise<T> {
    return this.#mutex.run(async () => {
      this.#db.exec('BEGIN IMMEDIATE');
      try {
        const result = await fn(this.#connection);
        this.#db.exec('COMMIT');
        return result;
      } catch (error) {
        if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
        throw error;
      }
    });
  }

  async lock(): Promise<void> {
    // The whole database is already locked by BEGIN IMMEDIATE.
  }

  query(sql: string, params: readonly unknown[]): Promise<Row[]> {
    return this.#mutex.run(async () => this.#run(sql, params));
  }

  describeError(error: unknown): unknown {
    return describeSqliteError(this.#path, error);
  }

  async close(): Promise<void> {
    await this.#mutex.run(async () => this.#db.close());
  }
}

function migrate(db: Database.Database, path: string): void {
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('foreign_keys = ON');
    db.pragma('synchronous = NORMAL');
    // Two processes opening a new file at once: the write lock makes one migrate, the other re-checks.
    db.exec('BEGIN IMMEDIATE');
    try {
      db.exec(
        'CREATE TABLE IF NOT EXISTS turnkit_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
      );
      const applied = new Set(
        (db.prepare('SELECT version FROM turnkit_schema_migrations').all() as { version: number }[]).map(
          (r) => r.version,
        ),
      );
      for (const migration of MIGRATIONS) {
        if (applied.has(migration.version)) continue;
        for (const statement of migration.statements) db.exec(statement);
        db.prepare('INSERT INTO turnkit_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
          migration.version,
          migration.name,
          new Date().toISOString(),
        );
      }
      db.exec('COMMIT');
    } catch (error) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw error;
    }
  } catch (error) {
    db.close();
    throw describeSqliteError(path, error);
  }
}

/** The embedded default: one SQLite file in WAL mode, created and migrated on first open. */
export class SqliteStore extends SqlStore {
  private constructor(driver: SqliteDriver) {
    super(driver);
  }

  static open(path: string): SqliteStore {
    const file = path === ':memory:' ? path : resolve(path);
    let driver: SqliteDriver;
    try {
      if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
      driver = new SqliteDriver(file, file === ':memory:' ? 'memory' : 'sqlite');
    } catch (error) {
      const described = describeSqliteError(file, error);
      if (described instanceof StoreError) throw described;
      throw new StoreError(
        `cannot open the SQLite database ${file} (${error instanceof Error ? error.message : String(error)}): check the path and its permissions`,
        { cause: error },
      );
    }
    migrate(driver.db, file);
    return new SqliteStore(driver);
  }
}

/**
 * The memory backend for unit tests: the same SQL code on an in-memory SQLite database,
 * so it behaves exactly like the file store, minus durability.
 */
export class MemoryStore extends SqlStore {
  constructor() {
    const driver = new SqliteDriver(':memory:', 'memory');
    migrate(driver.db, ':memory:');
    super(driver);
  }
}
