/**
 * What ends a call other than its result (spec §4.5), as decisions: a call that cannot run,
 * a row a dead attempt left running, and what the call threw (stop, fail the row, or run
 * again under the same idempotency key while a replay-safe tool has attempts left). The
 * pipeline (`tool-call.ts`) writes what they answer.
 */
import type { ToolDefinition } from '../../agents/tool.js';
import { AuthorizationError, BudgetError, LostClaim, ToolError, TurnKitError } from '../../errors.js';
import { retryDelayMs } from '../step/retry-delay.js';
import { afterToolSpend } from './budget-completion.js';
import type { CallView, Decided, Verdict } from './verdict.js';
import { OUTCOME_UNKNOWN } from '../step/result-texts.js';
import { errorDetails, failWith, RUN } from './verdict.js';

/**
 * A replay-safe tool threw and has attempts left (`maxToolAttempts`): Temporal runs it again
 * under the same idempotency key. The engine's own signal, not part of the public API.
 */
class ToolRetry extends TurnKitError {
  override readonly retryable = true;
}

/** A call that names no tool this turn may call, or whose arguments did not parse, fails unrun. */
export function unrunnable(view: CallView): Verdict {
  if (!view.tool) return failWith(`unknown tool: ${view.call.name}`);
  if (view.call.arguments_error) return failWith(view.call.arguments_error);
  return RUN;
}

/**
 * A row left running by an attempt that died: only a replay-safe ordinary tool may run again;
 * any other call's outcome is unknown, and its row says so.
 */
export function leftRunning(tool: ToolDefinition | undefined): Verdict {
  if (tool?.recovery === 'replaySafe' && tool.kind === 'ordinary') return RUN;
  return { kind: 'close', closing: { status: 'interrupted', payload: { message: OUTCOME_UNKNOWN } } };
}

/**
 * Classifies what the call threw: a lost claim or an aborted attempt stops; a budget denial
 * fails the row and the turn (unless a save can still run); an authorization denial or any
 * other error fails the row, which the model reads; a replay-safe tool's unexpected error is
 * counted and retried (`retryVerdict`).
 */
export async function failureVerdict(
  view: CallView,
  tool: ToolDefinition,
  error: unknown,
  aborted: boolean,
): Promise<Decided> {
  if (error instanceof LostClaim) return { kind: 'delegate', error };
  // Thrown after the attempt was aborted (a cancel, the turn's timeout, a worker going away):
  // what the tool did is not known, so no outcome is recorded here. The row stays running for
  // whoever aborted it: the turn's end marks it interrupted, a retry applies its recovery.
  if (aborted) return { kind: 'delegate', error };
  if (error instanceof BudgetError) return afterToolSpend(view, error);
  if (error instanceof AuthorizationError)
    return failWith(error.message, errorDetails(error, { authorization_denied: true }));
  if (!(error instanceof ToolError) && tool.recovery === 'replaySafe')
    return { kind: 'delegate', error, retry: true };
  return failWith(messageOf(error), errorDetails(error));
}

/**
 * A replay-safe tool's unexpected error, counted: Temporal runs it again under the same
 * idempotency key until it has thrown `maxAttempts` times (a run lost with its worker is not
 * counted); then the call fails.
 */
export function retryVerdict(error: unknown, runs: number, maxAttempts: number): Decided {
  if (runs < maxAttempts)
    return {
      kind: 'delegate',
      error: new ToolRetry(messageOf(error), { cause: error, retryDelayMs: retryDelayMs(runs) }),
    };
  return failWith(messageOf(error), errorDetails(error));
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
