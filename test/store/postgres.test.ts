import pg from 'pg';
import { expect, it } from 'vitest';
import { StoreError } from '../../src/errors.js';
import { openStore } from '../../src/store/index.js';
import { PostgresStore, withLiterals } from '../../src/store/postgres-store.js';
import { MIGRATIONS } from '../../src/store/sql/schema.js';
import type { Store } from '../../src/store/types.js';
import { describePostgres, dropPgTestSchema, pgTestSchema, pgTestUrl } from '../helpers/postgres.js';
import { defineTransactionTests } from './concurrency/transactions.js';
import { describeStoreContract } from './contract.js';

const schemas = new WeakMap<Store, string>();

describePostgres('postgres', () => {
  describeStoreContract(
    'postgres',
    async () => {
      const schema = pgTestSchema();
      const store = await PostgresStore.open(pgTestUrl(), { schema });
      schemas.set(store, schema);
      return store;
    },
    {
      async cleanup(store) {
        await store.close();
        await dropPgTestSchema(schemas.get(store)!);
      },
    },
  );

  defineTransactionTests('postgres', async () => {
    const schema = pgTestSchema();
    const store = await PostgresStore.open(pgTestUrl(), { schema });
    return {
      store,
      second: () => PostgresStore.open(pgTestUrl(), { schema }),
      async close() {
        await store.close();
        await dropPgTestSchema(schema);
      },
    };
  });

  async function columnTypes(schema: string): Promise<Record<string, string>> {
    const client = new pg.Client({ connectionString: pgTestUrl() });
    await client.connect();
    try {
      const { rows } = await client.query(
        `SELECT table_name || '.' || column_name AS name, data_type, numeric_precision, numeric_scale
          FROM information_schema.columns WHERE table_schema = $1`,
        [schema],
      );
      return Object.fromEntries(
        rows.map((r) => [
          r.name,
          r.data_type === 'numeric' ? `numeric(${r.numeric_precision},${r.numeric_scale})` : r.data_type,
        ]),
      );
    } finally {
      await client.end();
    }
  }

  it('migrations applied again (and by two opens at once) are harmless; jsonb, timestamptz and numeric(14,6) columns', async () => {
    const schema = pgTestSchema();
    try {
      const [a, b] = await Promise.all([
        PostgresStore.open(pgTestUrl(), { schema }),
        PostgresStore.open(pgTestUrl(), { schema }),
      ]);
      expect([a.migrations.applied.length, b.migrations.applied.length].sort()).toEqual([
        0,
        MIGRATIONS.length,
      ]);
      const conversation = await a.createConversation({ agentName: 'a' });
      const turn = await a.createTurn({ conversationId: conversation.id, agentName: 'a' });
      const updated = await a.updateTurn(turn.id, { cost: 0.1234567, heartbeatAt: '2026-01-01T00:00:00.5Z' });
      expect(updated.cost).toBe(0.123457);
      expect(updated.heartbeatAt).toBe('2026-01-01T00:00:00.500Z');
      await a.close();
      await b.close();
      const again = await openStore(`${pgTestUrl()}?schema=${schema}`);
      expect((again as PostgresStore).migrations.applied).toEqual([]);
      expect((await again.loadConversation(conversation.id)).agentName).toBe('a');
      await again.close();
      const types = await columnTypes(schema);
      expect(types).toMatchObject({
        'turnkit_turns.options': 'jsonb',
        'turnkit_turns.cost': 'numeric(14,6)',
        'turnkit_turns.heartbeat_at': 'timestamp with time zone',
        'turnkit_messages.content': 'jsonb',
        'turnkit_events.payload': 'jsonb',
        'turnkit_schema_migrations.version': 'integer',
      });
    } finally {
      await dropPgTestSchema(schema);
    }
  });
});

