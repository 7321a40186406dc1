import type { StoreIdentity } from '../types.js';
import { DEFAULT_TASK_QUEUE } from '../../workflows/contract.js';
import { newStoreId, taskQueueOfStore } from '../store-identity.js';
import type { SqlDriver } from './driver.js';

/**
 * The store's identity row (migration 9), written once under the migration lock so two
 * processes opening a new store at once agree on it. A store that already held turns keeps
 * the queue its running turns are on (`turnkit`); a new one gets a queue of its own.
 */
export async function loadStoreIdentity(driver: SqlDriver, location: string): Promise<StoreIdentity> {
  return driver.transaction(async (connection) => {
    await driver.lock(connection, 'migrations');
    const [row] = await connection.query(`SELECT id, default_task_queue FROM turnkit_store LIMIT 1`);
    if (row) return { id: String(row['id']), location, defaultTaskQueue: String(row['default_task_queue']) };
    const held = await connection.query(`SELECT id FROM turnkit_turns LIMIT 1`);
    const id = newStoreId();
    const defaultTaskQueue = held.length > 0 ? DEFAULT_TASK_QUEUE : taskQueueOfStore(id);
    await connection.query(
      `INSERT INTO turnkit_store (id, default_task_queue, created_at) VALUES (?, ?, ${driver.dialect.param('time')})`,
      [id, defaultTaskQueue, new Date().toISOString()],
    );
    return { id, location, defaultTaskQueue };
  });
}
