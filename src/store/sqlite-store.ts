/**
 * The embedded default backend: one SQLite file (better-sqlite3) in WAL mode, created and
 * migrated on first open.
 *
 * Serialization. better-sqlite3 is synchronous, so a transaction that awaits between its
 * statements must own its connection: one writer connection, an in-process async mutex so
 * two unrelated async chains never share its transaction, and `BEGIN IMMEDIATE`, which takes
 * the database's write lock up front and so serializes writers across processes. Every
 * conversation lock and the graph lock are therefore implied by the transaction itself.
 * Reads outside a transaction go to a second connection and see committed rows (WAL lets
 * them run while a writer holds the lock).
 *
 * Waiting. A busy handler inside SQLite would block the whole event loop while another
 * process (or another store in this process) holds the write lock, so the writer's
 * busy_timeout is short and `BEGIN IMMEDIATE` is retried asynchronously, with jitter, until
 * `busyTimeoutMs` (default 10 s) has passed; then it is a retryable StoreError.
 */
import { accessSync, closeSync, constants, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { ConfigError, StoreError } from '../errors.js';
import type { LockKey, Notice, Row, SqlConnection, SqlDialect, SqlDriver } from './sql/driver.js';
import type { MigrationResult } from './sql/migrate.js';
import { migrate } from './sql/migrate.js';
import { SqlStore } from './sql/sql-store.js';
import { loadStoreIdentity } from './sql/store-identity-row.js';
import type { StoreIdentity } from './types.js';
import type { TenantKeysOptions } from './sql/sealed-columns.js';

export interface SqliteStoreOptions {
  /** How long a writer waits for another process's write lock before giving up; default 10 s. */
  busyTimeoutMs?: number;
  /** `false`: open only a database that exists; a missing file is a StoreError and nothing is created. */
  create?: boolean;
  /** Seal content with per-tenant keys (decision 80, docs/data-lifecycle.md). */
  tenantKeys?: TenantKeysOptions;
}

const DEFAULT_BUSY_TIMEOUT_MS = 10_000;
/** The synchronous part of each wait: short, so the event loop keeps running. */
const SYNC_BUSY_TIMEOUT_MS = 5;
const STATEMENT_CACHE_SIZE = 500;
/** How often a long-lived store refreshes the planner's statistics (SQLite suggests hours). */
const OPTIMIZE_EVERY_MS = 60 * 60 * 1000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const SQLITE_DIALECT: SqlDialect = {
  name: 'sqlite',
  types: {
    text: 'TEXT',
    int: 'INTEGER',
    bigint: 'INTEGER',
    json: 'TEXT',
    time: 'TEXT',
    cost: 'REAL',
    serial: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  },
  param: () => '?',
  jsonHasString(column, key) {
    if (!/^\w+$/.test(key)) throw new Error(`unsafe JSON key ${key}`);
    return `json_type(${column}, '$.${key}') = 'text'`;
  },
};

const codeOf = (error: unknown): string => String((error as { code?: unknown })?.code ?? '');
const isBusy = (error: unknown) => /^SQLITE_(BUSY|LOCKED)/.test(codeOf(error));

/** A promise-chain mutex: one transaction at a time on the writer connection. */
class Mutex {
  #tail: Promise<void> = Promise.resolve();

  async run<T>(fn: () => Promise<T>): Promise<T> {
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((done) => (release = done));
    await previous;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

function describeSqliteError(path: string, error: unknown): unknown {
  if (error instanceof StoreError) return error;
  const code = codeOf(error);
  const message = error instanceof Error ? error.message : String(error);
  if (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT')) {
    return new StoreError(
      `${path} is not a SQLite database (${message}): move the file away or delete it, or point TURNKIT_DATABASE_URL at another file`,
      { cause: error },
    );
  }
  if (code.startsWith('SQLITE_READONLY') || code === 'SQLITE_PERM' || code === 'SQLITE_AUTH') {
    return new StoreError(
      `the SQLite database ${path} is read-only (${message}): make the file and its directory writable by this process, or point TURNKIT_DATABASE_URL at a writable location`,
      { cause: error },
    );
  }
  if (code.startsWith('SQLITE_CANTOPEN')) {
    return new StoreError(
      `cannot open the SQLite database ${path} (${message}): check that the path is a file in an existing, writable directory`,
      { cause: error },
    );
  }
  if (isBusy(error)) {
    return new StoreError(
      `the SQLite database ${path} stayed locked by another connection (${message}): another process holds a long transaction; try again`,
      { cause: error, retryable: true },
    );
  }
  if (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR')) {
    return new StoreError(`cannot write the SQLite database ${path} (${message}): check the disk`, {
      cause: error,
      retryable: true,
    });
  }
  if (code.startsWith('SQLITE_CONSTRAINT')) {
    return new StoreError(`a constraint of the SQLite database was violated: ${message}`, { cause: error });
  }
  return error;
}

/** The oldest Node on which better-sqlite3 13's prebuilt binary runs (older ones segfault on open). */
const SQLITE_MIN_NODE = [22, 14] as const;

function assertSqliteRuns(version = process.versions.node): void {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const [needMajor, needMinor] = SQLITE_MIN_NODE;
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return;
  // A checkout whose scripts provisioned Node (`npm run demo` on an older Node) has it here.
  const provisioned = existsSync(resolve('.node/bin/node'));
  throw new ConfigError(
    `the SQLite store needs Node >= ${needMajor}.${needMinor} (this is ${version}): better-sqlite3 13's ` +
      'prebuilt binary crashes on older Node. ' +
      (provisioned
        ? 'This checkout has a newer Node in .node/bin (the scripts put it there): run ' +
          '`export PATH="$PWD/.node/bin:$PATH"`, then the same command again.'
        : 'Upgrade Node (24 LTS), or use PostgreSQL (TURNKIT_DATABASE_URL=postgres://…).'),
  );
}

/**
 * The statement as the SQLite connection prepares it: every parameter `?` as `+?`, the same
 * value with no affinity of its own, as a bare `?` has none. better-sqlite3's SQLite (built
 * with STAT4) compiles a statement again at each new binding of a parameter whose value could
 * steer its plan, which most of a turn's statements have; a unary plus hides the value from
 * the planner, so each statement is planned once, at prepare, as `SQLITE_DBCONFIG_ENABLE_QPSG`
 * would do (decision 091). The store's SQL has no `?` but its parameters (the PostgreSQL
 * driver relies on it too).
 */
export const planStable = (sql: string): string => sql.replaceAll('?', '+?');

/** One better-sqlite3 connection with a prepared-statement cache. */
class Connection {
  readonly db: Database.Database;
  readonly #statements = new Map<string, Database.Statement>();

  constructor(path: string, busyTimeoutMs: number) {
    assertSqliteRuns();
    this.db = new Database(path, { timeout: busyTimeoutMs });
  }

  run(sql: string, params: readonly unknown[] = []): Row[] {
    let statement = this.#statements.get(sql);
    if (!statement) {
      if (this.#statements.size >= STATEMENT_CACHE_SIZE) this.#statements.clear();
      statement = this.db.prepare(planStable(sql));
      this.#statements.set(sql, statement);
    }
    if (statement.reader) return statement.all(...params) as Row[];
    statement.run(...params);
    return [];
  }

  close(): void {
    this.#statements.clear();
    if (this.db.open) this.db.close();
  }
}

class SqliteDriver implements SqlDriver {
  readonly backend = 'sqlite' as const;
  readonly dialect = SQLITE_DIALECT;
  readonly autocommitWrites = false;
  readonly path: string;
  readonly #busyTimeoutMs: number;
  readonly #writer: Connection;
  /** Null for `:memory:`, where a second connection would be another database. */
  #reader: Connection | null = null;
  readonly #mutex = new Mutex();
  readonly #connection: SqlConnection;
  #optimizer: NodeJS.Timeout | undefined;

  constructor(path: string, options: SqliteStoreOptions) {
    this.path = path;
    this.#busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
    this.#writer = new Connection(path, SYNC_BUSY_TIMEOUT_MS);
    this.#connection = { query: async (sql, params) => this.#writer.run(sql, params) };
  }

  /** Retries `fn` while the database is locked by someone else, without blocking the event loop. */
  async #retryBusy<T>(fn: () => T): Promise<T> {
    const deadline = Date.now() + this.#busyTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return fn();
      } catch (error) {
        if (!isBusy(error) || Date.now() >= deadline) throw error;
        await sleep(Math.min(50, 1 + attempt) + Math.random() * 5);
      }
    }
  }

  /** Pragmas and migrations; then the reader connection. */
  async open(): Promise<MigrationResult> {
    await this.#retryBusy(() => this.#writer.db.pragma('journal_mode = WAL'));
    this.#writer.db.pragma('synchronous = NORMAL');
    this.#writer.db.pragma('foreign_keys = ON');
    const result = await migrate(this);
    // Planner statistics as SQLite recommends for a long-lived connection: analyze what needs it
    // on open (0x10002: every table, bounded work), then periodically and before closing.
    await this.#optimize('optimize=0x10002');
    this.#optimizer = setInterval(() => void this.#optimize('optimize'), OPTIMIZE_EVERY_MS);
    this.#optimizer.unref();
    if (this.path !== ':memory:') {
      this.#reader = new Connection(this.path, this.#busyTimeoutMs);
      this.#reader.db.pragma('query_only = ON');
    }
    return result;
  }

  transaction<T>(fn: (connection: SqlConnection) => Promise<T>): Promise<T> {
    return this.#mutex.run(async () => {
      const db = this.#writer.db;
      await this.#retryBusy(() => db.exec('BEGIN IMMEDIATE'));
      try {
        const result = await fn(this.#connection);
        await this.#retryBusy(() => db.exec('COMMIT'));
        return result;
      } catch (error) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw error;
      }
    });
  }

  async lock(_connection: SqlConnection, _key: LockKey, _notice?: Notice): Promise<void> {
    // BEGIN IMMEDIATE already holds the database's single write lock.
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    if (this.#reader) return this.#reader.run(sql, params);
    return this.#mutex.run(async () => this.#writer.run(sql, params));
  }

  describeError(error: unknown): unknown {
    return describeSqliteError(this.path, error);
  }

  /**
   * `PRAGMA optimize` on the writer, between transactions. Statistics only steer the planner
   * (the store's plans do not depend on them): a round that fails, say while another process
   * holds the write lock, is skipped and the next round or open runs it again.
   */
  #optimize(pragma: string): Promise<void> {
    return this.#mutex.run(async () => {
      if (!this.#writer.db.open) return;
      try {
        this.#writer.db.pragma(pragma);
      } catch {
        return;
      }
    });
  }

  async close(): Promise<void> {
    clearInterval(this.#optimizer);
    await this.#optimize('optimize');
    await this.#mutex.run(async () => {
      this.#reader?.close();
      this.#writer.close();
    });
  }

  /** Closes without waiting for the mutex (a failed open). */
  abandon(): void {
    clearInterval(this.#optimizer);
    this.#reader?.close();
    this.#writer.close();
  }
}

