/**
 * Issue 49, part 3: the whole store contract with every conversation's content sealed under a
 * tenant key (decision 80): sealing at the store boundary changes no answer the contract
 * defines, on the memory store and on PostgreSQL (jsonb, whose text the store also seals).
 */
import { describe } from 'vitest';
import { MemoryStore } from '../../src/store/memory-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { MemoryTenantKeys } from '../../src/store/sealing/tenant-keys.js';
import type { TenantKeysOptions } from '../../src/store/sql/sealed-columns.js';
import { describePostgres, dropPgTestSchema, pgTestSchema, pgTestUrl } from '../helpers/postgres.js';
import { describeStoreContract } from '../store/contract.js';

/** One tenant for every conversation, so every content column of the contract is sealed. */
const sealed = (): TenantKeysOptions => ({
  provider: new MemoryTenantKeys({ generate: true }),
  tenantOf: () => 'contract',
});

describe('privacy: the store contract with content sealed', () => {
  describeStoreContract('memory', async () => new MemoryStore({ tenantKeys: sealed() }));
});

const schema = pgTestSchema();
describePostgres('privacy: the store contract with content sealed on PostgreSQL', () => {
  describeStoreContract('postgres', () => PostgresStore.open(pgTestUrl(), { schema, tenantKeys: sealed() }), {
    async cleanup(store) {
      await store.close();
      await dropPgTestSchema(schema);
    },
  });
});
