/**
 * TurnKit's later `budget_completion` (decision 38): once the spend limit is reached while a
 * response proposes a call to a `budgetCompletion` tool (the turn's save), that call may still
 * run, once. Every other call of the response is closed "not executed: spend limit reached",
 * the save ends the turn as any terminal tool does, and the turn never calls a model again.
 */
import type { BudgetError } from '../../errors.js';
import type { ToolExecutionRecord } from '../../store/types.js';
import type { ToolCallOutcome } from '../../contract/digests.js';
import { COST_LIMIT_REACHED, exhaustsAtLimit } from '../step/budget.js';
import { messageCreated, turnEvent } from '../step/events.js';
import type { TurnState } from '../step/turn-state.js';
import { toolCallParts } from '../step/turn-state.js';
import { saveCallOf } from '../model/budget-save.js';
import { findToolExecution } from './execution-lookup.js';
import type { ToolExecution } from './tool-execution.js';
import { errorDetails } from './tool-execution.js';
import { closeUnrun } from './tool-results.js';

export const SPEND_LIMIT_SKIP = 'not executed: spend limit reached';

/** The turn is in its budget completion and this call is not the save: it is closed unrun. */
export function closedBySpend(state: TurnState, callId: string, existing?: ToolExecutionRecord): boolean {
  const save = state.budget_completion_call_id;
  if (save === undefined || save === callId) return false;
  return !existing || existing.status === 'pending' || existing.status === 'awaiting_approval';
}

/**
 * A tool of the response reached the spend limit (its `checkSpend` raised): if a save comes
 * later in the response and has not run, the tool fails as budget-denied, the save becomes the
 * one call left to run, and the turn goes on. Undefined: the turn fails on the BudgetError.
 */
export async function enterAfterToolSpend(
  run: ToolExecution,
  execution: ToolExecutionRecord,
  error: BudgetError,
): Promise<ToolCallOutcome | undefined> {
  const { agent, turn, step } = run;
  if (error.message !== COST_LIMIT_REACHED || !exhaustsAtLimit(agent)) return undefined;
  if (step.state.budget_completion_call_id !== undefined) return undefined;
  const calls = toolCallParts(step.state.parts);
  const later = calls.slice(calls.findIndex((call) => call.id === run.call.id) + 1);
  const save = await saveCallOf(step.store, agent, turn, later);
  if (!save || (await findToolExecution(step.store, turn.id, save.id))) return undefined;
  const failed = { message: error.message, details: errorDetails(error, { budget_denied: true }) };
  const row = await step.write(async (tx) => {
    tx.patchState({ budget_completion_call_id: save.id });
    const reached = { reached_by: 'tool', tool_call_id: run.call.id };
    tx.emit(turnEvent('budget_completion.started', { id: save.id, name: save.name, ...reached }));
    return run.close(tx, execution, 'failed', failed);
  });
  return run.outcome(row ?? (await step.store.loadToolExecution(execution.id)));
}

/** Closes a sibling of the save that has not run, "not executed: spend limit reached". */
export async function closeForSpend(
  run: ToolExecution,
  existing: ToolExecutionRecord | undefined,
): Promise<ToolCallOutcome> {
  const { id, name } = run.call;
  const closed = await run.step.write(async (tx) => {
    const row = existing ?? (await run.findExecution(tx.store));
    const done = await closeUnrun(tx.store, tx.turn, run.call, row, SPEND_LIMIT_SKIP, run.deferResult);
    if (!done) return undefined;
    tx.emit(
      ...(done.message ? [messageCreated(done.message)] : []),
      turnEvent('tool_call.skipped', { id, name }),
    );
    return done.row;
  });
  // Null: another attempt got to the row first; it reports the row as it left it.
  return run.outcome(closed ?? (await run.findExecution())!);
}
