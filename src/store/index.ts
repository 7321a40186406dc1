import { ArgumentError } from '../errors.js';
import { MemoryStore } from './memory-store.js';
import { PostgresStore } from './postgres-store.js';
import { SqliteStore } from './sqlite-store.js';
import type { Store } from './types.js';

// `turnkit/store`: the store contract, its backends and migrations. Fencing, the wait graph and
// delivery internals are the engine's and stay unexported.
export { MemoryStore } from './memory-store.js';
export { SqliteStore } from './sqlite-store.js';
export type { SqliteStoreOptions } from './sqlite-store.js';
export { PostgresStore } from './postgres-store.js';
export type { PostgresStoreOptions } from './postgres-store.js';
export { MIGRATIONS_TABLE } from './sql/migrate.js';
export type { MigrationResult } from './sql/migrate.js';
export { LATEST_SCHEMA_VERSION } from './sql/schema.js';
export type * from './types.js';
export { TERMINAL_TURN_STATUSES, TURN_STATUSES, TOOL_EXECUTION_STATUSES } from './types.js';

export const DEFAULT_DATABASE_PATH = '.turnkit/turnkit.sqlite';

/**
 * Opens a store from a URL, migrating it on open:
 * - `memory:` — the in-process MemoryStore (nothing survives the process);
 * - `postgres://…` / `postgresql://…` — PostgreSQL (`?schema=name` picks a schema);
 * - `sqlite:path`, `file:path` or a plain path — a SQLite file, created with its directories.
 * Default: `TURNKIT_DATABASE_URL`, else `.turnkit/turnkit.sqlite` under the working directory.
 */
export async function openStore(url?: string): Promise<Store> {
  const target = url ?? (process.env['TURNKIT_DATABASE_URL'] || DEFAULT_DATABASE_PATH);
  if (typeof target !== 'string' || target.trim() === '') {
    throw new ArgumentError('openStore needs a database URL or a file path');
  }
  const trimmed = target.trim();
  if (trimmed === 'memory:' || trimmed === 'memory://') return new MemoryStore();
  if (/^postgres(ql)?:\/\//i.test(trimmed)) return PostgresStore.open(trimmed);
  const sqlite = /^(sqlite|file):/i.test(trimmed) ? trimmed.replace(/^(sqlite|file):(\/\/)?/i, '') : trimmed;
  if (sqlite === '') throw new ArgumentError(`no SQLite file path in ${JSON.stringify(target)}`);
  return SqliteStore.open(sqlite.replace(/\?.*$/, ''));
}
