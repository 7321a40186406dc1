/**
 * One TurnKit turn as one Temporal workflow: claim, then model → tools → output phases as
 * activities until the turn is terminal. Deterministic: all I/O happens in activities, and
 * only ids and small digests cross the boundary.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  getExternalWorkflowHandle,
  startChild,
  CancellationScope,
  condition,
  defineSignal,
  patched,
  isCancellation,
  setHandler,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { TurnActivities } from '../activities/turn-activities.js';
import type { CancelRequest } from '../engine/cancel-request.js';
import { parseCancelRequest } from '../engine/cancel-request.js';
import type { StepInput, TerminalNotice, TurnDigest, TurnErrorDigest } from '../engine/digest.js';
import { NON_RETRYABLE_ERROR_TYPES } from '../errors.js';
import {
  TURNKIT_AGENT,
  TURNKIT_CONVERSATION_ID,
  TURNKIT_ROOT_TURN_ID,
  TURNKIT_STATUS,
  SIGNALS,
  claimTokenOf,
  turnWorkflowId,
} from './search-attributes.js';

/**
 * `cancel` with `{descendants: 'retain' | 'cascade', principal}`: authorized, then the
 * in-flight model request or tool is aborted and the turn is cancelled (spec §5.9).
 */
export const cancelSignal = defineSignal<[unknown]>(SIGNALS.cancel);
/** From the conversation's lane: the lane may be free now (claim again). */
export const laneFreeSignal = defineSignal<[]>(SIGNALS.laneFree);
/** From a turn this one waits on: it finished (check the join again). */
export const targetFinishedSignal = defineSignal<[string?]>(SIGNALS.targetFinished);

/**
 * Patch ids (`patched()`): every change to the command sequence of the released workflow is
 * guarded, and CI replays the recorded histories of the earlier version.
 */
const PATCH_SIGNALLED_WAITS = 'turnkit-signalled-waits-1';
const PATCH_NOTIFY = 'turnkit-terminal-notice-1';
const PATCH_COORDINATION = 'turnkit-coordination-tools-1';
const PATCH_RECLAIM = 'turnkit-reclaim-after-reset-1';
const PATCH_FAIL_ACTIVITY = 'turnkit-fail-as-activity-1';
/** How often one run takes its turn back after a LostClaim before it lets go. */
const MAX_RECLAIMS = 3;
/** Backstop re-check while waiting on signals, should one be lost. */
const RECHECK = '30 seconds';

/** Per-kind activity settings; heartbeat timeout, retries and the root timeout are separate. */
export interface ActivitySettings {
  startToCloseTimeout?: string | number;
  heartbeatTimeout?: string | number;
  maximumAttempts?: number;
}

export interface TurnSettings {
  model?: ActivitySettings;
  tool?: ActivitySettings;
}

export interface TurnWorkflowInput {
  turnId: string;
  settings?: TurnSettings;
}

export interface TurnWorkflowResult {
  turnId: string;
  /** The turn's status when this run let go of it. */
  status: string;
  /** False when the turn was not pending (already done, or owned by another run). */
  claimed: boolean;
  error?: TurnErrorDigest;
}

export const DEFAULT_TURN_SETTINGS: Required<{ [K in keyof TurnSettings]: Required<ActivitySettings> }> = {
  model: { startToCloseTimeout: '10 minutes', heartbeatTimeout: '20 seconds', maximumAttempts: 5 },
  // A replay-safe tool may be re-run until the last attempt; any other tool runs once.
  tool: { startToCloseTimeout: '10 minutes', heartbeatTimeout: '20 seconds', maximumAttempts: 3 },
};
const nonRetryableErrorTypes = [...NON_RETRYABLE_ERROR_TYPES];

