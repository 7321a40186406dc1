/**
 * What the retention workflow (decision 64) and its activity exchange: the policy in, the
 * pass's counts out. Types only: the workflow bundle loads nothing from here at run time.
 */
import type { PruneReport } from '../store/retention/prune-pass.js';
import type { RetentionPolicy } from '../store/retention/retention-policy.js';

export interface RetentionInput {
  policy: RetentionPolicy;
}

export interface RetentionActivities {
  /** One retention pass over the worker's store; heartbeats while it runs. */
  pruneStore(input: RetentionInput): Promise<PruneReport>;
}
