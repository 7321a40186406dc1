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
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
} from '@temporalio/workflow';
import type { LaneWorkflowInput, TurnActivities } from './contract.js';
import { wakeSignal } from './contract.js';
import { whenVersioned } from './versioning.js';

/** How long an idle lane stays open for the next wake before it closes. */
const IDLE = '30 seconds';
/** Lane steps per run before continue-as-new keeps the history short. */
const STEPS_PER_RUN = 200;

const activities = proxyActivities<TurnActivities>({
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '500 milliseconds',
    maximumInterval: '30 seconds',
    maximumAttempts: 20,
  },
});

export async function laneWorkflow(input: LaneWorkflowInput): Promise<void> {
  let wakes = 0;
  setHandler(wakeSignal, () => {
    wakes += 1;
  });
  // What the Temporal UI shows of the lane while it is open (not a command: replay-neutral).
  const seen = { delivered: 0, started: 0, queued: 0, last: null as string | null };
  const show = () =>
    setCurrentDetails(
      `**conversation** \`${input.conversationId}\` · delivered ${seen.delivered} · turns started ${seen.started}` +
        ` · queued ${seen.queued}${seen.last ? `\n\nlast started \`${seen.last}\`` : ''}`,
    );
  show();
  for (let laneSteps = 0; laneSteps < STEPS_PER_RUN; laneSteps++) {
    if (wakes === 0 && !(await condition(() => wakes > 0, IDLE)) && wakes === 0) return;
    wakes = 0;
    try {
      const step = await activities.laneStep({
        conversationId: input.conversationId,
        ...(input.settings ? { settings: input.settings } : {}),
      });
      seen.delivered += step.delivered;
      seen.queued = step.queued ?? 0;
      if (step.started) {
        seen.started += 1;
        seen.last = step.started;
      }
      show();
    } catch (error) {
      // A broken step (say, an agent this worker does not know) must not close the lane for
      // good: it is logged, and the next wake tries again.
      if (!(error instanceof ActivityFailure)) throw error;
      log.warn('turnkit lane step failed', { conversationId: input.conversationId, error: error.message });
    }
  }
  await continueAsNew<typeof laneWorkflow>(input);
}

// Worker Versioning (createWorker's `deployment`): a lane moves to the current build at its
// next workflow task, so a roll-out never waits for lanes (decision 34).
setWorkflowOptions(whenVersioned('AUTO_UPGRADE'), laneWorkflow);
