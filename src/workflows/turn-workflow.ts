/**
 * One TurnKit turn as one Temporal workflow: claim, then model → tools → output phases as
 * activities until the turn is terminal. Deterministic: all I/O happens in activities, and
 * only ids and small digests cross the boundary.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  defineSignal,
  isCancellation,
  setHandler,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { TurnActivities } from '../activities/turn-activities.js';
import type { CancelRequest } from '../engine/cancel-request.js';
import { parseCancelRequest } from '../engine/cancel-request.js';
import type { TurnDigest, TurnErrorDigest } from '../engine/digest.js';
import { NON_RETRYABLE_ERROR_TYPES } from '../errors.js';
import { TURNKIT_STATUS } from './search-attributes.js';

/**
 * `cancel` with `{descendants: 'retain' | 'cascade', principal}`: authorized, then the
 * in-flight model request or tool is aborted and the turn is cancelled (spec §5.9).
 */
export const cancelSignal = defineSignal<[unknown]>('cancel');

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
    // Short store transactions run as local activities: no task-queue round trip per step.
    store: proxyLocalActivities<TurnActivities>({
      startToCloseTimeout: '30 seconds',
      retry: {
        maximumAttempts: 10,
        initialInterval: '200 milliseconds',
        maximumInterval: '5 seconds',
        nonRetryableErrorTypes,
      },
    }),
  };
}

type Activities = ReturnType<typeof activities>;

function failureOf(error: unknown): unknown {
  return error instanceof ActivityFailure && error.cause ? error.cause : error;
}

function isLostClaim(error: unknown): boolean {
  const cause = failureOf(error);
  return cause instanceof ApplicationFailure && cause.type === 'LostClaim';
}

function turnError(error: unknown): TurnErrorDigest {
  const cause = failureOf(error);
  if (cause instanceof ApplicationFailure) return { class: cause.type ?? 'Error', message: cause.message };
  if (cause instanceof TimeoutFailure) return { class: 'TimeoutError', message: `activity timed out (${cause.timeoutType})` };
  if (cause instanceof Error) return { class: cause.name, message: cause.message };
  return { class: 'Error', message: String(cause) };
}

async function runTools(acts: Activities, turnId: string, claimToken: string, digest: TurnDigest): Promise<TurnDigest> {
  let terminalToolCallId: string | null = null;
  for (const call of digest.toolCalls) {
    const outcome = await acts.tool.toolCall({ turnId, claimToken, toolCallId: call.id, maxAttempts: acts.toolMaxAttempts });
    if (outcome.terminal) {
      terminalToolCallId = call.id;
      break;
    }
  }
  return acts.store.finishTools({ turnId, claimToken, terminalToolCallId });
}

async function phaseLoop(acts: Activities, turnId: string, claimToken: string, start: TurnDigest): Promise<string> {
  let digest = start;
  let step = 0;
  for (;;) {
    if (digest.phase === 'model') {
      step += 1;
      digest = await acts.model.modelStep({ turnId, claimToken, step: `${claimToken.slice(0, 12)}:${step}` });
    } else if (digest.phase === 'tools') {
      digest = await runTools(acts, turnId, claimToken, digest);
    } else {
      const output = await acts.store.outputStep({ turnId, claimToken });
      if (output.done) return output.status;
      digest = { ...digest, phase: 'model', toolCalls: [] };
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
  const claimToken = workflowInfo().runId.replace(/-/g, '');
  const work = scope.run(async (): Promise<TurnWorkflowResult> => {
    let claim = await acts.store.claimTurn({ turnId, claimToken });
    for (let wait = 1; !claim.claimed && claim.reason === 'lane_busy'; wait = Math.min(wait * 2, 30)) {
      await sleep(`${wait} seconds`);
      claim = await acts.store.claimTurn({ turnId, claimToken });
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
    const status = await phaseLoop(acts, turnId, claimToken, claim);
    return { turnId, status, claimed: true };
  });

  let result: TurnWorkflowResult;
  try {
    result = await work;
  } catch (error) {
    if (isLostClaim(error)) return { turnId, status: 'lost', claimed: true };
    if (isCancellation(error) && !timedOut) {
      // A cancel signal, or Temporal's own cancellation request (an operator's: treated as authorized).
      const request: CancelRequest = cancel ?? { descendants: 'retain', principal: null };
      const cancelled = await CancellationScope.nonCancellable(() =>
        acts.store.cancelTurn({ turnId, descendants: request.descendants }),
      );
      result = { turnId, status: cancelled.status, claimed: true };
    } else {
      const failure: TurnErrorDigest = timedOut ? { class: 'BudgetError', message: 'turn timed out' } : turnError(error);
      const failed = await CancellationScope.nonCancellable(() =>
        acts.store.failTurn({ turnId, claimToken, error: failure }),
      );
      result = { turnId, status: failed.status, claimed: true, error: failure };
    }
  }
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: result.status }]);
  return result;
}
