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
import { awaitNudge, continueDue, finishRequest, isLostClaim, nudgeMark, runStoreStep } from './turn-run.js';
import type {
  ClaimDigest,
  ClaimStepDigest,
  ModelStepDigest,
  OutputStepDigest,
  TerminalNotice,
  TurnDigest,
} from '../contract/digests.js';

type ClaimedDigest = Extract<ClaimDigest, { claimed: true }>;

/** How often one run takes its turn back after a LostClaim before it lets go. */
const MAX_RECLAIMS = 3;

/**
 * One claim. A 0.6 run claims in its first model step (`claimStep`, decision 82), which also
 * makes the model call when it can; a person's pause or steering already waiting, or a run
 * before 0.6, claims in the `claimTurn` local activity, so the control boundary comes between
 * the claim and the model call.
 */
async function claimOnce(run: TurnRun): Promise<ClaimStepDigest> {
  const { store, model } = run.activities;
  const controls = run.controls;
  if (!run.features.v0_6 || (controls && (controls.pauseRequested || controls.steers.length > 0)))
    return {
      claim: await runStoreStep(() =>
        store.claimTurn.executeWithOptions({ summary: 'claim' }, [run.owner()]),
      ),
    };
  const calls = run.modelCalls + 1;
  const input = { ...modelStepInput(run, calls), ...finishRequest(run) };
  const done = await model.claimStep.executeWithOptions({ summary: `claim, model call ${calls}` }, [
    run.features.compaction ? { ...input, compaction: true } : input,
  ]);
  if (done.step) run.modelCalls = calls;
  return done;
}

/**
 * The turn's status in Temporal's visibility (`TurnKitStatus`). A turn's workflow starts
 * showing `running` (`turnStartOptions`); on 0.6 runs the attribute is upserted only when it
 * changes (decision 87): a claim refused by a busy lane or an open join shows `pending` while
 * the turn waits, and the claim that follows shows `running` again. Earlier runs upsert
 * `running` after the claim, as their histories recorded.
 */
function showStatus(run: TurnRun, status: 'pending' | 'running'): void {
  if (!run.features.v0_6) {
    if (status === 'running') upsertSearchAttributes([{ key: TURNKIT_STATUS, value: status }]);
    return;
  }
  if (workflowInfo().typedSearchAttributes.get(TURNKIT_STATUS) === status) return;
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: status }]);
}

/** Claims the turn; refused by a busy lane or an open join, waits for a nudge and claims again. */
export async function claimWhenFree(run: TurnRun): Promise<ClaimStepDigest> {
  let seen = nudgeMark(run);
  let done = await claimOnce(run);
  for (
    let wait = 1;
    !done.claim.claimed && (done.claim.reason === 'lane_busy' || done.claim.reason === 'waiting');
    wait = Math.min(wait * 2, 30)
  ) {
    const claim = done.claim;
    showStatus(run, 'pending');
    if (releasedPatch(run.features, PATCH_SIGNALLED_WAITS)) {
      // Woken by the lane (its predecessor finished) or by a join target; a timer backs it up.
      const until = claim.reason === 'waiting' && claim.deadline ? Date.parse(claim.deadline) : null;
      await awaitNudge(run, until, seen);
    } else {
      await sleep(`${wait} seconds`);
    }
    seen = nudgeMark(run);
    done = await claimOnce(run);
  }
  if (done.claim.claimed) {
    showStatus(run, 'running');
    run.console.digest(done.claim);
  } else {
    run.console.update({ status: done.claim.status });
  }
  return done;
}

/** The model step's input for this run's `calls`-th model call. */
function modelStepInput(run: TurnRun, calls: number): ModelStepInput {
  return {
    turnId: run.turnId,
    claimToken: run.claimToken,
    step: `${run.claimToken.slice(0, 12)}:${calls}`,
    maxProviderAttempts: run.activities.maxProviderAttempts,
  };
}

/**
 * One model call: an activity, two when compaction is due first (it runs in its own activity,
 * then the call is made without asking again). `first`: the claim step made the call already.
 */