/**
 * A private SQLite database in memory, for the memory store (decision 60): the SQLite driver
 * on `:memory:`, with the backend named `memory`. It opens and migrates at once; the first
 * statement waits for that (so a store can be built synchronously), and an open that failed
 * fails every statement with its error.
 */
export function memoryDriver(): SqlDriver {
  const driver = new SqliteDriver(':memory:', {});
  const ready = driver.open();
  ready.catch(() => undefined);
  return {
    backend: 'memory',
    dialect: driver.dialect,
    autocommitWrites: driver.autocommitWrites,
    async transaction(fn) {
      await ready;
      return driver.transaction(fn);
    },
    lock: (connection, key, notice) => driver.lock(connection, key, notice),
    async query(sql, params) {
      await ready;
      return driver.query(sql, params);
    },
    describeError: (error) => driver.describeError(error),
    async close() {
      await ready.catch(() => undefined);
      await driver.close();
    },
  };
}

/** Explains, before SQLite does less clearly, why a path cannot hold a database. */
function checkPath(file: string): void {
  const dir = dirname(file);
  if (existsSync(file)) {
    if (statSync(file).isDirectory()) {
      throw new StoreError(
        `${file} is a directory, not a SQLite database: point TURNKIT_DATABASE_URL at a file`,
      );
    }
    if (!writable(file)) {
      throw new StoreError(
        `the SQLite database ${file} is read-only: make the file writable by this process (TurnKit writes to it), or point TURNKIT_DATABASE_URL at a writable copy`,
      );
    }
    if (!writable(dir)) {
      throw new StoreError(
        `the SQLite database ${file} is in a read-only directory ${dir}: make the directory writable (SQLite creates its -wal and -shm files next to the database), or point TURNKIT_DATABASE_URL elsewhere`,
      );
    }
    return;
  }
  try {
    // Transcripts, tool results and principals live here: directories this creates are owner-only.
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new StoreError(
      `cannot create the directory ${dir} for the SQLite database (${(error as Error).message}): create it, or point TURNKIT_DATABASE_URL elsewhere`,
      { cause: error },
    );
  }
  if (!writable(dir)) {
    throw new StoreError(
      `cannot create the SQLite database ${file}: the directory ${dir} is read-only; make it writable, or point TURNKIT_DATABASE_URL elsewhere`,
    );
  }
  // An empty file is an empty database; SQLite gives its -wal and -shm files the same mode.
  try {
    closeSync(openSync(file, 'wx', 0o600));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw describeSqliteError(file, error);
  }
}

