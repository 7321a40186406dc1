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
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { TurnActivities } from '../activities/turn-activities.js';
import type { CancelRequest } from '../engine/cancel-request.js';
import { parseCancelRequest } from '../engine/cancel-request.js';
import type { TurnDigest, TurnErrorDigest } from '../engine/digest.js';
import { NON_RETRYABLE_ERROR_TYPES } from '../errors.js';
import {
  TURNKIT_AGENT,
  TURNKIT_CONVERSATION_ID,
  TURNKIT_ROOT_TURN_ID,
  TURNKIT_STATUS,
  turnWorkflowId,
} from './search-attributes.js';

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
        turn.children.add(call.childTurnId);
        try {
          const child = await startChild(turnWorkflow, {
            workflowId: turnWorkflowId(call.childTurnId),
            args: [{ turnId: call.childTurnId, ...(turn.settings ? { settings: turn.settings } : {}) }],
            parentClosePolicy: 'ABANDON',
            staticSummary: `${call.agent}: sub-agent of ${turn.turnId}`,
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
          return child.result().then(() => undefined);
        } catch (error) {
          if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
          // Started by an earlier run of this turn: follow it through the store instead.
          return (async () => {
            for (
              let wait = 1;
              !FINISHED.has((await turn.acts.store.turnStatus({ turnId: call.childTurnId })).status);
            ) {
              await sleep(`${wait} seconds`);
              wait = Math.min(wait * 2, 30);
            }
          })();
        }
      }),
    ),
  );
  await Promise.race([Promise.all(results), CancellationScope.current().cancelRequested]);
}

/**
 * The tools phase (spec §4.1): calls run in order; a contiguous group of sub-agent calls
 * fans out in parallel; an ordinary tool never jumps ahead of an unresolved group; a
 * completed terminal tool stops everything after it. After a group resolves, dispatch walks
 * the calls again, which appends the children's results in call order.
 */
async function runTools(turn: TurnContext, digest: TurnDigest): Promise<TurnDigest> {
  const { acts, turnId, claimToken } = turn;
  for (;;) {
    let terminalToolCallId: string | null = null;
    const waiting: { childTurnId: string; agent: string; conversationId: string }[] = [];
    for (const call of digest.toolCalls) {
      if (waiting.length > 0 && call.kind !== 'subAgent') break;
      const outcome = await acts.tool.toolCall({
        turnId,
        claimToken,
        toolCallId: call.id,
        deferResult: waiting.length > 0,
        maxAttempts: acts.toolMaxAttempts,
      });
      if (outcome.waiting && outcome.childTurnId) {
        waiting.push({
          childTurnId: outcome.childTurnId,
          agent: call.name,
          conversationId: outcome.childConversationId ?? '',
        });
        continue;
      }
      if (outcome.terminal) {
        terminalToolCallId = call.id;
        break;
      }
    }
    if (waiting.length === 0)
      return storeStep(() => acts.store.finishTools({ turnId, claimToken, terminalToolCallId }));
    // Waiting holds no worker: the workflow sleeps on its children.
    await storeStep(() => acts.store.suspendTurn({ turnId, claimToken }));
    upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'waiting' }]);
    await runChildren(turn, waiting);
    digest = await storeStep(() => acts.store.resumeTurn({ turnId, claimToken }));
    upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'running' }]);
  }
}

async function phaseLoop(turn: TurnContext, start: TurnDigest): Promise<string> {
  const { acts, turnId, claimToken } = turn;
  let digest = start;
  let step = 0;
  for (;;) {
    if (digest.phase === 'model') {
      step += 1;
      digest = await acts.model.modelStep({ turnId, claimToken, step: `${claimToken.slice(0, 12)}:${step}` });
    } else if (digest.phase === 'tools') {
      digest = await runTools(turn, digest);
    } else {
      const output = await storeStep(() => acts.store.outputStep({ turnId, claimToken }));
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
  const children = new Set<string>();

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
    let claim = await storeStep(() => acts.store.claimTurn({ turnId, claimToken }));
    for (let wait = 1; !claim.claimed && claim.reason === 'lane_busy'; wait = Math.min(wait * 2, 30)) {
      await sleep(`${wait} seconds`);
      claim = await storeStep(() => acts.store.claimTurn({ turnId, claimToken }));
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
    const status = await phaseLoop({ acts, turnId, claimToken, settings: input.settings, children }, claim);
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
      result = { turnId, status: cancelled.status, claimed: true };
    } else {
      const failure: TurnErrorDigest = timedOut
        ? { class: 'BudgetError', message: 'turn timed out' }
        : turnError(error);
      const failed = await CancellationScope.nonCancellable(() =>
        acts.store.failTurn({ turnId, claimToken, error: failure }),
      );
      result = { turnId, status: failed.status, claimed: true, error: failure };
    }
  }
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: result.status }]);
  return result;
}
