/**
 * One TurnKit turn as one Temporal workflow: claim, then model → tools → output phases as
 * activities until the turn is terminal. Deterministic: all I/O happens in activities, and
 * only ids and small digests cross the boundary.
 */
import {
  allHandlersFinished,
  CancellationScope,
  condition,
  isCancellation,
  log,
  setHandler,
  setWorkflowOptions,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { CancelRequest } from '../contract/cancel-request.js';
import { parseCancelRequest } from '../contract/cancel-request.js';
import { turnActivities } from './activity-options.js';
import { TurnConsole } from './console.js';
import { runFeatures } from './patches.js';
import { registerControls, TurnControls } from './controls.js';
import type { TurnWorkflowInput, TurnWorkflowResult } from './contract.js';
import {
  cancelSignal,
  claimTokenOf,
  laneFreeSignal,
  targetFinishedSignal,
  TURNKIT_STATUS,
} from './contract.js';
import type { TurnEnd } from './turn-end.js';
import { cancelTurn, continueTurn, failTurn, notify, wakeParent } from './turn-end.js';
import { claimWhenFree, runClaimedPhases } from './turn-phases.js';
import type { TurnRun } from './turn-run.js';
import { isLostClaim, isStaleTask } from './turn-run.js';
import { whenVersioned } from './versioning.js';

export async function turnWorkflow(input: TurnWorkflowInput): Promise<TurnWorkflowResult> {
  const { turnId } = input;
  // Before any command: see patches.ts.
  const features = runFeatures();
  const activities = turnActivities(input.settings);
  // Everything the turn does runs in this scope, so cancel and the root timeout stop it alike.
  // On 0.5 runs it is shielded from Temporal's own cancellation, which is a request the
  // cancel policy decides on (below), not an order.
  const shield = features.v0_5 ? new CancellationScope({ cancellable: false }) : undefined;
  const scope = new CancellationScope(shield ? { cancellable: true, parent: shield } : undefined);
  let cancel: CancelRequest | null = null;
  let timedOut = false;
  let nudges = 0;
  // Approvals and turn controls (Updates), on runs that started with them.
  const controls = features.controls ? new TurnControls(input.continued) : null;
  const nudge = () => {
    nudges += 1;
  };
  setHandler(laneFreeSignal, nudge);
  setHandler(targetFinishedSignal, nudge);
  // A handler's store step runs beside the main flow's: on runs with the controls it is a
  // scheduled activity, as the controls' authorization is (decision 23); earlier runs keep the
  // local one their histories recorded.
  const cancelChecks = features.controls ? activities.controls : activities.store;
  const onCancel = async (payload: unknown) => {
    const parsed = parseCancelRequest(payload);
    if (!parsed.ok) {
      await cancelChecks.rejectCancel({ turnId, reason: parsed.reason });
      return;
    }
    const verdict = await cancelChecks.authorizeCancel({ turnId, ...parsed.value });
    if (!verdict.allowed || cancel) return;
    cancel = parsed.value;
    if (controls) controls.finished = true;
    scope.cancel();
  };
  // Shielded too: a cancel signal still counts after Temporal's own cancel was refused.
  setHandler(cancelSignal, (payload: unknown) =>
    shield ? shield.run(() => onCancel(payload)) : onCancel(payload),
  );
  // `temporal workflow cancel`, the UI's Cancel: unsigned, `verification: 'temporal'`.
  if (shield)
    void shield.cancelRequested.catch(async () => {
      const native = { descendants: 'retain' as const, principal: null };
      // An authorization that fails for good (the policy threw something else, the store stayed
      // down) is a refusal: an unhandled rejection here would fail every workflow task.
      const verdict = await CancellationScope.nonCancellable(() =>
        cancelChecks.authorizeCancel({ turnId, ...native, native: true }),
      ).catch((error: unknown) => {
        log.warn('turnkit native cancel: authorization failed, the cancel is refused', {
          turnId,
          error: error instanceof Error ? error.message : String(error),
        });
        return { allowed: false };
      });
      if (!verdict.allowed || cancel) return;
      cancel = native;
      if (controls) controls.finished = true;
      scope.cancel();
    });

  // The claim token is bound to this run: a retried claim by the same run is recognized,
  // and a reset or any other run gets a different token, which fences this one out.
  const claimToken = claimTokenOf(workflowInfo().runId);
  const run: TurnRun = {
    activities,
    turnId,
    claimToken,
    settings: input.settings,
    children: new Set(input.continued?.children),
    nudges: () => nudges,
    modelCalls: input.continued?.modelCalls ?? 0,
    console: new TurnConsole(turnId),
    features,
    controls,
    owner: () => ({ turnId, claimToken, taskHistoryLength: workflowInfo().historyLength }),
    continued: input.continued,
  };
  if (controls) registerControls(run, controls, shield);
  // The UI's current details of a continued run (its static summary stays on the first run).
  if (input.continued)
    run.console.update({
      modelCalls: run.modelCalls,
      lastStep: `continued as new: run ${input.continued.runs + 1} of the turn's workflow`,
    });
  let end: TurnEnd;
  try {
    end = await scope.run(async (): Promise<TurnEnd> => {
      const claim = await claimWhenFree(run);
      if (!claim.claimed) return { result: { turnId, status: claim.status, claimed: false } };
      if (claim.deadline) {
        const remaining = Math.max(Date.parse(claim.deadline) - Date.now(), 0);
        // The root timeout is a durable timer from submission; it cancels whatever is in flight.
        void CancellationScope.nonCancellable(() => sleep(remaining)).then(() => {
          timedOut = true;
          scope.cancel();
        });
      }
      const done = await runClaimedPhases(run, claim);
      if (done.continueAsNew) {
        // Handlers drained first: a cancel that arrived with the switch ends the turn below.
        await condition(allHandlersFinished);
        const current = CancellationScope.current();
        if (current.consideredCancelled) await current.cancelRequested;
        return { result: { turnId, status: done.status, claimed: true }, continueAsNew: true };
      }
      return { result: { turnId, status: done.status, claimed: true }, notice: done.notice };
    });
  } catch (error) {
    if (controls) controls.finished = true;
    if (isLostClaim(error) || isStaleTask(error)) return { turnId, status: 'lost', claimed: true };
    // A cancel signal, or Temporal's own cancellation request (on runs before 0.5 treated as
    // authorized without asking the policy).
    end =
      isCancellation(error) && !timedOut
        ? await cancelTurn(run, cancel ?? { descendants: 'retain', principal: null })
        : await failTurn(run, error, timedOut);
  }
  // Outside the try: continue-as-new is thrown, and ends this run.
  if (end.continueAsNew) return continueTurn(run, input);
  if (controls) controls.finished = true;
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: end.result.status }]);
  run.console.update({ status: end.result.status, runningTools: [] });
  await notify(run, end.notice);
  if (features.v0_5 && end.result.claimed) await wakeParent();
  // Controls still being handled are refused now; the run ends after they answered.
  if (controls)
    await (shield ? shield.run(() => condition(allHandlersFinished)) : condition(allHandlersFinished));
  return end.result;
}

// Worker Versioning (createWorker's `deployment`): a turn runs to its end on the build it
// started on, its continuations too; workers without a deployment ignore this (decision 34).
setWorkflowOptions(whenVersioned('PINNED'), turnWorkflow);
