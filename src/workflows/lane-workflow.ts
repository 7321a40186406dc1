/**
 * A conversation's lane as a workflow (`turnkit-lane-<conversationId>`), woken by
 * signal-with-start. Each wake runs one lane step: deliver the messages addressed to the
 * conversation (each with its wake-up), build the continuation turn of an idle conversation,
 * and start — or nudge — the oldest submitted turn when nothing else runs there. The
 * store's claim is the gate; the lane makes sure somebody knocks. An idle lane closes; the
 * next signal-with-start opens a new run. Posts to the conversation arrive as its `post`
 * Update (update-with-start, lane-posts.ts); the lane applies every one it accepted before it
 * closes or continues as new.
 */
import {
  ActivityFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  log,
  patched,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
  sleep,
} from '@temporalio/workflow';
import type { LaneWorkflowInput, TurnActivities } from './contract.js';
import { wakeSignal } from './contract.js';
import { LaneDetails } from './lane-details.js';
import { LanePosts } from './lane-posts.js';
import { whenVersioned } from './versioning.js';

/** How long an idle lane stays open for the next wake before it closes. */
const IDLE = '30 seconds';
/** Lane steps per run before continue-as-new keeps the history short. */
const STEPS_PER_RUN = 200;
/** A step that failed (its activity's attempts used up) is tried again after this, doubling. */
const RETRY_FIRST_MS = 1_000;
const RETRY_MAX_MS = 5 * 60_000;
/**
 * Failed steps in a row (each after its activity's 20 attempts) after which the lane stops
 * retrying on its own: about 4 minutes of backoff; then only a real wake tries again.
 */
const FAILURE_LIMIT = 8;

/**
 * Release 0.5's lane changes, decided in the run's first activation (before any command): a
 * wake that arrives during the run's last step is carried into the continued run
 * (`pendingWake`), and a step that failed keeps its wake and is tried again after a backoff
 * timer instead of leaving the lane idle until some unrelated wake — up to `failureLimit`
 * steps in a row (counted across continue-as-new): then the lane waits for the next wake
 * (or closes), and its current details say that its steps fail.
 */
const PATCH_LANE_0_5 = 'turnkit-lane-0.5';

const activities = proxyActivities<TurnActivities>({
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '500 milliseconds',
    maximumInterval: '30 seconds',
    maximumAttempts: 20,
  },
});

export async function laneWorkflow(input: LaneWorkflowInput): Promise<void> {
  const keepsWakes = patched(PATCH_LANE_0_5);
  let wakes = keepsWakes && input.pendingWake ? 1 : 0;
  setHandler(wakeSignal, () => {
    wakes += 1;
  });
  const details = new LaneDetails(input.conversationId);
  const steps =
    keepsWakes && input.stepsPerRun !== undefined ? Math.max(1, input.stepsPerRun) : STEPS_PER_RUN;
  let retryMs = RETRY_FIRST_MS;
  // (0.5) Failed steps in a row; at the limit the lane stops retrying on its own.
  let failures = keepsWakes ? (input.failedSteps ?? 0) : 0;
  const failureLimit = keepsWakes ? Math.max(1, input.failureLimit ?? FAILURE_LIMIT) : FAILURE_LIMIT;
  if (failures >= failureLimit) details.failing(failures);
  // Posts add their events to this run's history: they count toward its steps.
  const posts = new LanePosts(input, () => {
    wakes += 1;
  });
  posts.register();
  const spent = (laneSteps: number) => laneSteps + posts.accepted >= steps;
  for (let laneSteps = 0; !spent(laneSteps); laneSteps++) {
    if (wakes === 0) {
      const next = await nextWake(
        () => wakes > 0,
        () => spent(laneSteps),
        input.settings?.laneIdle ?? IDLE,
      );
      if (next === 'close') return;
      if (next === 'continue') break;
    }
    wakes = 0;
    try {
      const step = await activities.laneStep({
        conversationId: input.conversationId,
        ...(input.settings ? { settings: input.settings } : {}),
      });
      retryMs = RETRY_FIRST_MS;
      failures = 0;
      details.stepped(step);
    } catch (error) {
      // A broken step (say, an agent this worker does not know, or a long store outage) must
      // not close the lane for good: it is logged, and (0.5) its wake is kept and the step is
      // tried again after a backoff, up to `failureLimit` steps in a row; then (and before
      // 0.5) the next wake tries again.
      if (!(error instanceof ActivityFailure)) throw error;
      log.warn('turnkit lane step failed', { conversationId: input.conversationId, error: error.message });
      if (keepsWakes) {
        failures += 1;
        if (failures < failureLimit) {
          wakes = Math.max(wakes, 1);
          await sleep(retryMs);
          retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
        } else {
          // Given up for now: the wake is dropped, the next one tries once more.
          details.failing(failures, error.cause?.message ?? error.message);
        }
      }
    }
  }
  // Posts accepted so far are applied first; a queued one's wake is carried over.
  await condition(allHandlersFinished);
  // The signal handler is synchronous, so every wake delivered so far is counted in `wakes`:
  // (0.5) the continued run starts with a step when one arrived during this run's last step.
  await continueAsNew<typeof laneWorkflow>(
    keepsWakes
      ? {
          ...withoutCarry(input),
          ...(wakes > 0 ? { pendingWake: true } : {}),
          ...(failures > 0 ? { failedSteps: failures } : {}),
        }
      : input,
  );
}

/**
 * Waits for the next wake, up to the idle time: `step`; `continue` when posts spent the run's
 * steps meanwhile; `close` when nothing came. No post is lost: every one accepted so far is
 * applied before the lane closes (and one that queues wakes it again).
 */
async function nextWake(
  woken: () => boolean,
  spent: () => boolean,
  idle: string | number,
): Promise<'step' | 'close' | 'continue'> {
  const early = await condition(() => woken() || spent(), idle);
  if (!woken()) await condition(allHandlersFinished);
  if (woken()) return 'step';
  return early ? 'continue' : 'close';
}

/** The input without what a run carries for the next one only. */
function withoutCarry(input: LaneWorkflowInput): LaneWorkflowInput {
  const { pendingWake: _carried, failedSteps: _failed, ...rest } = input;
  return rest;
}

// Worker Versioning (createWorker's `deployment`): a lane moves to the current build at its
// next workflow task, so a roll-out never waits for lanes (decision 34).
setWorkflowOptions(whenVersioned('AUTO_UPGRADE'), laneWorkflow);
