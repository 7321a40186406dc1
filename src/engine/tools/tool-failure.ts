/**
 * What a tool call that threw comes to (spec §4.5): stop, fail the row, or run again under
 * the same idempotency key while a replay-safe tool has attempts left.
 */
import type { ToolDefinition } from '../../agents/tool.js';
import { AuthorizationError, BudgetError, LostClaim, ToolError, TurnKitError } from '../../errors.js';
import type { ToolExecutionRecord } from '../../store/types.js';
import type { ToolCallOutcome } from '../../contract/digests.js';
import { retryDelayMs } from '../step/retry-delay.js';
import type { ToolCallHooks, ToolExecution } from './tool-execution.js';
import { errorDetails } from './tool-execution.js';
import { enterAfterToolSpend } from './budget-completion.js';

/**
 * A replay-safe tool threw and has attempts left (`maxToolAttempts`): Temporal runs it again
 * under the same idempotency key. The engine's own signal, not part of the public API.
 */
class ToolRetry extends TurnKitError {
  override readonly retryable = true;
}

/**
 * Classifies what the call threw: a lost claim or an aborted attempt stops; a budget denial
 * fails the row and the turn; an authorization denial or any other error fails the row, which
 * the model reads.
 */
export async function failedOutcome(
  run: ToolExecution,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  error: unknown,
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  if (error instanceof LostClaim) throw error;
  // Thrown after the attempt was aborted (a cancel, the turn's timeout, a worker going away):
  // what the tool did is not known, so no outcome is recorded here. The row stays running for
  // whoever aborted it: the turn's end marks it interrupted, a retry applies its recovery.
  if (hooks.signal.aborted) throw error;
  if (error instanceof BudgetError) {
    const saving = await enterAfterToolSpend(run, execution, error);
    if (saving) return saving;
    await run.fail(execution, error.message, errorDetails(error, { budget_denied: true }));
    throw error;
  }
  if (error instanceof AuthorizationError) {
    return run.outcome(
      await run.fail(execution, error.message, errorDetails(error, { authorization_denied: true })),
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  // A replay-safe tool's unexpected error is retried by Temporal under the same idempotency key,
  // until it has thrown `maxAttempts` times (a run lost with its worker is not counted).
  if (!(error instanceof ToolError) && tool.recovery === 'replaySafe') {
    const runs = await countToolError(run, execution);
    if (runs < hooks.maxAttempts)
      throw new ToolRetry(message, { cause: error, retryDelayMs: retryDelayMs(runs) });
  }
  return run.outcome(await run.fail(execution, message, errorDetails(error)));
}

/** One more run of this execution threw: the count lives in the turn's state. */
function countToolError(run: ToolExecution, execution: ToolExecutionRecord): Promise<number> {
  return run.step.write(async (tx) => {
    const errors = tx.state.tool_errors ?? {};
    const runs = (errors[execution.id] ?? 0) + 1;
    tx.patchState({ tool_errors: { ...errors, [execution.id]: runs } });
    return runs;
  });
}
