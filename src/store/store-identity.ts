import { randomBytes } from 'node:crypto';
import { DEFAULT_TASK_QUEUE } from '../workflows/contract.js';

/**
 * Which store this is (decision 67): an id made when the store is first opened and kept in
 * it, where it is (a file, a database and schema, or `memory`), and the task queue its
 * workers and clients use unless they name one. Turns carry the id, so a worker of another
 * store refuses them.
 */
export interface StoreIdentity {
  /** `store_<20 hex>`, written once, on first open. */
  readonly id: string;
  /** A SQLite file, `host:port/database (schema s)`, or `memory`: never a credential. */
  readonly location: string;
  /** `turnkit-<id's 12 last hex>`; `turnkit` for a store that held turns before it had an id. */
  readonly defaultTaskQueue: string;
}

export function newStoreId(): string {
  return `store_${randomBytes(10).toString('hex')}`;
}

/** A new store's own default queue, derived from its id. */
export function taskQueueOfStore(id: string): string {
  return `${DEFAULT_TASK_QUEUE}-${id.slice(-12)}`;
}

/** The queue a worker or client uses: the one it names, else TURNKIT_TASK_QUEUE, else the store's. */
export function resolveTaskQueue(store: { identity?: StoreIdentity } | undefined, given?: string): string {
  return (
    given ?? (process.env['TURNKIT_TASK_QUEUE'] || (store?.identity?.defaultTaskQueue ?? DEFAULT_TASK_QUEUE))
  );
}
