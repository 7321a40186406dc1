/**
 * One retention pass on a Temporal Schedule (decision 64): the schedule's action starts this
 * workflow, which runs the pass as one activity on a worker of the task queue. A pass that
 * fails or times out leaves rows the next one removes. Deterministic; only the policy and the
 * counts cross the boundary.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { RetentionActivities, RetentionInput } from '../contract/retention.js';
import type { PruneReport } from '../store/retention/prune-pass.js';

const { pruneStore } = proxyActivities<RetentionActivities>({
  startToCloseTimeout: '6 hours',
  heartbeatTimeout: '2 minutes',
  retry: { maximumAttempts: 5, initialInterval: '10 seconds', maximumInterval: '5 minutes' },
});

export async function retentionWorkflow(input: RetentionInput): Promise<PruneReport> {
  return pruneStore(input);
}
