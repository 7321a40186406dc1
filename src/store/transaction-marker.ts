/**
 * Which async chain is inside an open store transaction, for every store of the process.
 * User code (event listeners, the authorization policy) must never run there: it would see
 * writes that can still roll back, and hold the SQLite writer lock or PostgreSQL's root lock
 * while it runs. Work that must follow a write waits for its commit (`afterCommit`).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { StoreError } from '../errors.js';

interface OpenTransaction {
  open: boolean;
  afterCommit: (() => Promise<void>)[];
}

const current = new AsyncLocalStorage<OpenTransaction>();

export function inStoreTransaction(): boolean {
  return current.getStore()?.open === true;
}

/**
 * Runs the body of an outermost transaction marked as open. Once it committed (returned),
 * the work queued by `afterCommit` runs, outside the mark; after a rollback it is dropped. A
 * transaction of another store opened inside this one hands its queue to the outer one.
 */
export async function markTransaction<T>(body: () => Promise<T>): Promise<T> {
  const outer = current.getStore();
  const marker: OpenTransaction = { open: true, afterCommit: [] };
  let result: T;
  try {
    result = await current.run(marker, body);
  } finally {
    marker.open = false;
  }
  if (outer?.open) outer.afterCommit.push(...marker.afterCommit);
  else for (const work of marker.afterCommit) await work();
  return result;
}

/** Runs `work` once the open transaction commits (never, if it rolls back); now when none is open. */
export async function afterCommit(work: () => Promise<void>): Promise<void> {
  const marker = current.getStore();
  if (marker?.open) marker.afterCommit.push(work);
  else await work();
}

/** Throws when called inside an open store transaction: `what` is user code that must not run there. */
export function assertNoTransaction(what: string): void {
  if (inStoreTransaction())
    throw new StoreError(
      `${what} was called inside an open store transaction: user code runs before the transaction or after its commit`,
    );
}
