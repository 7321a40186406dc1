import { ArgumentError } from '../errors.js';
import { PostgresStore } from './postgres-store.js';
import { MemoryStore, SqliteStore } from './sqlite-store.js';
import type { Store } from './types.js';

export { FencedStore } from './fenced-store.js';
export { MemoryStore, SqliteStore } from './sqlite-store.js';
export { PostgresStore } from './postgres-store.js';
export { addWaits, waitsReady } from './wait-graph.js';
export { deliver } from './deliveries.js';
export type * from './types.js';
export { TERMINAL_TURN_STATUSES, TURN_STATUSES, TOOL_EXECUTION_STATUSES } from './types.js';

export const DEFAULT_DATABASE_PATH = '.turnkit/turnkit.sqlite';

/**
 * Opens a store from a URL: `memory:`, `postgres://…` / `postgresql://…`, or a SQLite file
 * (`sqlite:path`, `file:path` or a plain path). Default: TURNKIT_DATABASE_URL, else
 * `.turnkit/turnkit.sqlite`. Migrations run on open.
 */
export async function openStore(
  url: string = process.env['TURNKIT_DATABASE_URL'] ?? DEFAULT_DATABASE_PATH,
): Promise<Store> {
  if (typeof url !== 'string' || url.trim() === '')
    throw new ArgumentError('openStore needs a database URL or path');
  if (url === 'memory:' || url === ':memory:') return new MemoryStore();
  if (/^postgres(ql)?:\/\//.test(url)) return PostgresStore.open(url);
  const path = url.replace(/^(sqlite|file):(\/\/)?/, '');
  return SqliteStore.open(path);
}
