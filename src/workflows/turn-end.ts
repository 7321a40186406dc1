/**
 * How a turn workflow ends when its phases did not finish the turn: cancelled (a signal or
 * Temporal's own request) or failed; then who must hear about it.
 */
import {
  allHandlersFinished,
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  makeContinueAsNewFunc,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { CancelRequest } from '../contract/cancel-request.js';
import type { TurnContinuation, TurnWorkflowInput, TurnWorkflowResult } from './contract.js';
import { cancelSignal, targetFinishedSignal, TURNKIT_STATUS, turnWorkflowId } from './contract.js';
import { PATCH_FAIL_ACTIVITY, PATCH_NOTIFY, releasedPatch } from './patches.js';
import type { TurnRun } from './turn-run.js';
import { settingsOf, turnError } from './turn-run.js';
import type { turnWorkflow } from './turn-workflow.js';
import type { TerminalNotice, TurnErrorDigest } from '../contract/digests.js';

export interface TurnEnd {
  result: TurnWorkflowResult;
  notice?: TerminalNotice | undefined;
  /** The phases stopped at a safe point: the run continues as new (`continueTurn`). */
  continueAsNew?: true;
}

/**
 * Continues the turn in a new run of its workflow (decision 32). The store holds the turn,
 * so the next run gets ids and what only this run's memory knows: a person's controls not
 * yet applied, the approval deadlines, the children started. It claims the turn by takeover
 * (its own run id is its token; the takeover needs the turn's own workflow and a row this run
 * left), so every write of this run after the switch fails with LostClaim.
 */
export async function continueTurn(run: TurnRun, input: TurnWorkflowInput): Promise<never> {
  const info = workflowInfo();
  const continued: TurnContinuation = {
    runs: (input.continued?.runs ?? 0) + 1,
    modelCalls: run.modelCalls,
    children: [...run.children],
    pauseRequested: false,
    steers: [],
    decisions: [],
    approvalDeadlines: [],
    ...run.controls?.handOver(),
  };
  const next = makeContinueAsNewFunc<typeof turnWorkflow>({
    // Every search attribute the run has, as upserted (TurnKitStatus, TurnKitScheduleId, the
    // application's own): a list given here replaces them. Static summary and details are
    // start options that continue-as-new cannot carry (SDK 1.24).
    typedSearchAttributes: info.typedSearchAttributes,
    ...(run.settings?.workflowTaskTimeout !== undefined
      ? { workflowTaskTimeout: run.settings.workflowTaskTimeout }
      : {}),
  });
  return next({ turnId: run.turnId, ...settingsOf(run), continued });
}

/**
 * A child turn (a sub-agent, a launched agent) tells its parent's workflow that it ended: a
 * parent whose run continued as new while the child ran follows it by this signal.
 */
async function wakeParent(parent: { workflowId: string }): Promise<void> {
  await CancellationScope.nonCancellable(() =>
    getExternalWorkflowHandle(parent.workflowId)
      .signal(targetFinishedSignal, workflowInfo().workflowId)
      .catch(() => undefined),
  );
}

/** Cancels the turn in the store; a cascade also signals each child this run started. */
export async function cancelTurn(run: TurnRun, request: CancelRequest): Promise<TurnEnd> {
  const cancelled = await CancellationScope.nonCancellable(async () => {
    const done = await run.activities.store.cancelTurn({
      turnId: run.turnId,
      descendants: request.descendants,
    });
    if (request.descendants === 'cascade') {
      // The store cascade is already committed; the signal stops each child's in-flight work.
      for (const child of run.children) {
        await getExternalWorkflowHandle(turnWorkflowId(child))
          .signal(cancelSignal, { descendants: 'cascade', principal: request.principal })
          .catch(() => undefined);
      }
    }
    return done;
  });
  return {
    result: { turnId: run.turnId, status: cancelled.status, claimed: true },
    notice: cancelled.notice,
  };
}

/** Fails the turn with what stopped it, or TurnKit's "turn timed out" after the root timer. */
export async function failTurn(run: TurnRun, error: unknown, timedOut: boolean): Promise<TurnEnd> {
  const failure: TurnErrorDigest = timedOut
    ? { class: 'BudgetError', message: 'turn timed out' }
    : turnError(error);
  const { terminal, store } = run.activities;
  const failed = await CancellationScope.nonCancellable(() =>
    (releasedPatch(run.features, PATCH_FAIL_ACTIVITY) ? terminal : store).failTurn({
      ...run.owner(),
      error: failure,
    }),
  );
  return {
    result: { turnId: run.turnId, status: failed.status, claimed: true, error: failure },
    notice: failed.notice,
  };
}

/** Whether anyone is to hear of this turn's end: waiters to signal, lanes to wake. */
function hasListeners(run: TurnRun, notice: TerminalNotice | undefined): notice is TerminalNotice {
  return (
    notice !== undefined &&
    (notice.waiters.length > 0 || notice.lanes.length > 0) &&
    releasedPatch(run.features, PATCH_NOTIFY)
  );
}

/** Tells waiters that this turn finished and wakes the lanes that have work. */
async function notify(run: TurnRun, notice: TerminalNotice): Promise<void> {
  await CancellationScope.nonCancellable(async () => {
    for (const waiter of notice.waiters) {
      await getExternalWorkflowHandle(turnWorkflowId(waiter))
        .signal(targetFinishedSignal, workflowInfo().workflowId)
        .catch(() => undefined);
    }
    if (notice.lanes.length > 0) {
      await run.activities.store.wakeLanes({ conversationIds: notice.lanes, ...settingsOf(run) });
    }
  });
}

/** The turn ended: its status shown, waiters and the parent told, open controls answered. */
export async function endRun(
  run: TurnRun,
  end: TurnEnd,
  shield: CancellationScope | undefined,
): Promise<TurnWorkflowResult> {
  const { controls } = run;
  if (controls) controls.finished = true;
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: end.result.status }]);
  run.console.update({ status: end.result.status, runningTools: [] });
  // Each step is awaited only when it has work: the SDK records a stack trace for every
  // promise a workflow creates (decision 90), and most turns have no one to tell.
  if (hasListeners(run, end.notice)) await notify(run, end.notice);
  const parent = workflowInfo().parent;
  if (run.features.v0_5 && end.result.claimed && parent) await wakeParent(parent);
  // Controls still being handled are refused now; the run ends after they answered.
  if (controls && !allHandlersFinished())
    await (shield ? shield.run(() => condition(allHandlersFinished)) : condition(allHandlersFinished));
  return end.result;
}
