import { StoreError } from '../../errors.js';

/** How long one activity attempt waits for the store to answer again before it gives up. */
const STORE_OUTAGE_WAIT_MS = 60_000;

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Runs `fn`, and runs it again while it fails with a retryable StoreError (the database is
 * unreachable or restarting, read-only for a moment, or rolled a deadlock back), waiting
 * 200 ms, 400 ms, … up to 5 s between tries, for at most `maxWaitMs` after the first failure;
 * then, or once `signal` aborts, the error is thrown and Temporal's retry policy takes over.
 *
 * A store outage is not a failure of the model or the tool: waiting for the store inside the
 * attempt keeps a restart of the database from using up their `maximumAttempts` (a tool has
 * only a few, over a few seconds), and keeps a finished tool's outcome in hand until it can
 * commit. `fn` must be safe to run again after such a failure (a re-dispatch of a step is:
 * it is what a Temporal retry runs; so is a compare-and-set commit).
 */
export async function retryWhileStoreDown<T>(
  fn: () => Promise<T>,
  options: { signal?: AbortSignal; maxWaitMs?: number } = {},
): Promise<T> {
  const maxWait = options.maxWaitMs ?? STORE_OUTAGE_WAIT_MS;
  let firstFailure: number | undefined;
  for (let delay = 200; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      return await fn();
    } catch (error) {
      if (!(error instanceof StoreError && error.retryable) || options.signal?.aborted) throw error;
      firstFailure ??= Date.now();
      const left = maxWait - (Date.now() - firstFailure);
      if (left <= 0) throw error;
      await pause(Math.min(delay, left), options.signal);
      if (options.signal?.aborted) throw error;
    }
  }
}
