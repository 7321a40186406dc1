/**
 * One run of a turn workflow, as its phases see it: the activities, the claim, the children
 * it started, the nudges it was sent. Plus the helpers every phase uses.
 */
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  TimeoutFailure,
  workflowInfo,
} from '@temporalio/workflow';
import type { TurnActivityProxies } from './activity-options.js';
import { TurnConsole } from './console.js';
import type { RootDeadline } from './root-deadline.js';
import type { RunFeatures } from './patches.js';
import type { TurnControls } from './controls.js';
import type { TurnContinuation, TurnSettings, TurnWorkflowInput } from './contract.js';
import { claimTokenOf, CONTINUE_AS_NEW_AFTER } from './contract.js';
import type { ModelRoute, OwnerInput, TurnErrorDigest } from '../contract/digests.js';
import type { FinishRequest } from '../contract/activities.js';

export interface TurnRun {
  activities: TurnActivityProxies;
  turnId: string;
  claimToken: string;
  settings: TurnSettings | undefined;
  /** Child turns started by this run, for a cascading cancel. */
  children: Set<string>;
  /** Bumped by `laneFree` and `targetFinished` signals. */
  nudges: () => number;
  /** Model calls this run started: their step keys stay unique across a reclaim. */
  modelCalls: number;
  /** What the Temporal UI shows of the turn (current details, the `state` query). */
  console: TurnConsole;
  /** Patches decided at the run's start. */
  features: RunFeatures;
  /** A person's controls (approvals, pause, steer); null on runs started before them. */
  controls: TurnControls | null;
  /**
   * The owner's input for a store step, with the running workflow task's history length: a
   * stale task of this run still has the claim token, and this fences it (StaleTask).
   */
  owner: () => OwnerInput;
  /** What the run before this one handed over (continue-as-new); absent on a chain's first run. */
  continued: TurnContinuation | undefined;
  /** Where the model calls run, as the claim said (decision 43); absent: the turn's own queue. */
  modelRoute?: ModelRoute | undefined;
  /** The root timeout: armed before any wait that no activity's timeout bounds (decision 87). */
  deadline: RootDeadline;
}

/** What a run is built from beside its input: decided at the workflow's start. */
interface RunParts {
  activities: TurnActivityProxies;
  deadline: RootDeadline;
  features: RunFeatures;
  controls: TurnControls | null;
  nudges: () => number;
}

/** This run of the turn's workflow, with what a run it continued handed over. */
export function newTurnRun(input: TurnWorkflowInput, parts: RunParts): TurnRun {
  const { turnId } = input;
  // The claim token is bound to this run: a retried claim by the same run is recognized,
  // and a reset or any other run gets a different token, which fences this one out.
  const claimToken = claimTokenOf(workflowInfo().runId);
  const run: TurnRun = {
    ...parts,
    turnId,
    claimToken,
    settings: input.settings,
    children: new Set(input.continued?.children),
    modelCalls: input.continued?.modelCalls ?? 0,
    console: new TurnConsole(turnId, input.settings?.consoleUrl),
    owner: () => ({ turnId, claimToken, taskHistoryLength: workflowInfo().historyLength }),
    continued: input.continued,
  };
  // The UI's current details of a continued run (its static summary stays on the first run).
  if (input.continued)
    run.console.update({
      modelCalls: run.modelCalls,
      lastStep: `continued as new: run ${input.continued.runs + 1} of the turn's workflow`,
    });
  return run;
}

/** `{ settings }` when the run has any, for the inputs that pass them on. */
export function settingsOf(run: TurnRun): { settings?: TurnSettings } {
  return run.settings ? { settings: run.settings } : {};
}

/**
 * `{ finish }` for a step that may end the turn's last phase (0.6, decision 82): the pauses and
 * steerings this run has seen authorized. Nothing when a control waits for a boundary, or
 * when the run cannot know the count (see `TurnControls.boundaryAuthorized`).
 */
