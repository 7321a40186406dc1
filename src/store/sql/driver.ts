/**
 * What a SQL backend supplies to the shared implementation (sql-store.ts): a dialect (column
 * types, casts, one JSON predicate), connections, transactions and named locks. The shared
 * SQL uses `?` placeholders; a driver whose database wants `$1, $2, …` rewrites them, so the
 * shared SQL never contains a literal `?` (no jsonb `?` operator, no `?` in string literals).
 */
import type { StoreBackend } from '../types.js';
import type { ColumnKind, DialectTypes } from './schema.js';

export type Row = Record<string, unknown>;

export interface SqlDialect {
  readonly name: 'sqlite' | 'postgres';
  readonly types: DialectTypes;
  /** A placeholder for a value of this kind: `?` in SQLite, `?::jsonb` etc. in PostgreSQL. */
  param(kind: ColumnKind): string;
  /** SQL that is true when the JSON object in `column` has a string at top-level `key`. */
  jsonHasString(column: string, key: string): string;
}

export interface SqlConnection {
  /** Runs one statement and returns its rows (none for statements without RETURNING). */
  query(sql: string, params?: readonly unknown[]): Promise<Row[]>;
}

/** What listeners of `channel` hear when a transaction commits. */
export interface Notice {
  channel: string;
  payload: string;
}

/** A named lock held until the end of the current transaction. */
export type LockKey = 'graph' | 'migrations' | `conv:${string}` | `stream:${string}`;

export interface SqlDriver {
  readonly backend: StoreBackend;
  readonly dialect: SqlDialect;
  /** Opens a transaction on one connection, runs `fn`, commits; rolls back when it throws. */
  transaction<T>(fn: (connection: SqlConnection) => Promise<T>): Promise<T>;
  /**
   * Takes `key` inside the connection's transaction (a no-op where a transaction already
   * serializes every writer, as SQLite's BEGIN IMMEDIATE does). Given `notice`, the same
   * statement tells listeners of its channel once the transaction commits (PostgreSQL NOTIFY).
   */
  lock(connection: SqlConnection, key: LockKey, notice?: Notice): Promise<void>;
  /** A statement outside any transaction: a read, or a write that is atomic by itself. */
  query(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Whether `query` may run writes (PostgreSQL autocommit); else writes open a transaction. */
  readonly autocommitWrites: boolean;
  /** Turns a driver error into a StoreError a user can act on (or returns it unchanged). */
  describeError(error: unknown): unknown;
  /** Listens on `channel` on a connection of its own; resolves to the unlisten. `onLost`: the connection died. */
  listen?(
    channel: string,
    onPayload: (payload: string) => void,
    onLost: () => void,
  ): Promise<() => Promise<void>>;
  close(): Promise<void>;
}