function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

export class SqliteStore extends SqlStore {
  /** The absolute path of the database file (or `:memory:`). */
  readonly path: string;
  /** What opening did to the schema (which migrations this open applied). */
  readonly migrations: MigrationResult;

  private constructor(
    driver: SqliteDriver,
    migrations: MigrationResult,
    identity: StoreIdentity,
    tenantKeys: TenantKeysOptions | undefined,
  ) {
    super(driver, identity, tenantKeys);
    this.path = driver.path;
    this.migrations = migrations;
  }

  /**
   * Opens (creating the file and its parent directories) and migrates a SQLite database.
   * A corrupt or foreign file, a read-only file or directory, or a lock that never frees are
   * StoreErrors that say what to do.
   */
  static async open(path: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
    // Before anything touches the disk: an old Node leaves no empty database behind.
    assertSqliteRuns();
    const file = path === ':memory:' ? path : resolve(path);
    if (file !== ':memory:' && options.create === false && !existsSync(file))
      throw new StoreError(
        `there is no SQLite database at ${file} (the file does not exist; nothing was created)`,
      );
    if (file !== ':memory:') checkPath(file);
    let driver: SqliteDriver;
    try {
      driver = new SqliteDriver(file, options);
    } catch (error) {
      throw describeSqliteError(file, error);
    }
    let migrations: MigrationResult;
    let identity: StoreIdentity;
    try {
      migrations = await driver.open();
      identity = await loadStoreIdentity(driver, file);
    } catch (error) {
      driver.abandon();
      throw describeSqliteError(file, error);
    }
    return new SqliteStore(driver, migrations, identity, options.tenantKeys);
  }
}
