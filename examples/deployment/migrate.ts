/**
 * Applies the store's migrations ahead of a roll-out (docs/deployment.md): run it once, as a
 * release job, before the new build's workers start. Opening a store migrates it, inside a
 * transaction that holds the migration lock, so this is what a worker would do on its first
 * open; doing it first keeps the schema change out of the roll-out.
 *
 *   TURNKIT_DATABASE_URL=postgres://turnkit@db:5432/turnkit npx tsx examples/deployment/migrate.ts
 */
import { LATEST_SCHEMA_VERSION, PostgresStore } from '../../src/store/index.js';

const url = process.env['TURNKIT_DATABASE_URL'];
if (!url?.startsWith('postgres')) {
  console.error('migrate: set TURNKIT_DATABASE_URL to the postgres:// URL of the store');
  process.exit(2);
}
const store = await PostgresStore.open(url);
const { applied, version } = store.migrations;
await store.close();
console.log(
  applied.length
    ? `migrate: applied ${applied.join(', ')}; the schema is at version ${version}`
    : `migrate: nothing to apply; the schema is at version ${version} (this TurnKit: ${LATEST_SCHEMA_VERSION})`,
);