function activities(settings: TurnSettings = {}) {
  const model = { ...DEFAULT_TURN_SETTINGS.model, ...settings.model };
  const tool = { ...DEFAULT_TURN_SETTINGS.tool, ...settings.tool };
  return {
    model: proxyActivities<TurnActivities>({
      startToCloseTimeout: model.startToCloseTimeout,
      heartbeatTimeout: model.heartbeatTimeout,
      retry: {
        maximumAttempts: model.maximumAttempts,
        initialInterval: '1 second',
        maximumInterval: '30 seconds',
        nonRetryableErrorTypes,
      },
    }),
    tool: proxyActivities<TurnActivities>({
      startToCloseTimeout: tool.startToCloseTimeout,
      heartbeatTimeout: tool.heartbeatTimeout,
      retry: { maximumAttempts: tool.maximumAttempts, initialInterval: '1 second', nonRetryableErrorTypes },
    }),
    toolMaxAttempts: tool.maximumAttempts,
    // Failing a turn is a scheduled activity, not a local one: the server runs it only for a
    // workflow task it accepted, so a stale task of this run (a worker paused past the task
    // timeout, erring on its out-of-date view) can never fail the turn the live task runs.
    terminal: proxyActivities<TurnActivities>({
      startToCloseTimeout: '1 minute',
      retry: {
        maximumAttempts: 40,
        initialInterval: '200 milliseconds',
        maximumInterval: '10 seconds',
        nonRetryableErrorTypes,
      },
    }),
    // Short store transactions run as local activities: no task-queue round trip per step.
    // Their retries wait out a store outage of about five minutes (a database restart or
    // failover) before the turn fails; errors no retry can fix stop them at once.
    store: proxyLocalActivities<TurnActivities>({
      startToCloseTimeout: '30 seconds',
      retry: {
        maximumAttempts: 40,
        initialInterval: '200 milliseconds',
        maximumInterval: '10 seconds',
        nonRetryableErrorTypes,
      },
    }),
  };
}

type Activities = ReturnType<typeof activities>;

function failureOf(error: unknown): unknown {
  return error instanceof ActivityFailure && error.cause ? error.cause : error;
}

function failureType(error: unknown): string | null {
  const cause = failureOf(error);
  return cause instanceof ApplicationFailure ? (cause.type ?? null) : null;
}

const isLostClaim = (error: unknown) => failureType(error) === 'LostClaim';
/** Only a stale workflow task of this run sees this; whatever it does next is discarded. */
const isStaleTask = (error: unknown) => failureType(error) === 'StaleTask';

function turnError(error: unknown): TurnErrorDigest {
  const cause = failureOf(error);
  if (cause instanceof ApplicationFailure) return { class: cause.type ?? 'Error', message: cause.message };
  if (cause instanceof TimeoutFailure)
    return { class: 'TimeoutError', message: `activity timed out (${cause.timeoutType})` };
  if (cause instanceof Error) return { class: cause.name, message: cause.message };
  return { class: 'Error', message: String(cause) };
}

interface TurnContext {
  acts: Activities;
  turnId: string;
  claimToken: string;
  settings: TurnSettings | undefined;
  /** Child turns started by this run, for a cascading cancel. */
  children: Set<string>;
  /** Bumped by `laneFree` and `targetFinished` signals. */
  nudges: () => number;
  /** Model calls this run started: the step keys stay unique across a reclaim. */
  modelSteps: number;
  /**
   * The owner's input for a store step (a local activity), with the running workflow task's
   * history length: a stale task of this run (its worker paused past the task timeout) still
   * has the claim token, and this is what fences its store steps (StaleTask).
   */
  step: () => StepInput;
}

/** Waits for a nudge signal, or the backstop re-check, or `until` (ms since epoch). */
async function awaitNudge(turn: TurnContext, until?: number | null): Promise<void> {
  const seen = turn.nudges();
  const backstop = 30_000;
  const timeout = until ? Math.min(Math.max(until - Date.now(), 0), backstop) : RECHECK;
  await condition(() => turn.nudges() !== seen, timeout);
}

/** Starts a child turn's workflow (a sub-agent or a launched agent) that outlives this run. */
async function startTurnChild(
  turn: TurnContext,
  call: { childTurnId: string; agent: string; conversationId: string },
  summary: string,
) {
  turn.children.add(call.childTurnId);
  return startChild(turnWorkflow, {
    workflowId: turnWorkflowId(call.childTurnId),
    args: [{ turnId: call.childTurnId, ...(turn.settings ? { settings: turn.settings } : {}) }],
    parentClosePolicy: 'ABANDON',
    staticSummary: `${call.agent}: ${summary}`,
    typedSearchAttributes: [
      { key: TURNKIT_AGENT, value: call.agent },
      { key: TURNKIT_CONVERSATION_ID, value: call.conversationId },
      {
        key: TURNKIT_ROOT_TURN_ID,
        value: workflowInfo().typedSearchAttributes.get(TURNKIT_ROOT_TURN_ID) ?? turn.turnId,
      },
      { key: TURNKIT_STATUS, value: 'pending' },
    ],
  });
}