async function modelCall(run: TurnRun, first: ModelStepDigest | undefined): Promise<ModelStepDigest> {
  const { model } = run.activities;
  if (!first) run.modelCalls += 1;
  const summary = `model call ${run.modelCalls}`;
  const step = { ...modelStepInput(run, run.modelCalls), ...finishRequest(run) };
  const callModel = (input: ModelStepInput) =>
    run.modelRoute
      ? routedModelStep(run, summary, input)
      : model.modelStep.executeWithOptions({ summary }, [input]);
  run.console.update({ phase: 'model', modelCalls: run.modelCalls });
  let digest = first ?? (await callModel(run.features.compaction ? { ...step, compaction: true } : step));
  if (digest.compactionDue) {
    run.console.update({ lastStep: 'compaction' });
    await model.compactStep.executeWithOptions({ summary: 'compaction' }, [
      modelStepInput(run, run.modelCalls),
    ]);
    digest = await callModel(step);
  }
  const calls = digest.toolCalls.length;
  if (digest.model) run.console.update({ model: digest.model });
  run.console.digest(digest);
  run.console.update({
    lastStep: `${summary} → ${calls === 0 ? 'output' : `${calls} tool call${calls === 1 ? '' : 's'}`}`,
  });
  return digest;
}

export interface PhasesDone {
  status: string;
  notice?: TerminalNotice;
  /** The run stopped at a safe point to continue as new (the turn goes on in the next run). */
  continueAsNew?: true;
}

const CONTINUE: PhasesDone = { status: 'running', continueAsNew: true };

/**
 * Model → tools → output until the output phase says the turn is done. `first`: the claim
 * step's model call, the answer to the first model phase.
 */
async function runPhases(run: TurnRun, start: TurnDigest, first?: ModelStepDigest): Promise<PhasesDone> {
  const { output: checks, store } = run.activities;
  let digest = start;
  let made = first;
  for (;;) {
    if (digest.done) {
      // The step that ended the last phase ran the output step (decision 82).
      const { done, ...rest } = digest;
      if (done.done) return phasesDone(done);
      reopenControls(run);
      digest = { ...rest, phase: 'model', toolCalls: [] };
    }
    if (digest.phase === 'model') {
      if (!made) {
        // Between phases, nothing in flight: the safe point to continue as new (decision 32).
        if (continueDue(run)) return CONTINUE;
        // A control boundary before the model call: a requested pause, then steering.
        const controls = run.controls;
        if (controls?.pauseRequested) await pauseAtBoundary(run);
        if (controls && controls.steers.length > 0) await steerAtBoundary(run);
      }
      digest = await modelCall(run, made);
      made = undefined;
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
      let checked: OutputStepDigest | undefined;
      if (digest.outputChecks && run.features.outputAudit) {
        // On 0.6 the output step follows the checks in their activity (decision 82).
        const audit = await checks.outputAudit.executeWithOptions({ summary: 'output checks' }, [
          {
            turnId: run.turnId,
            claimToken: run.claimToken,
            maxAttempts: run.activities.maxOutputAttempts,
            ...finishRequest(run),
          },
        ]);
        checked = audit.done;
      }
      const output =
        checked ??
        (await runStoreStep(() => store.outputStep.executeWithOptions({ summary: 'output' }, [run.owner()])));
      if (output.done) return phasesDone(output);
      reopenControls(run);
      digest = { ...digest, phase: 'model', toolCalls: [] };
    }
  }
}

function phasesDone(output: OutputStepDigest): PhasesDone {
  return output.notice ? { status: output.status, notice: output.notice } : { status: output.status };
}

/**
 * Runs the phases from the claimed digest. A reset run replays the claim its predecessor
 * made, so its first write with its own token fails with LostClaim: it then claims again
 * (taking over a turn an ended run of this workflow still holds) and resumes from the
 * committed phase. A LostClaim the claim cannot undo (cancelled, finished) ends the run.
 */
export async function runClaimedPhases(
  run: TurnRun,
  claimed: ClaimedDigest,
  first?: ModelStepDigest,
): Promise<PhasesDone> {
  let digest: TurnDigest = claimed;
  let made = first;
  run.modelRoute = claimed.modelRoute;
  for (let reclaims = 0; ; reclaims += 1) {
    try {
      return await runPhases(run, digest, made);
    } catch (error) {
      if (!isLostClaim(error) || reclaims >= MAX_RECLAIMS || !releasedPatch(run.features, PATCH_RECLAIM))
        throw error;
      const again = await runStoreStep(() => run.activities.store.claimTurn(run.owner()));
      if (!again.claimed) throw error;
      digest = again;
      made = undefined;
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
  // A queued call waits for its provider's rate limit, which no timeout of its own bounds.
  run.deadline.arm();
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
