/**
 * TurnKit's later `budget_completion` (decision 38): once the spend limit is reached while a
 * response proposes a call to a `budgetCompletion` tool (the turn's save), that call may still
 * run, once. Every other call of the response is closed "not executed: spend limit reached",
 * the save ends the turn as any terminal tool does, and the turn never calls a model again.
 * The tools' side, as decisions: the pipeline (`tool-call.ts`) writes what they answer; the
 * model's side is `model/budget-save.ts`.
 */
import type { BudgetError } from '../../errors.js';
import type { ToolExecutionRecord } from '../../store/types.js';
import { COST_LIMIT_REACHED, exhaustsAtLimit } from '../step/budget.js';
import { turnEvent } from '../step/events.js';
import { toolCallParts } from '../step/turn-state.js';
import { saveCallOf } from '../model/budget-save.js';
import type { CallView, Decided, Verdict } from './verdict.js';
import { errorDetails, failWith, RUN, skipWith } from './verdict.js';

export const SPEND_LIMIT_SKIP = 'not executed: spend limit reached';

/**
 * The turn is in its budget completion and this call is not the save: if it has not run (no
 * row, or one still pending or awaiting approval), it is closed unrun.
 */
export function spendVerdict(view: CallView, existing: ToolExecutionRecord | undefined): Verdict {
  const save = view.state.budget_completion_call_id;
  if (save === undefined || save === view.call.id) return RUN;
  const unrun = !existing || existing.status === 'pending' || existing.status === 'awaiting_approval';
  return unrun ? skipWith(SPEND_LIMIT_SKIP) : RUN;
}

/**
 * A tool of the response reached the spend limit (its `checkSpend` raised): the tool fails as
 * budget-denied. If a save comes later in the response and has not run, the save becomes the
 * one call left to run and the turn goes on; otherwise the turn fails on the BudgetError.
 */
export async function afterToolSpend(view: CallView, error: BudgetError): Promise<Decided> {
  const denied = errorDetails(error, { budget_denied: true });
  const save = await laterSave(view, error);
  if (!save) return failWith(error.message, denied, { raise: error });
  const reached = { reached_by: 'tool', tool_call_id: view.call.id };
  return failWith(error.message, denied, {
    patch: { budget_completion_call_id: save.id },
    events: [turnEvent('budget_completion.started', { id: save.id, name: save.name, ...reached })],
  });
}

/** The save that may still run after this call reached the spend limit, if there is one. */
async function laterSave(view: CallView, error: BudgetError) {
  if (error.message !== COST_LIMIT_REACHED || !exhaustsAtLimit(view.agent)) return undefined;
  if (view.state.budget_completion_call_id !== undefined) return undefined;
  const calls = toolCallParts(view.state.parts);
  const later = calls.slice(calls.findIndex((call) => call.id === view.call.id) + 1);
  const save = await saveCallOf(view.agent, later, (name) => view.toolFor(name));
  if (!save || (await view.executionOf(save.id))) return undefined;
  return save;
}