/** Launched agents run detached: started, never awaited. A start that already happened is fine. */
async function launchChild(
  turn: TurnContext,
  launched: { turnId: string; agent: string; conversationId: string },
) {
  await CancellationScope.nonCancellable(async () => {
    try {
      await startTurnChild(
        turn,
        { childTurnId: launched.turnId, agent: launched.agent, conversationId: launched.conversationId },
        `launched by ${turn.turnId}`,
      );
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    }
  });
}

/** Tells waiters that this turn finished and wakes the lanes that have work. */
async function notify(
  acts: Activities,
  settings: TurnSettings | undefined,
  notice: TerminalNotice | undefined,
) {
  if (!notice || (notice.waiters.length === 0 && notice.lanes.length === 0) || !patched(PATCH_NOTIFY)) return;
  await CancellationScope.nonCancellable(async () => {
    for (const waiter of notice.waiters) {
      await getExternalWorkflowHandle(turnWorkflowId(waiter))
        .signal(targetFinishedSignal, workflowInfo().workflowId)
        .catch(() => undefined);
    }
    if (notice.lanes.length > 0) {
      await acts.store.wakeLanes({ conversationIds: notice.lanes, ...(settings ? { settings } : {}) });
    }
  });
}

const FINISHED = new Set(['completed', 'failed', 'cancelled']);

/**
 * Runs a short store step (a local activity) so that cancelling the turn's scope never
 * cancels it: a cancel signal whose authorization resolves in the same activation as a
 * store step of the cancelled scope would otherwise ask core to cancel a local activity
 * whose marker is already recorded, a nondeterminism error ("Invalid transition in state
 * machine") that fails every retry of the workflow task. The cancellation still takes
 * effect at the next model/tool activity or timer of the scope.
 */
function storeStep<T>(fn: () => Promise<T>): Promise<T> {
  return CancellationScope.nonCancellable(fn);
}

/**
 * Runs the children of a sub-agent group as child workflows, in parallel, and waits for all
 * of them. They are started outside the cancellable scope: a `retain` cancel leaves them
 * running, a `cascade` cancel signals each one.
 */
async function runChildren(
  turn: TurnContext,
  calls: { childTurnId: string; agent: string; conversationId: string }[],
) {
  const results = await CancellationScope.nonCancellable(() =>
    Promise.all(
      calls.map(async (call) => {
        try {
          const child = await startTurnChild(turn, call, `sub-agent of ${turn.turnId}`);
          // Wrapped: an async function returning a promise would wait for it, and the join
          // below (which a cancel must be able to interrupt) would never be reached.
          return { done: child.result().then(() => undefined) };
        } catch (error) {
          if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
          // Started by an earlier run of this turn: follow it through the store instead.
          return {
            done: (async () => {
              for (
                let wait = 1;
                !FINISHED.has((await turn.acts.store.turnStatus({ turnId: call.childTurnId })).status);
              ) {
                await sleep(`${wait} seconds`);
                wait = Math.min(wait * 2, 30);
              }
            })(),
          };
        }
      }),
    ),
  );
  await Promise.race([
    Promise.all(results.map((result) => result.done)),
    CancellationScope.current().cancelRequested,
  ]);
}

/** Waits, without holding a worker, until every `wait_for` target of the turn is finished. */
async function awaitTargets(turn: TurnContext): Promise<void> {
  while (!(await storeStep(() => turn.acts.store.waitsReady({ turnId: turn.turnId }))).ready)
    await awaitNudge(turn);
}

/**
 * The tools phase (spec §4.1): calls run in order; a contiguous group of sub-agent calls
 * fans out in parallel; an ordinary tool never jumps ahead of an unresolved group or an
 * unfinished `wait_for`; a completed terminal tool stops everything after it. After the
 * group resolves, dispatch walks the calls again, which appends results in call order.
 */
