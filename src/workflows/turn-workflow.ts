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
  setHandler,
  setWorkflowOptions,
} from '@temporalio/workflow';
import { turnActivities } from './activity-options.js';
import { runFeatures } from './patches.js';
import { RootDeadline } from './root-deadline.js';
import { TurnControls } from './controls.js';
import { TurnCancel } from './turn-cancel.js';
import type { TurnWorkflowInput, TurnWorkflowResult } from './contract.js';
import { laneFreeSignal, targetFinishedSignal } from './contract.js';
import type { TurnEnd } from './turn-end.js';
import { cancelTurn, continueTurn, endRun, failTurn } from './turn-end.js';
import { claimWhenFree, runClaimedPhases } from './turn-phases.js';
import { isLostClaim, isStaleTask, newTurnRun } from './turn-run.js';
import { whenVersioned } from './versioning.js';

export async function turnWorkflow(input: TurnWorkflowInput): Promise<TurnWorkflowResult> {
  const { turnId } = input;
  // Before any command: see patches.ts.
  const features = runFeatures();
  const deadline = new RootDeadline(features.v0_6);
  const activities = turnActivities(input.settings, features.v0_6 ? deadline : undefined);
  // Everything the turn does runs in this scope, so cancel and the root timeout stop it alike.
  // On 0.5 runs it is shielded from Temporal's own cancellation, which is a request the
  // cancel policy decides on (below), not an order.
  const shield = features.v0_5 ? new CancellationScope({ cancellable: false }) : undefined;
  const scope = new CancellationScope(shield ? { cancellable: true, parent: shield } : undefined);
  // Approvals and turn controls (Updates), on runs that started with them.
  const controls = features.controls ? new TurnControls(input.continued) : null;
  let nudges = 0;
  const nudge = () => {
    nudges += 1;
  };
  setHandler(laneFreeSignal, nudge);
  setHandler(targetFinishedSignal, nudge);
  // A handler's store step runs beside the main flow's: on runs with the controls it is a
  // scheduled activity, as the controls' authorization is (decision 23); earlier runs keep the
  // local one their histories recorded.
  const cancel = new TurnCancel(
    turnId,
    features.controls ? activities.controls : activities.store,
    scope,
    controls,
  );
  cancel.register(shield);
  deadline.onExpire = () => cancel.expire();

  const run = newTurnRun(input, { activities, features, controls, deadline, nudges: () => nudges });
  controls?.register(run, shield);
  let end: TurnEnd;
  try {
    end = await scope.run(async (): Promise<TurnEnd> => {
      const { claim, step } = await claimWhenFree(run);
      if (!claim.claimed) return { result: { turnId, status: claim.status, claimed: false } };
      deadline.set(claim.deadline);
      const done = await runClaimedPhases(run, claim, step);
      if (done.continueAsNew) {
        // Handlers drained first: a cancel that arrived with the switch ends the turn below.
        deadline.arm();
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
      isCancellation(error) && !cancel.timedOut
        ? await cancelTurn(run, cancel.request ?? { descendants: 'retain', principal: null })
        : await failTurn(run, error, cancel.timedOut);
  }
  // Outside the try: continue-as-new is thrown, and ends this run.
  if (end.continueAsNew) return continueTurn(run, input);
  return endRun(run, end, shield);
}

// Worker Versioning (createWorker's `deployment`): a turn runs to its end on the build it
// started on, its continuations too; workers without a deployment ignore this (decision 34).
setWorkflowOptions(whenVersioned('PINNED'), turnWorkflow);
