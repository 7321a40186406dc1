/**
 * Applies the versioned migrations (schema.ts) on open. Everything happens in one
 * transaction holding the migration lock — SQLite: the write lock of BEGIN IMMEDIATE;
 * PostgreSQL: a transaction advisory lock on a fixed key — and the applied versions are read
 * again *inside* it, so two processes opening the same new database at once apply each
 * migration exactly once, and opening a migrated database again changes nothing.
 */
import { StoreError } from '../../errors.js';
import type { SqlDriver } from './driver.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS } from './schema.js';

export const MIGRATIONS_TABLE = 'turnkit_schema_migrations';

export interface MigrationResult {
  /** Versions this call applied (empty when the schema was already current). */
  applied: number[];
  version: number;
}

export async function migrate(driver: SqlDriver): Promise<MigrationResult> {
  const t = driver.dialect.types;
  return driver.transaction(async (connection) => {
    await driver.lock(connection, 'migrations');
    await connection.query(
      `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
        version ${t.int} PRIMARY KEY,
        name ${t.text} NOT NULL,
        applied_at ${t.time} NOT NULL)`,
    );
    const rows = await connection.query(`SELECT version FROM ${MIGRATIONS_TABLE}`);
    const done = new Set(rows.map((row) => Number(row['version'])));
    const newest = Math.max(0, ...done);
    if (newest > LATEST_SCHEMA_VERSION) {
      throw new StoreError(
        `the database schema is at version ${newest}, newer than this TurnKit understands (${LATEST_SCHEMA_VERSION}): upgrade TurnKit, or point TURNKIT_DATABASE_URL at another database`,
      );
    }
    const applied: number[] = [];
    for (const migration of MIGRATIONS) {
      if (done.has(migration.version)) continue;
      for (const statement of migration.statements(t, driver.dialect.name)) await connection.query(statement);
      await connection.query(
        `INSERT INTO ${MIGRATIONS_TABLE} (version, name, applied_at) VALUES (?, ?, ${driver.dialect.param('time')})`,
        [migration.version, migration.name, new Date().toISOString()],
      );
      applied.push(migration.version);
    }
    return { applied, version: LATEST_SCHEMA_VERSION };
  });
}