it('postgres: an unreachable server (port 1) is a retryable StoreError naming host, port and the fix', async () => {
  const started = Date.now();
  const error = await PostgresStore.open('postgres://postgres:secret@127.0.0.1:1/turnkit', {
    pool: { connectionTimeoutMillis: 2_000 },
  }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(StoreError);
  expect((error as Error).message).toContain('127.0.0.1:1');
  expect((error as Error).message).toMatch(
    /unreachable.*start the server, or fix the host and port in TURNKIT_DATABASE_URL/,
  );
  expect((error as Error).message).not.toContain('secret');
  expect((error as StoreError).retryable).toBe(true);
  expect(Date.now() - started).toBeLessThan(5_000);
});

describePostgres('postgres connection errors', () => {
  it('a missing database is a StoreError saying how to create it', async () => {
    const url = new URL(pgTestUrl());
    url.pathname = '/turnkit_does_not_exist';
    const error = await PostgresStore.open(url.toString()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toMatch(/database "turnkit_does_not_exist" does not exist.*createdb/);
  });
});

/** A store on a fresh schema, closed and dropped after `fn`. */
async function inSchema(
  fn: (store: PostgresStore, schema: string) => Promise<void>,
  options: { pool?: pg.PoolConfig } = {},
): Promise<void> {
  const schema = pgTestSchema();
  const store = await PostgresStore.open(pgTestUrl(), { schema, ...options });
  try {
    await fn(store, schema);
  } finally {
    await store.close();
    await dropPgTestSchema(schema);
  }
}

/** Statements that fail inside a block without a savepoint (NUL is not valid text). */
const SWALLOWED: Record<string, (store: PostgresStore, conversationId: string) => Promise<unknown>> = {
  'a read': (store, id) => store.listMessages(`${id}\u0000`),
  'an update (updates run without a savepoint)': (store, id) =>
    store.updateConversation(id, { metadata: { bad: 'nul\u0000' } }),
};

describePostgres('postgres aborted transactions', () => {
  for (const [what, fail] of Object.entries(SWALLOWED)) {
    it(`a block that swallows a failed statement (${what}) does not report a commit that never happened`, () =>
      inSchema(async (store) => {
        const c = await store.createConversation({ agentName: 'a' });
        const error = await store
          .atomic(c.id, async () => {
            await store.appendMessage({ conversationId: c.id, role: 'user', content: 'lost' });
            await fail(store, c.id).catch(() => undefined);
          })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(StoreError);
        expect((error as Error).message).toMatch(/rolled the transaction back at COMMIT/);
        expect(await store.listMessages(c.id)).toEqual([]);
        expect((await store.loadConversation(c.id)).metadata).toEqual({});
      }));
  }
});

describePostgres('postgres prepared statements', () => {
  it('a plan a migration elsewhere made stale fails once as a retryable StoreError; the retry prepares afresh', () =>
    inSchema(
      async (store, schema) => {
        const admin = new pg.Client({ connectionString: pgTestUrl() });
        await admin.connect();
        try {
          const c = await store.createConversation({ agentName: 'a' });
          await store.loadConversation(c.id);
          await admin.query(`ALTER TABLE "${schema}".turnkit_conversations ADD COLUMN added_elsewhere text`);
          const error = await store.loadConversation(c.id).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(StoreError);
          expect((error as StoreError).retryable).toBe(true);
          expect((error as Error).message).toMatch(/schema changed under a prepared statement/);
          expect((await store.loadConversation(c.id)).id).toBe(c.id);
        } finally {
          await admin.end();
        }
      },
      { pool: { max: 1 } },
    ));
});

describePostgres('postgres: a transaction opens with its first statement (decision 88)', () => {
  const awkward = [
    "it's",
    'back\\slash \\x41 and \\\\',
    '$tk$ closes a tag $tk0$ and $tk1$',
    '$1 and $2 look like parameters',
    'ünïcödé ✓ 𝄞',
    '',
    '; SELECT 1; --',
  ];

  it('values written in as literals come back as the parameters would have: strings, numbers, booleans, null', async () => {
    const client = new pg.Client({ connectionString: pgTestUrl() });
    await client.connect();
    try {
      for (const value of awkward) {
        const sql = withLiterals('SELECT $1::text AS t, $2 AS u, $3::bigint AS n, $4 AS b, $5::text AS z', [
          value,
          value,
          42,
          true,
          null,
        ]);
        expect(sql).not.toBeNull();
        const { rows } = await client.query(sql!);
        expect(rows[0]).toEqual({ t: value, u: value, n: '42', b: true, z: null });
      }
      // Untyped, as a parameter: PostgreSQL infers the column's type from the comparison.
      const timed = withLiterals('SELECT $1 < now() AS earlier', ['2020-01-01T00:00:00.000Z']);
      expect((await client.query(timed!)).rows[0]).toEqual({ earlier: true });
    } finally {
      await client.end();
    }
  });

  it('a value a literal cannot carry is left to a parameter', () => {
    expect(withLiterals('SELECT $1', [{ a: 1 }])).toBeNull();
    expect(withLiterals('SELECT $1', [Buffer.from('x')])).toBeNull();
    expect(withLiterals('SELECT $1', [Number.NaN])).toBeNull();
    expect(withLiterals('SELECT $1', ['nul\0'])).toBeNull();
  });

  it('a block whose first statement rides with BEGIN and its lock reads and writes as any other, and rolls back whole', () =>
    inSchema(async (store) => {
      for (const subject of awkward) {
        const c = await store.createConversation({ agentName: 'a', metadata: { subject } });
        const read = await store.atomic(c.id, () => store.loadConversation(c.id));
        expect(read.metadata).toEqual({ subject });
        const failed = await store
          .atomic(c.id, async () => {
            await store.updateConversation(c.id, { metadata: { subject: 'changed' } });
            throw new Error('stop');
          })
          .catch((error: unknown) => error);
        expect((failed as Error).message).toBe('stop');
        expect((await store.loadConversation(c.id)).metadata).toEqual({ subject });
      }
    }));
});