async function runTools(turn: TurnContext, digest: TurnDigest): Promise<TurnDigest> {
  const { acts, turnId, claimToken } = turn;
  for (;;) {
    let terminalToolCallId: string | null = null;
    const waiting: { childTurnId: string; agent: string; conversationId: string }[] = [];
    let joining = false;
    const lanes = new Set<string>();
    for (const call of digest.toolCalls) {
      if ((waiting.length > 0 || joining) && call.kind !== 'subAgent') break;
      const outcome = await acts.tool.toolCall({
        turnId,
        claimToken,
        toolCallId: call.id,
        deferResult: waiting.length > 0 || joining,
        maxAttempts: acts.toolMaxAttempts,
      });
      if (outcome.launched && patched(PATCH_COORDINATION)) await launchChild(turn, outcome.launched);
      for (const lane of outcome.wakeLanes ?? []) lanes.add(lane);
      if (outcome.waiting && outcome.childTurnId) {
        waiting.push({
          childTurnId: outcome.childTurnId,
          agent: call.name,
          conversationId: outcome.childConversationId ?? '',
        });
        continue;
      }
      if (outcome.waiting && outcome.waitTargets) {
        joining = true;
        continue;
      }
      if (outcome.terminal) {
        terminalToolCallId = call.id;
        break;
      }
    }
    if (lanes.size > 0 && patched(PATCH_COORDINATION)) {
      await acts.store.wakeLanes({
        conversationIds: [...lanes],
        ...(turn.settings ? { settings: turn.settings } : {}),
      });
    }
    if (waiting.length === 0 && !joining)
      return storeStep(() => acts.store.finishTools({ ...turn.step(), terminalToolCallId }));
    // Waiting holds no worker: the workflow sleeps on its children and its join targets.
    await storeStep(() => acts.store.suspendTurn(turn.step()));
    upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'waiting' }]);
    await Promise.all([
      waiting.length > 0 ? runChildren(turn, waiting) : undefined,
      joining ? awaitTargets(turn) : undefined,
    ]);
    digest = await storeStep(() => acts.store.resumeTurn(turn.step()));
    upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'running' }]);
  }
}

async function phaseLoop(
  turn: TurnContext,
  start: TurnDigest,
): Promise<{ status: string; notice?: TerminalNotice }> {
  const { acts, turnId, claimToken } = turn;
  let digest = start;
  for (;;) {
    if (digest.phase === 'model') {
      turn.modelSteps += 1;
      const step = `${claimToken.slice(0, 12)}:${turn.modelSteps}`;
      digest = await acts.model.modelStep({ turnId, claimToken, step });
    } else if (digest.phase === 'tools') {
      digest = await runTools(turn, digest);
    } else {
      const output = await storeStep(() => acts.store.outputStep(turn.step()));
      if (output.done)
        return output.notice ? { status: output.status, notice: output.notice } : { status: output.status };
      digest = { ...digest, phase: 'model', toolCalls: [] };
    }
  }
}

/**
 * Runs `loop` from the claimed digest. A reset run replays the claim its predecessor made,
 * so its first write with its own token fails with LostClaim: it then claims again (the
 * activity takes over a turn that an ended run of this workflow still holds) and resumes
 * from the committed phase. A LostClaim the claim cannot undo (the turn was cancelled or
 * finished by someone else) ends the run.
 */
async function reclaiming<T>(
  turn: TurnContext,
  claimed: TurnDigest,
  loop: (digest: TurnDigest) => Promise<T>,
): Promise<T> {
  let digest = claimed;
  for (let reclaims = 0; ; reclaims += 1) {
    try {
      return await loop(digest);
    } catch (error) {
      if (!isLostClaim(error) || reclaims >= MAX_RECLAIMS || !patched(PATCH_RECLAIM)) throw error;
      const again = await storeStep(() => turn.acts.store.claimTurn(turn.step()));
      if (!again.claimed) throw error;
      digest = again;
    }
  }
}

