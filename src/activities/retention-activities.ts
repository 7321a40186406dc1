/** The retention workflow's activity: one pass over the worker's store (decision 64). */
import { Context } from '@temporalio/activity';
import type { RetentionActivities } from '../contract/retention.js';
import type { Runtime } from '../engine/runtime.js';
import { pruneStore } from '../store/retention/prune-store.js';

const HEARTBEAT_MS = 20_000;

export function retentionActivities(
  runtime: Runtime,
  mappingFailures: <T>(fn: () => Promise<T>) => Promise<T>,
): RetentionActivities {
  return {
    pruneStore: (input) =>
      mappingFailures(async () => {
        const context = Context.current();
        // Also between batches that delete nothing (a walk over live runs' rows).
        const beat = setInterval(() => context.heartbeat(), HEARTBEAT_MS);
        try {
          return await pruneStore(runtime.store, input.policy, { onBatch: () => context.heartbeat() });
        } finally {
          clearInterval(beat);
        }
      }),
  };
}
