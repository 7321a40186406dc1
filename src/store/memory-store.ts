import { memoryDriver } from './sqlite-store.js';
import { SqlStore } from './sql/sql-store.js';
import { newStoreId, taskQueueOfStore } from './store-identity.js';
import type { StoreIdentity } from './types.js';
import type { TenantKeysOptions } from './sql/sealed-columns.js';

/** Each memory store is a store of its own, with its own queue: it lives in one process. */
function memoryIdentity(): StoreIdentity {
  const id = newStoreId();
  return { id, location: 'memory', defaultTaskQueue: taskQueueOfStore(id) };
}

/**
 * The in-process store (backend `memory`, `memory:` URLs): the SQL store itself, on a private
 * SQLite database in memory (decision 60), so every rule of the store contract has one
 * implementation. Nothing survives `close()` or the process. It has one connection: a read
 * outside an open block waits for the block to end, then sees what it committed.
 */
export class MemoryStore extends SqlStore {
  /** `tenantKeys`: seal content with per-tenant keys (decision 80). */
  constructor(options: { tenantKeys?: TenantKeysOptions } = {}) {
    super(memoryDriver(), memoryIdentity(), options.tenantKeys);
  }
}