export function finishRequest(run: TurnRun): { finish?: FinishRequest } {
  const controls = run.controls;
  if (!run.features.v0_6) return {};
  if (!controls) return { finish: { controls: 0 } };
  const pending = controls.pauseRequested || controls.steers.length > 0 || controls.authorizing > 0;
  return pending || controls.boundaryAuthorized === null
    ? {}
    : { finish: { controls: controls.boundaryAuthorized } };
}

/** Backstop re-check while waiting on signals, should one be lost: runs before 0.5. */
const RECHECK_MS = 30_000;

/**
 * 0.5: whoever frees a wait signals it (`laneFree` from the lane, `targetFinished` from a
 * finished target or child), so the timer is only a safety net should a signal be lost:
 * one check (6 history events) per 6 hours, 1 event an hour (decision 32).
 */
const SAFETY_NET_MS = 6 * 60 * 60 * 1000;

/**
 * The nudges seen so far, taken before the check a wait follows: on 0.5 runs a nudge that
 * arrives while that check runs still wakes the wait (with a rare safety net it must not be
 * missed). Earlier runs take it when the wait starts, as their histories recorded.
 */
export function nudgeMark(run: TurnRun): number | undefined {
  return run.features.v0_5 ? run.nudges() : undefined;
}

/** Waits for a nudge signal (since `seen`), or the safety net, or `until` (ms since epoch). */
export async function awaitNudge(run: TurnRun, until?: number | null, seen = run.nudges()): Promise<void> {
  const net = run.features.v0_5 ? SAFETY_NET_MS : RECHECK_MS;
  const timeout = until
    ? Math.min(Math.max(until - Date.now(), 0), net)
    : run.features.v0_5
      ? net
      : '30 seconds';
  await condition(() => run.nudges() !== seen, timeout);
}

/**
 * Whether this run should continue as new at a safe point (decision 32): Temporal suggests
 * it, or its history passed the turn's threshold. Only 0.5 runs, and only a run that made a
 * model call itself (a continued run never continues again before doing any work), with no
 * Update or signal handler still running.
 */
export function continueDue(run: TurnRun): boolean {
  if (!run.features.v0_5 || run.modelCalls <= (run.continued?.modelCalls ?? 0)) return false;
  if (!allHandlersFinished()) return false;
  const info = workflowInfo();
  const limit = { ...CONTINUE_AS_NEW_AFTER, ...run.settings?.continueAsNewAfter };
  return info.continueAsNewSuggested || info.historyLength >= limit.events || info.historySize >= limit.bytes;
}

/**
 * Runs a store step (a local activity) so that cancelling the turn's scope never cancels it:
 * cancelling a local activity whose marker is already recorded is a nondeterminism error
 * ("Invalid transition in state machine") that fails every retry of the workflow task. The
 * cancellation still takes effect at the next model/tool activity or timer of the scope.
 */
export function runStoreStep<T>(fn: () => Promise<T>): Promise<T> {
  return CancellationScope.nonCancellable(fn);
}

function failureOf(error: unknown): unknown {
  return error instanceof ActivityFailure && error.cause ? error.cause : error;
}

function failureType(error: unknown): string | null {
  const cause = failureOf(error);
  return cause instanceof ApplicationFailure ? (cause.type ?? null) : null;
}

export const isLostClaim = (error: unknown) => failureType(error) === 'LostClaim';
/** Only a stale workflow task of this run sees this; whatever it does next is discarded. */
export const isStaleTask = (error: unknown) => failureType(error) === 'StaleTask';

/** The error a failed turn records, from what its activity threw. */
export function turnError(error: unknown): TurnErrorDigest {
  const cause = failureOf(error);
  if (cause instanceof ApplicationFailure) return { class: cause.type ?? 'Error', message: cause.message };
  if (cause instanceof TimeoutFailure)
    return { class: 'TimeoutError', message: `activity timed out (${cause.timeoutType})` };
  if (cause instanceof Error) return { class: cause.name, message: cause.message };
  return { class: 'Error', message: String(cause) };
}