export async function turnWorkflow(input: TurnWorkflowInput): Promise<TurnWorkflowResult> {
  const { turnId } = input;
  const acts = activities(input.settings);
  // Everything the turn does runs in this scope, so cancel and the root timeout stop it alike.
  const scope = new CancellationScope();
  let cancel: CancelRequest | null = null;
  let timedOut = false;
  const children = new Set<string>();
  let nudges = 0;
  const nudge = () => {
    nudges += 1;
  };
  setHandler(laneFreeSignal, nudge);
  setHandler(targetFinishedSignal, nudge);

  setHandler(cancelSignal, async (payload: unknown) => {
    const parsed = parseCancelRequest(payload);
    if (!parsed.ok) {
      await acts.store.rejectCancel({ turnId, reason: parsed.reason });
      return;
    }
    const verdict = await acts.store.authorizeCancel({ turnId, ...parsed.value });
    if (!verdict.allowed || cancel) return;
    cancel = parsed.value;
    scope.cancel();
  });

  // The claim token is bound to this run: a retried claim by the same run is recognized,
  // and a reset or any other run gets a different token, which fences this one out.
  const claimToken = claimTokenOf(workflowInfo().runId);
  const turn: TurnContext = {
    acts,
    turnId,
    claimToken,
    settings: input.settings,
    children,
    nudges: () => nudges,
    modelSteps: 0,
    step: () => ({ turnId, claimToken, progress: workflowInfo().historyLength }),
  };
  let notice: TerminalNotice | undefined;
  const work = scope.run(async (): Promise<TurnWorkflowResult> => {
    let claim = await storeStep(() => acts.store.claimTurn(turn.step()));
    for (
      let wait = 1;
      !claim.claimed && (claim.reason === 'lane_busy' || claim.reason === 'waiting');
      wait = Math.min(wait * 2, 30)
    ) {
      if (patched(PATCH_SIGNALLED_WAITS)) {
        // Woken by the lane (its predecessor finished) or by a join target; a timer backs it up.
        await awaitNudge(
          turn,
          claim.reason === 'waiting' && claim.deadline ? Date.parse(claim.deadline) : null,
        );
      } else {
        await sleep(`${wait} seconds`);
      }
      claim = await storeStep(() => acts.store.claimTurn(turn.step()));
    }
    if (!claim.claimed) return { turnId, status: claim.status, claimed: false };
    upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'running' }]);
    if (claim.deadline) {
      const remaining = Math.max(Date.parse(claim.deadline) - Date.now(), 0);
      // The root timeout is a durable timer from submission; it cancels whatever is in flight.
      void CancellationScope.nonCancellable(() => sleep(remaining)).then(() => {
        timedOut = true;
        scope.cancel();
      });
    }
    const done = await reclaiming(turn, claim, (digest) => phaseLoop(turn, digest));
    notice = done.notice;
    return { turnId, status: done.status, claimed: true };
  });

  let result: TurnWorkflowResult;
  try {
    result = await work;
  } catch (error) {
    if (isLostClaim(error) || isStaleTask(error)) return { turnId, status: 'lost', claimed: true };
    if (isCancellation(error) && !timedOut) {
      // A cancel signal, or Temporal's own cancellation request (an operator's: treated as authorized).
      const request: CancelRequest = cancel ?? { descendants: 'retain', principal: null };
      const cancelled = await CancellationScope.nonCancellable(async () => {
        const done = await acts.store.cancelTurn({ turnId, descendants: request.descendants });
        if (request.descendants === 'cascade') {
          // The store cascade is already committed; the signal stops each child's in-flight work.
          for (const child of children) {
            await getExternalWorkflowHandle(turnWorkflowId(child))
              .signal(cancelSignal, { descendants: 'cascade', principal: request.principal })
              .catch(() => undefined);
          }
        }
        return done;
      });
      notice = cancelled.notice;
      result = { turnId, status: cancelled.status, claimed: true };
    } else {
      const failure: TurnErrorDigest = timedOut
        ? { class: 'BudgetError', message: 'turn timed out' }
        : turnError(error);
      const failed = await CancellationScope.nonCancellable(() =>
        (patched(PATCH_FAIL_ACTIVITY) ? acts.terminal : acts.store).failTurn({
          ...turn.step(),
          error: failure,
        }),
      );
      notice = failed.notice;
      result = { turnId, status: failed.status, claimed: true, error: failure };
    }
  }
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: result.status }]);
  await notify(acts, input.settings, notice);
  return result;
}
