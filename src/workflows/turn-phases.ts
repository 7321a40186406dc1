/**
 * The claimed life of a turn workflow: claim (waiting for the lane or a join), then the
 * model → tools → output loop, taking the turn back after a reset.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { routedModelActivities } from './activity-options.js';
import type { ModelStepInput } from '../contract/activities.js';
import { TURNKIT_STATUS } from './contract.js';
import { PATCH_RECLAIM, PATCH_SIGNALLED_WAITS, releasedPatch } from './patches.js';
import { runToolsPhase } from './tools-phase.js';
import { commitToOutput, pauseAtBoundary, reopenControls, steerAtBoundary } from './control-boundaries.js';
import type { TurnRun } from './turn-run.js';
import { awaitNudge, continueDue, isLostClaim, nudgeMark, runStoreStep } from './turn-run.js';
import type { ClaimDigest, ModelStepDigest, TerminalNotice, TurnDigest } from '../contract/digests.js';

type ClaimedDigest = Extract<ClaimDigest, { claimed: true }>;

/** How often one run takes its turn back after a LostClaim before it lets go. */
const MAX_RECLAIMS = 3;

/** Claims the turn; refused by a busy lane or an open join, waits for a nudge and claims again. */
export async function claimWhenFree(run: TurnRun): Promise<ClaimDigest> {
  const { store } = run.activities;
  const claimTurn = () => store.claimTurn.executeWithOptions({ summary: 'claim' }, [run.owner()]);
  let seen = nudgeMark(run);
  let claim = await runStoreStep(claimTurn);
  for (
    let wait = 1;
    !claim.claimed && (claim.reason === 'lane_busy' || claim.reason === 'waiting');
    wait = Math.min(wait * 2, 30)
  ) {
    if (releasedPatch(run.features, PATCH_SIGNALLED_WAITS)) {
      // Woken by the lane (its predecessor finished) or by a join target; a timer backs it up.
      const until = claim.reason === 'waiting' && claim.deadline ? Date.parse(claim.deadline) : null;
      await awaitNudge(run, until, seen);
    } else {
      await sleep(`${wait} seconds`);
    }
    seen = nudgeMark(run);
    claim = await runStoreStep(claimTurn);
  }
  if (claim.claimed) {
    upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'running' }]);
    run.console.digest(claim);
  } else {
    run.console.update({ status: claim.status });
  }
  return claim;
}

export interface PhasesDone {
  status: string;
  notice?: TerminalNotice;
  /** The run stopped at a safe point to continue as new (the turn goes on in the next run). */
  continueAsNew?: true;
}

const CONTINUE: PhasesDone = { status: 'running', continueAsNew: true };

