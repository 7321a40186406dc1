import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/errors.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { openPgTestStore, requirePostgres } from '../helpers/postgres.js';
import { describeStoreContract } from './contract.js';

const available = await requirePostgres();

describe.skipIf(!available)('postgres', () => {
  describeStoreContract('postgres', async () => {
    const { store, drop } = await openPgTestStore();
    return { store, close: drop };
  });

  it('migrations applied again on an existing schema are harmless', async () => {
    const { store, schema, drop } = await openPgTestStore();
    const conversation = await store.createConversation({ agentName: 'a' });
    const { PG_TEST_URL } = await import('../helpers/postgres.js');
    const again = await PostgresStore.open(PG_TEST_URL, { options: `-c search_path=${schema}` });
    expect((await again.loadConversation(conversation.id)).agentName).toBe('a');
    await again.close();
    await drop();
  });
});

describe('postgres unreachable', () => {
  it('an unreachable server is a retryable StoreError naming host and port', async () => {
    const error = await PostgresStore.open('postgres://postgres@127.0.0.1:1/turnkit', {
      connectionTimeoutMillis: 2_000,
    }).catch((e) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(error.message).toContain('127.0.0.1:1');
    expect(error.retryable).toBe(true);
  });
});
