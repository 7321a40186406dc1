/**
 * PostgreSQL for production (pg.Pool). Same SQL as SQLite (sql/sql-store.ts); this file adds
 * the connection pool, the locks and the error messages.
 *
 * Locks are transaction-scoped advisory locks, `pg_advisory_xact_lock(hashtextextended(
 * 'turnkit:<key>', 0))`, released by COMMIT/ROLLBACK. Chosen over `SELECT … FOR UPDATE` on
 * the conversation row because they also work where there is no row to lock: the global
 * graph lock, a conversation being created in the same transaction, a conversation id that
 * does not exist yet, and the migration lock on an empty database. The 64-bit hash makes
 * two keys sharing a lock vanishingly rare (and sharing one would only serialize more).
 * Every caller takes them in the order graph → root conversation → own conversation; a
 * caller that broke the order could deadlock, which PostgreSQL detects and reports as a
 * retryable StoreError. Claims do not need a lock: they are one `UPDATE … WHERE status IN
 * (…) RETURNING *`. Needs PostgreSQL 11 or later (hashtextextended).
 */
import pg from 'pg';
import { ArgumentError, StoreError } from '../errors.js';
import type { LockKey, Notice, Row, SqlConnection, SqlDialect, SqlDriver } from './sql/driver.js';
import type { MigrationResult } from './sql/migrate.js';
import { migrate } from './sql/migrate.js';
import { loadStoreIdentity } from './sql/store-identity-row.js';
import type { StoreIdentity } from './types.js';
import type { TenantKeysOptions } from './sql/sealed-columns.js';
import { SqlStore } from './sql/sql-store.js';

export interface PostgresStoreOptions {
  /** Schema for the tables (created if missing); default: the server's search_path (`public`). */
  schema?: string;
  /** Extra pg.Pool settings (max, connectionTimeoutMillis, …). */
  pool?: pg.PoolConfig;
  /** Seal content with per-tenant keys (decision 80, docs/data-lifecycle.md). */
  tenantKeys?: TenantKeysOptions;
}

const CASTS = {
  text: '::text',
  int: '::integer',
  bigint: '::bigint',
  json: '::jsonb',
  time: '::timestamptz',
  cost: '::numeric',
};

const POSTGRES_DIALECT: SqlDialect = {
  name: 'postgres',
  types: {
    text: 'text',
    int: 'integer',
    bigint: 'bigint',
    json: 'jsonb',
    time: 'timestamptz',
    cost: 'numeric(14,6)',
    serial: 'bigserial PRIMARY KEY',
  },
  param: (kind) => `?${CASTS[kind]}`,
  jsonHasString(column, key) {
    if (!/^\w+$/.test(key)) throw new Error(`unsafe JSON key ${key}`);
    return `jsonb_typeof(${column} -> '${key}') = 'string'`;
  },
};

/** JSON and numeric columns arrive as text and are decoded by the shared code. */
const RAW_TEXT_TYPES = new Set([114 /* json */, 3802 /* jsonb */, 1700 /* numeric */]);
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    RAW_TEXT_TYPES.has(oid)
      ? (value: string) => value
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** The shared SQL's `?` placeholders as `$1, $2, …` (the shared SQL never contains a literal `?`). */
function numbered(sql: string): string {
  let index = 0;
  return sql.replace(/\?/g, () => `$${++index}`);
}

/**
 * Statements with parameters run as named prepared statements: PostgreSQL parses and plans
 * each once per connection instead of at every call (measured: its CPU per soak turn fell from
 * 94 to 54 ms; docs/decisions/027-postgres-round-trips.md). Names are per process, at most
 * MAX_PREPARED of them. A plan whose result columns a migration in another process changed
 * fails with 0A000 ("cached plan must not change result type"): that error is retryable and
 * starts a new generation of names, so the retry prepares afresh on every connection.
 */
const MAX_PREPARED = 1000;
const statementNames = new Map<string, string>();
let generation = 0;

function prepared(sql: string, params: readonly unknown[]): pg.QueryConfig {
  const text = numbered(sql);
  if (params.length === 0) return { text };
  let name = statementNames.get(text);
  if (!name && statementNames.size < MAX_PREPARED) {
    name = `turnkit_${generation}_${statementNames.size}`;
    statementNames.set(text, name);
  }
  return { text, values: [...params], ...(name ? { name } : {}) };
}

function stalePlan(error: unknown): boolean {
  return (error as { code?: unknown })?.code === '0A000' && /cached plan/i.test(String(error));
}

