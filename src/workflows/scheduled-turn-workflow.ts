/**
 * One firing of a TurnKit schedule (a Temporal Schedule's action). A schedule cannot start a
 * turn's workflow itself: the turn's rows must exist first, and Temporal appends the firing's
 * time to the workflow id. So the firing writes the rows in an activity (ids derived from this
 * workflow, so a retry writes nothing twice) and runs the turn as its child, waiting for it:
 * the schedule's overlap policy sees the firing run as long as its turn does. Deterministic;
 * only ids and small digests cross the boundary.
 */
import {
  CancellationScope,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setWorkflowOptions,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { ScheduledTurnInput, ScheduledTurnResult } from '../contract/schedule.js';
import { TERMINAL_TURN_STATUSES } from '../contract/turn-statuses.js';
import type { TurnActivities } from './contract.js';
import { TURNKIT_SCHEDULE_ID, turnStartOptions } from './contract.js';
import type { turnWorkflow } from './turn-workflow.js';
import { whenVersioned } from './versioning.js';

const activities = proxyActivities<TurnActivities>({
  startToCloseTimeout: '1 minute',
  // Store steps wait out an outage of about five minutes; TurnKit errors are not retried.
  retry: { maximumAttempts: 40, initialInterval: '200 milliseconds', maximumInterval: '10 seconds' },
});

const FINISHED = new Set<string>(TERMINAL_TURN_STATUSES);

/** A turn whose workflow somebody else started (its lane): followed through the store. */
async function followTurn(turnId: string): Promise<string> {
  for (let wait = 1; ; wait = Math.min(wait * 2, 30)) {
    const { status } = await activities.turnStatus({ turnId });
    if (FINISHED.has(status)) return status;
    await sleep(`${wait} seconds`);
  }
}

export async function scheduledTurnWorkflow(definition: ScheduledTurnInput): Promise<ScheduledTurnResult> {
  const info = workflowInfo();
  const prepared = await activities.prepareScheduledTurn({
    definition,
    firingId: info.workflowId,
    firstRunId: info.originalExecutionRunId || info.firstExecutionRunId,
    firedAt: info.startTime.getTime(),
  });
  if (prepared.skipped) {
    setCurrentDetails(`**schedule** \`${definition.scheduleId}\` · skipped: ${prepared.reason}`);
    return { turnId: null, status: 'skipped', skipped: prepared.reason };
  }
  const turnId = prepared.turnId;
  setCurrentDetails(`**schedule** \`${definition.scheduleId}\` · turn \`${turnId}\``);
  // Started and awaited outside the cancellable scope: a cancel of this firing (overlap
  // `cancel_other`) is TurnKit's cancel of the turn, authorized as any other, never Temporal's.
  const done = await CancellationScope.nonCancellable(async () => {
    const options = turnStartOptions({
      turn: { ...prepared, id: turnId },
      task: definition.task,
      settings: definition.settings,
    });
    try {
      const child = await startChild<typeof turnWorkflow>('turnWorkflow', {
        ...options,
        typedSearchAttributes: [
          ...options.typedSearchAttributes,
          { key: TURNKIT_SCHEDULE_ID, value: definition.scheduleId },
        ],
        // The turn is an ordinary turn: it outlives its firing whatever happens to it.
        parentClosePolicy: 'ABANDON',
        cancellationType: 'ABANDON',
      });
      return { status: child.result().then((result) => result.status) };
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      return { status: followTurn(turnId) };
    }
  });
  let status: string;
  try {
    status = await Promise.race([done.status, CancellationScope.current().cancelRequested]);
  } catch (error) {
    if (!isCancellation(error)) throw error;
    status = await CancellationScope.nonCancellable(async () => {
      await activities.cancelScheduledTurn({ turnId, principal: definition.principal ?? null });
      return done.status;
    });
  }
  return { turnId, status };
}

// Worker Versioning (createWorker's `deployment`): a firing waits for its turn on the build
// both started on, as the turn does (decision 34).
setWorkflowOptions(whenVersioned('PINNED'), scheduledTurnWorkflow);
