/** The erasure workflow's activity: one step of the erasure on the worker's store (decision 78). */
import { Context } from '@temporalio/activity';
import type { ErasureActivities } from '../erasure/erasure-types.js';
import { erasureStep } from '../erasure/erasure-steps.js';
import type { Runtime } from '../engine/runtime.js';
import { ConfigError } from '../errors.js';
import { SqlStore } from '../store/sql/sql-store.js';

export function erasureActivities(
  runtime: Runtime,
  mappingFailures: <T>(fn: () => Promise<T>) => Promise<T>,
): ErasureActivities {
  return {
    eraseStep: (input) =>
      mappingFailures(async () => {
        const { store } = runtime;
        if (!(store instanceof SqlStore))
          throw new ConfigError(
            `erasure needs one of TurnKit's own stores (SQLite, PostgreSQL, memory), not a ${store.backend} store of another implementation`,
          );
        const context = Context.current();
        return erasureStep(
          { sql: store.statements(), temporal: context.client, beat: () => context.heartbeat() },
          input.erasureId,
        );
      }),
  };
}
