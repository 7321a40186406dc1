import { fileURLToPath } from 'node:url';
import { ArgumentError, ConfigError } from '../errors.js';
import { MemoryStore } from './memory-store.js';
import { PostgresStore } from './postgres-store.js';
import { SqliteStore } from './sqlite-store.js';
import type { Store } from './types.js';
import type { TenantKeysOptions } from './sql/sealed-columns.js';
import { tenantKeysFromEnv } from './sealing/tenant-keys.js';

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
export { pruneStore } from './retention/prune-store.js';
export type { PruneOptions } from './retention/prune-store.js';
export type { PruneReport, PrunedKind } from './retention/prune-pass.js';
export type { RetentionPolicy } from './retention/retention-policy.js';
export type { TenantKeysOptions } from './sql/sealed-columns.js';
export { tenantOfPrincipal } from './sql/sealed-columns.js';
export {
  MemoryTenantKeys,
  TENANT_KEYS_ENV,
  parseTenantKeys,
  tenantKeysFromEnv,
} from './sealing/tenant-keys.js';
export type { TenantKey, TenantKeyProvider } from './sealing/tenant-keys.js';
export type * from './types.js';
export { TERMINAL_TURN_STATUSES, TURN_STATUSES, TOOL_EXECUTION_STATUSES } from './types.js';

export const DEFAULT_DATABASE_PATH = '.turnkit/turnkit.sqlite';

/**
 * Opens a store from a URL, migrating it on open:
 * - `memory:` — the in-process MemoryStore (nothing survives the process);
 * - `postgres://…` / `postgresql://…` — PostgreSQL (`?schema=name` picks a schema);
 * - `sqlite:path`, `file:path`, `file:///abs/path` or a plain path — a SQLite file, created
 *   owner-only with its directories.
 * Any other `scheme:` (`postgress://`, `mysql://`) is a ConfigError naming only the scheme:
 * never a SQLite file whose path would carry the URL's password.
 * Default: `TURNKIT_DATABASE_URL`, else `.turnkit/turnkit.sqlite` under the working directory.
 * `create: false` opens only a SQLite file that exists (else a StoreError, nothing created).
 * `tenantKeys` seals content with per-tenant keys (decision 80); default: the keys of
 * `TURNKIT_TENANT_KEYS` when it is set.
 */
export async function openStore(
  url?: string,
  options: { create?: boolean; tenantKeys?: TenantKeysOptions } = {},
): Promise<Store> {
  const target = url ?? (process.env['TURNKIT_DATABASE_URL'] || DEFAULT_DATABASE_PATH);
  if (typeof target !== 'string' || target.trim() === '') {
    throw new ArgumentError('openStore needs a database URL or a file path');
  }
  const trimmed = target.trim();
  const fromEnv = options.tenantKeys ? undefined : tenantKeysFromEnv();
  const tenantKeys = options.tenantKeys ?? (fromEnv ? { provider: fromEnv } : undefined);
  const sealing = tenantKeys ? { tenantKeys } : {};
  if (trimmed === 'memory:' || trimmed === 'memory://') return new MemoryStore(sealing);
  if (/^postgres(ql)?:\/\//i.test(trimmed)) return PostgresStore.open(trimmed, sealing);
  // Two letters or more: `C:\\db.sqlite` stays a Windows path.
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(trimmed)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== 'sqlite' && scheme !== 'file') {
    throw new ConfigError(
      `unknown database URL scheme ${JSON.stringify(`${scheme}:`)}: use postgres://, postgresql://, sqlite:, file: or memory:`,
    );
  }
  const sqlite = /^file:\/\//i.test(trimmed)
    ? fileUrlPath(trimmed)
    : scheme !== undefined
      ? trimmed.replace(/^(sqlite|file):(\/\/)?/i, '')
      : trimmed;
  if (sqlite === '') throw new ArgumentError(`no SQLite file path in ${JSON.stringify(target)}`);
  return SqliteStore.open(sqlite.replace(/\?.*$/, ''), {
    ...(options.create === false ? { create: false } : {}),
    ...sealing,
  });
}

/** A `file://` URL's path (percent-decoded); a file URL of another host is a ConfigError. */
function fileUrlPath(url: string): string {
  try {
    return fileURLToPath(new URL(url.replace(/\?.*$/, '')));
  } catch {
    throw new ConfigError('a file:// database URL must name a local path (file:///path/to/db.sqlite)');
  }
}
