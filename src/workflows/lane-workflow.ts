/**
 * A conversation's lane as a workflow (`turnkit-lane-<conversationId>`), woken by
 * signal-with-start. Each wake runs one lane step: deliver the messages addressed to the
 * conversation (each with its wake-up), build the continuation turn of an idle conversation,
 * and start — or nudge — the oldest submitted turn when nothing else runs there. The
 * store's claim is the gate; the lane makes sure somebody knocks. An idle lane closes; the
 * next signal-with-start opens a new run.
 */
import {
  ActivityFailure,
  condition,
  continueAsNew,
  defineSignal,
  log,
  proxyActivities,
  setHandler,
} from '@temporalio/workflow';
import type { TurnActivities } from '../activities/turn-activities.js';
import { NON_RETRYABLE_ERROR_TYPES } from '../errors.js';
import { SIGNALS } from './search-attributes.js';
import type { TurnSettings } from './turn-workflow.js';

export const wakeSignal = defineSignal<[]>(SIGNALS.wake);

export interface LaneWorkflowInput {
  conversationId: string;
  /** Passed on to the turns this lane starts. */
  settings?: TurnSettings;
}

/** How long an idle lane stays open for the next wake before it closes. */
const IDLE = '30 seconds';
/** Steps per run before continue-as-new keeps the history short. */
const STEPS_PER_RUN = 200;

const acts = proxyActivities<TurnActivities>({
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '500 milliseconds',
    maximumInterval: '30 seconds',
    maximumAttempts: 20,
    nonRetryableErrorTypes: [...NON_RETRYABLE_ERROR_TYPES],
  },
});

export async function laneWorkflow(input: LaneWorkflowInput): Promise<void> {
  let wakes = 0;
  setHandler(wakeSignal, () => {
    wakes += 1;
  });
  for (let step = 0; step < STEPS_PER_RUN; step++) {
    if (wakes === 0 && !(await condition(() => wakes > 0, IDLE)) && wakes === 0) return;
    wakes = 0;
    try {
      await acts.laneStep({
        conversationId: input.conversationId,
        ...(input.settings ? { settings: input.settings } : {}),
      });
    } catch (error) {
      // A broken step (say, an agent this worker does not know) must not close the lane for
      // good: it is logged, and the next wake tries again.
      if (!(error instanceof ActivityFailure)) throw error;
      log.warn('turnkit lane step failed', { conversationId: input.conversationId, error: error.message });
    }
  }
  await continueAsNew<typeof laneWorkflow>(input);
}