/** Runs a (possibly prepared) statement; a stale plan retires every name (see `prepared`). */
async function run(client: pg.Pool | pg.PoolClient, sql: string, params: readonly unknown[]): Promise<Row[]> {
  try {
    return (await client.query(prepared(sql, params))).rows as Row[];
  } catch (error) {
    if (stalePlan(error)) {
      generation++;
      statementNames.clear();
    }
    throw error;
  }
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

interface Target {
  host: string;
  port: string;
  database: string;
  user: string;
}

function targetOf(url: string): Target {
  try {
    const parsed = new URL(url);
    return {
      host: decodeURIComponent(parsed.hostname) || 'localhost',
      port: parsed.port || '5432',
      database:
        decodeURIComponent(parsed.pathname.slice(1)) || decodeURIComponent(parsed.username) || 'postgres',
      user: decodeURIComponent(parsed.username) || 'postgres',
    };
  } catch {
    return { host: 'the configured host', port: '5432', database: '?', user: '?' };
  }
}

function describePgError(target: Target, error: unknown): unknown {
  if (error instanceof StoreError) return error;
  const code = String((error as { code?: unknown })?.code ?? '');
  const message = error instanceof Error ? error.message : String(error);
  const where = `${target.host}:${target.port}`;
  if (
    CONNECTION_CODES.has(code) ||
    /timeout expired|connection timeout|Connection terminated/i.test(message)
  ) {
    return new StoreError(
      `PostgreSQL at ${where} is unreachable (${message || code}): start the server, or fix the host and port in TURNKIT_DATABASE_URL`,
      { cause: error, retryable: true },
    );
  }
  if (code === '3D000') {
    return new StoreError(
      `PostgreSQL database "${target.database}" does not exist at ${where}: create it (createdb -h ${target.host} -p ${target.port} ${target.database}) or fix TURNKIT_DATABASE_URL`,
      { cause: error },
    );
  }
  if (code === '28P01' || code === '28000') {
    return new StoreError(
      `PostgreSQL at ${where} refused user "${target.user}" (${message}): fix the credentials in TURNKIT_DATABASE_URL or the server's pg_hba.conf`,
      { cause: error },
    );
  }
  if (code === '42501') {
    return new StoreError(
      `PostgreSQL user "${target.user}" lacks a privilege on ${where}/${target.database} (${message}): grant it, or use another user`,
      { cause: error },
    );
  }
  if (code === '25006') {
    return new StoreError(`PostgreSQL at ${where} is read-only (${message}): connect to the primary`, {
      cause: error,
      retryable: true,
    });
  }
  if (code === '40P01' || code === '40001') {
    return new StoreError(`PostgreSQL rolled the transaction back (${message}): try again`, {
      cause: error,
      retryable: true,
    });
  }
  if (code === '0A000' && /cached plan/i.test(message)) {
    return new StoreError(`PostgreSQL's schema changed under a prepared statement (${message}): try again`, {
      cause: error,
      retryable: true,
    });
  }
  if (code === '23505') return new StoreError(`unique constraint violated: ${message}`, { cause: error });
  if (code === '23503') return new StoreError(`a referenced row is missing: ${message}`, { cause: error });
  if (code.startsWith('23')) return new StoreError(`constraint violated: ${message}`, { cause: error });
  if (code === '22P05' || code === '22021') {
    return new StoreError(`PostgreSQL cannot store this text (${message}): remove NUL characters (\\u0000)`, {
      cause: error,
    });
  }
  if (code === '25P02') {
    return new StoreError(`the transaction was aborted by an earlier failed statement (${message})`, {
      cause: error,
    });
  }
  return error;
}

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** `text` as a SQL expression that no quoting setting can misread: its UTF-8 bytes in hex. */
const textLiteral = (text: string) =>
  `convert_from(decode('${Buffer.from(text).toString('hex')}', 'hex'), 'UTF8')`;

const LOCK_SQL = (key: string) => `pg_advisory_xact_lock(hashtextextended(${key}, 0))`;
const NOTIFY_SQL = (channel: string, payload: string) => `pg_notify(${channel}, ${payload})`;

/**
 * `sql` (numbered) with its parameters written in as literals, for a simple query; null when a
 * value is not one a literal can carry as the parameter would (only strings, finite numbers,
 * booleans and null are). A string goes in dollar quotes under a tag it does not contain: an
 * untyped literal, whose type PostgreSQL infers from its place as it infers a parameter's, and
 * which no quoting setting reads otherwise (decision 88).
 */
export function withLiterals(sql: string, params: readonly unknown[]): string | null {
  const literals: string[] = [];
  for (const value of params) {
    if (value === null || value === undefined) literals.push('NULL');
    else if (typeof value === 'boolean') literals.push(value ? 'TRUE' : 'FALSE');
    else if (typeof value === 'number' && Number.isFinite(value)) literals.push(dollarQuoted(String(value)));
    else if (typeof value === 'string' && !value.includes('\0')) literals.push(dollarQuoted(value));
    else return null;
  }
  return sql.replace(/\$(\d+)/g, (_match, index: string) => literals[Number(index) - 1] ?? 'NULL');
}

function dollarQuoted(text: string): string {
  let tag = 'tk';
  for (let n = 0; text.includes(`$${tag}$`); n++) tag = `tk${n}`;
  return `$${tag}$${text}$${tag}$`;
}

/**
 * A transaction's connection. A lock (with its NOTIFY) is sent with the statement after it, in
 * one simple query, and BEGIN with the transaction's first statement (decision 88): the locks'
 * keys and the statement's parameters go in as literals. A statement whose values a literal
 * cannot carry goes after its locks, in a round trip of its own. Locks still waiting at the end
 * go with COMMIT. A transaction that sent nothing sends no BEGIN and no COMMIT (and took no
 * lock: every block's first statement comes after its locks).
 */
class TransactionConnection implements SqlConnection {
  begun = false;
  /** Statements without parameters (locks) that go with the next statement. */
  #lead: string[] = [];

  constructor(readonly client: pg.PoolClient) {}

  async query(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    const lead = [...(this.begun ? [] : ['BEGIN']), ...this.#lead.splice(0)];
    this.begun = true;
    if (lead.length > 0) {
      const literal = withLiterals(numbered(sql), params);
      if (literal !== null) {
        const results = (await this.client.query(
          `${lead.join('; ')}; ${literal}`,
        )) as unknown as pg.QueryResult[];
        return results.at(-1)!.rows as Row[];
      }
      await this.client.query(lead.join('; '));
    }
    return run(this.client, sql, params);
  }

  /** A statement without parameters (a lock) sent with the next one. */
  lead(statement: string): void {
    this.#lead.push(statement);
  }

  /** COMMIT, with any locks still waiting; false when the transaction sent nothing. */
  async commit(): Promise<pg.QueryResult | null> {
    if (!this.begun) return null;
    const lead = this.#lead.splice(0);
    if (lead.length === 0) return this.client.query('COMMIT');
    const results = (await this.client.query(`${lead.join('; ')}; COMMIT`)) as unknown as pg.QueryResult[];
    return results.at(-1)!;
  }
}

/**
 * The libpq startup `options` that select the schema. The server splits that string on
 * whitespace and unescapes backslashes, so both are escaped: a schema name with a space (or a
 * crafted `?schema=` adding `-c name=value`) stays one quoted identifier, never a second setting.
 */
function searchPathOption(schema: string | undefined): string | undefined {
  if (schema === undefined) return undefined;
  if (typeof schema !== 'string' || schema === '' || schema.includes('\0') || Buffer.byteLength(schema) > 63)
    throw new ArgumentError('a PostgreSQL schema name must be 1 to 63 bytes, without NUL');
  return `-c search_path=${quoteIdent(schema).replace(/[\\\s]/g, (char) => `\\${char}`)}`;
}

class PostgresDriver implements SqlDriver {
  readonly backend = 'postgres' as const;
  readonly dialect = POSTGRES_DIALECT;
  readonly autocommitWrites = true;
  readonly #pool: pg.Pool;
  readonly #target: Target;
  readonly #schema: string | undefined;
  readonly #clientConfig: pg.ClientConfig;

  constructor(url: string, options: PostgresStoreOptions) {
    this.#target = targetOf(url);
    this.#schema = options.schema;
    const pool = options.pool ?? {};
    const searchPath = searchPathOption(options.schema);
    this.#pool = new pg.Pool({
      connectionString: url,
      max: 10,
      connectionTimeoutMillis: 10_000,
      ...pool,
      options: [pool.options, searchPath].filter(Boolean).join(' ') || undefined,
      types,
    });
    this.#clientConfig = {
      connectionString: url,
      connectionTimeoutMillis: 10_000,
      options: [pool.options, searchPath].filter(Boolean).join(' ') || undefined,
    };
    // An idle client losing its server must not crash the process; the next query reports it.
    this.#pool.on('error', () => undefined);
  }

  async transaction<T>(fn: (connection: SqlConnection) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    const connection = new TransactionConnection(client);
    let broken: unknown;
    // A server lost between two statements of the block is reported by the next statement;
    // the client's 'error' event, with nobody listening, would crash the process.
    const lost = (error: unknown) => (broken = error);
    client.on('error', lost);
    try {
      const result = await fn(connection);
      // COMMIT of a transaction that a failed statement aborted (one whose error the block
      // caught) quietly rolls back: that must not look like success.
      const commit = await connection.commit();
      if (commit?.command === 'ROLLBACK') {
        throw new StoreError(
          'PostgreSQL rolled the transaction back at COMMIT: a statement inside it failed and the block went on; nothing it wrote was kept',
        );
      }
      return result;
    } catch (error) {
      if (connection.begun)
        await client.query('ROLLBACK').catch((rollbackError: unknown) => (broken = rollbackError));
      throw error;
    } finally {
      client.off('error', lost);
      // A client whose rollback failed, or whose server went away, is discarded.
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  /**
   * NOTIFY is transactional: listeners hear of it when the transaction commits, never before.
   * In a transaction, the lock goes with the statement after it (and the first with BEGIN).
   */
  async lock(connection: SqlConnection, key: LockKey, notice?: Notice): Promise<void> {
    if (connection instanceof TransactionConnection) {
      const literal = (text: string) => textLiteral(text);
      const notify = notice ? `, ${NOTIFY_SQL(literal(notice.channel), literal(notice.payload))}` : '';
      return connection.lead(`SELECT ${LOCK_SQL(literal(`turnkit:${key}`))}${notify}`);
    }
    const notify = notice ? `, ${NOTIFY_SQL('?::text', '?::text')}` : '';
    await connection.query(`SELECT ${LOCK_SQL('?::text')}${notify}`, [
      `turnkit:${key}`,
      ...(notice ? [notice.channel, notice.payload] : []),
    ]);
  }

  /** A client of its own (not the pool's): a LISTEN connection stays open for as long as readers wait. */
  async listen(
    channel: string,
    onPayload: (payload: string) => void,
    onLost: () => void,
  ): Promise<() => Promise<void>> {
    const client = new pg.Client(this.#clientConfig);
    let ended = false;
    client.on('error', () => undefined);
    client.on('end', () => {
      if (!ended) onLost();
    });
    client.on('notification', (message) => {
      if (message.channel === channel && message.payload) onPayload(message.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(channel)}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw this.describeError(error);
    }
    return () => {
      ended = true;
      return client.end();
    };
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    return run(this.#pool, sql, params);
  }

  describeError(error: unknown): unknown {
    return describePgError(this.#target, error);
  }

  async open(): Promise<MigrationResult> {
    if (this.#schema) {
      // Concurrent creators race on the catalog; whoever loses finds the schema there.
      await this.#pool
        .query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(this.#schema)}`)
        .catch((error: unknown) => {
          if (!['23505', '42P06'].includes(String((error as { code?: unknown }).code))) throw error;
        });
    }
    return migrate(this);
  }

  close(): Promise<void> {
    return this.#pool.end();
  }
}

/** Where a PostgreSQL store is, for messages: host, port, database and schema, never a credential. */
function postgresLocation(url: string, schema: string | undefined): string {
  let where = 'postgres';
  try {
    const parsed = new URL(url);
    where = `${parsed.hostname || 'localhost'}:${parsed.port || '5432'}${parsed.pathname}`;
  } catch {
    // pg reports a malformed URL itself.
  }
  return schema ? `${where} (schema ${schema})` : where;
}

export class PostgresStore extends SqlStore {
  /** What opening did to the schema (which migrations this open applied). */
  readonly migrations: MigrationResult;

  private constructor(
    driver: PostgresDriver,
    migrations: MigrationResult,
    identity: StoreIdentity,
    tenantKeys: TenantKeysOptions | undefined,
  ) {
    super(driver, identity, tenantKeys);
    this.migrations = migrations;
  }

  /**
   * Connects and migrates. An unreachable server is a retryable StoreError naming host and
   * port; a missing database or refused credentials say how to fix them. A `schema` query
   * parameter in the URL (`…/db?schema=name`) is the same as the `schema` option.
   */
  static async open(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    let connectionUrl = url;
    let schema = options.schema;
    try {
      const parsed = new URL(url);
      const fromUrl = parsed.searchParams.get('schema');
      if (fromUrl !== null) {
        parsed.searchParams.delete('schema');
        connectionUrl = parsed.toString();
        schema ??= fromUrl;
      }
    } catch {
      // pg reports a malformed URL itself.
    }
    const driver = new PostgresDriver(connectionUrl, { ...options, ...(schema ? { schema } : {}) });
    let migrations: MigrationResult;
    let identity: StoreIdentity;
    try {
      migrations = await driver.open();
      identity = await loadStoreIdentity(driver, postgresLocation(connectionUrl, schema));
    } catch (error) {
      await driver.close().catch(() => undefined);
      throw driver.describeError(error);
    }
    return new PostgresStore(driver, migrations, identity, options.tenantKeys);
  }
}
