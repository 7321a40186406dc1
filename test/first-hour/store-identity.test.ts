/**
 * Issue 45, the first hour: a store's identity (migration 9) is made on first open and kept,
 * on SQLite and PostgreSQL; its default task queue is its own, except for a store that held
 * turns before it had an identity, which keeps the queue its turns are on (decision 67).
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { describePostgres, pgTestSchema, pgTestUrl, dropPgTestSchema } from '../helpers/postgres.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

describe('first hour: store identity', () => {
  it('first hour: a new SQLite store gets an id and a queue of its own, kept across opens', async () => {
    const file = tempSqliteUrl('identity');
    const first = await SqliteStore.open(file);
    const { id, defaultTaskQueue, location } = first.identity;
    await first.close();
    expect(id).toMatch(/^store_[0-9a-f]{20}$/);
    expect(defaultTaskQueue).toBe(`turnkit-${id.slice(-12)}`);
    expect(location).toBe(file);
    const again = await SqliteStore.open(file);
    expect(again.identity).toEqual({ id, defaultTaskQueue, location });
    await again.close();
  });

  it('first hour: a store that held turns before migration 9 keeps the task queue turnkit', async () => {
    const file = tempSqliteUrl('legacy');
    const store = await SqliteStore.open(file);
    const conversation = await store.createConversation({ agentName: 'a' });
    await store.createTurn({ conversationId: conversation.id, agentName: 'a' });
    await store.close();
    // The database as a release before migration 9 left it.
    const db = new Database(file);
    db.exec(`DROP TABLE turnkit_store; DELETE FROM turnkit_schema_migrations WHERE version = 9`);
    db.close();
    const upgraded = await SqliteStore.open(file);
    expect(upgraded.migrations.applied).toEqual([9]);
    expect(upgraded.identity.defaultTaskQueue).toBe('turnkit');
    await upgraded.close();
  });
});

describePostgres('first hour: store identity on PostgreSQL', () => {
  it('first hour: each PostgreSQL schema is a store of its own, with its id kept across opens', async () => {
    const [one, two] = [pgTestSchema(), pgTestSchema()];
    try {
      const a = await PostgresStore.open(pgTestUrl(), { schema: one });
      const b = await PostgresStore.open(pgTestUrl(), { schema: two });
      expect(a.identity.id).not.toBe(b.identity.id);
      expect(a.identity.location).toMatch(new RegExp(`:\\d+/\\w+ \\(schema ${one}\\)$`));
      expect(a.identity.location).not.toMatch(/@/);
      const id = a.identity.id;
      await Promise.all([a.close(), b.close()]);
      const again = await PostgresStore.open(pgTestUrl(), { schema: one });
      expect(again.identity.id).toBe(id);
      await again.close();
    } finally {
      await Promise.all([dropPgTestSchema(one), dropPgTestSchema(two)]);
    }
  });
});