/** Model → tools → output until the output phase says the turn is done. */
async function runPhases(run: TurnRun, start: TurnDigest): Promise<PhasesDone> {
  const { model, output: checks, store } = run.activities;
  let digest = start;
  for (;;) {
    if (digest.phase === 'model') {
      // Between phases, nothing in flight: the safe point to continue as new (decision 32).
      if (continueDue(run)) return CONTINUE;
      // A control boundary before the model call: a requested pause, then steering.
      if (run.controls) {
        await pauseAtBoundary(run);
        await steerAtBoundary(run);
      }
      run.modelCalls += 1;
      const stepKey = `${run.claimToken.slice(0, 12)}:${run.modelCalls}`;
      const summary = `model call ${run.modelCalls}`;
      const step = {
        turnId: run.turnId,
        claimToken: run.claimToken,
        step: stepKey,
        maxProviderAttempts: run.activities.maxProviderAttempts,
      };
      const callModel = (input: typeof step & { compaction?: boolean }) =>
        run.modelRoute
          ? routedModelStep(run, summary, input)
          : model.modelStep.executeWithOptions({ summary }, [input]);
      run.console.update({ phase: 'model', modelCalls: run.modelCalls });
      if (run.features.compaction) {
        digest = await callModel({ ...step, compaction: true });
        if ((digest as ModelStepDigest).compactionDue) {
          // Summarize in its own activity, then make the call without asking again.
          run.console.update({ lastStep: 'compaction' });
          await model.compactStep.executeWithOptions({ summary: 'compaction' }, [step]);
          digest = await callModel(step);
        }
      } else {
        digest = await callModel(step);
      }
      const calls = digest.toolCalls.length;
      const served = (digest as ModelStepDigest).model;
      if (served) run.console.update({ model: served });
      run.console.digest(digest);
      run.console.update({
        lastStep: `${summary} → ${calls === 0 ? 'output' : `${calls} tool call${calls === 1 ? '' : 's'}`}`,
      });
    } else if (digest.phase === 'tools') {
      const next = await runToolsPhase(run, digest);
      if (!next) return CONTINUE;
      digest = next;
      run.console.digest(digest);
    } else if (run.controls && (await commitToOutput(run))) {
      // Steering that arrived during the last model call: the model answers again, with it.
      digest = (await steerAtBoundary(run))!;
    } else {
      run.console.update({ phase: 'output' });
      if (digest.outputChecks && run.features.outputAudit) {
        await checks.outputAudit.executeWithOptions({ summary: 'output checks' }, [
          { turnId: run.turnId, claimToken: run.claimToken, maxAttempts: run.activities.maxOutputAttempts },
        ]);
      }
      const output = await runStoreStep(() =>
        store.outputStep.executeWithOptions({ summary: 'output' }, [run.owner()]),
      );
      if (output.done)
        return output.notice ? { status: output.status, notice: output.notice } : { status: output.status };
      reopenControls(run);
      digest = { ...digest, phase: 'model', toolCalls: [] };
    }
  }
}

/**
 * Runs the phases from the claimed digest. A reset run replays the claim its predecessor
 * made, so its first write with its own token fails with LostClaim: it then claims again
 * (taking over a turn an ended run of this workflow still holds) and resumes from the
 * committed phase. A LostClaim the claim cannot undo (cancelled, finished) ends the run.
 */
export async function runClaimedPhases(run: TurnRun, claimed: ClaimedDigest): Promise<PhasesDone> {
  let digest: TurnDigest = claimed;
  run.modelRoute = claimed.modelRoute;
  for (let reclaims = 0; ; reclaims += 1) {
    try {
      return await runPhases(run, digest);
    } catch (error) {
      if (!isLostClaim(error) || reclaims >= MAX_RECLAIMS || !releasedPatch(run.features, PATCH_RECLAIM))
        throw error;
      const again = await runStoreStep(() => run.activities.store.claimTurn(run.owner()));
      if (!again.claimed) throw error;
      digest = again;
      run.modelRoute = again.modelRoute;
    }
  }
}

/**
 * A model step whose chain has queues of its own (decision 43): each model's calls run on
 * its provider's queue (Temporal's rate limit for that provider, shared by every worker);
 * when the engine says a model used up its attempts (`ModelFallback`, with the next model's
 * index), the step is scheduled again on that model's queue, under the same step key.
 */
async function routedModelStep(
  run: TurnRun,
  summary: string,
  input: ModelStepInput,
): Promise<ModelStepDigest> {
  const route = run.modelRoute!;
  const queueOf = (index: number) => route.queues[index] ?? workflowInfo().taskQueue;
  for (let index = 0; ;) {
    const proxy = routedModelActivities(run.settings, queueOf(index), route.fairnessKey);
    try {
      return await proxy.modelStep.executeWithOptions({ summary }, [{ ...input, routed: true }]);
    } catch (error) {
      const next = fallbackIndex(error);
      if (next === undefined || next <= index || next >= route.queues.length) throw error;
      index = next;
    }
  }
}

/** The next model's index of a `ModelFallback` the model activity ended with; else undefined. */
function fallbackIndex(error: unknown): number | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (!(cause instanceof ApplicationFailure) || cause.type !== 'ModelFallback') return undefined;
  const index = (cause.details?.[0] as { index?: unknown } | undefined)?.index;
  return typeof index === 'number' ? index : undefined;
}
