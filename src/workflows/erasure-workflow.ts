/**
 * An erasure (decision 78) as a workflow of its own: it runs the erasure's steps one activity
 * at a time until the last returns the report. The input is the erasure's id alone (the
 * subject stays in the store's ledger row, never in Temporal), and every step reads and saves
 * where the erasure stands there, so the workflow carries no state: it continues as new after
 * a bounded number of steps, and a crashed worker's step is simply run again.
 */
import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { ErasureActivities, ErasureInput, ErasureReport } from '../erasure/erasure-types.js';

const { eraseStep } = proxyActivities<ErasureActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  // Unbounded attempts: a store or Temporal outage is waited out; TurnKit's typed errors are not retried.
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/** Steps per run before the workflow continues as new (three history events each). */
const STEPS_PER_RUN = 500;

export async function erasureWorkflow(input: ErasureInput): Promise<ErasureReport> {
  for (let steps = 1; ; steps++) {
    const result = await eraseStep(input);
    if (result.done) return result.report;
    if (steps >= (input.stepsPerRun ?? STEPS_PER_RUN) || workflowInfo().continueAsNewSuggested)
      return continueAsNew<typeof erasureWorkflow>(input);
  }
}
