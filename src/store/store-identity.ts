import { randomBytes } from 'node:crypto';
import { DEFAULT_TASK_QUEUE } from '../workflows/contract.js';
import type { StoreIdentity } from './types.js';

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
