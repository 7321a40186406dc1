/**
 * The model's side of TurnKit's `budget_completion` (decision 38): a response whose cost
 * reaches the spend limit may still run its save (a `budgetCompletion` tool), once, and the
 * turn makes no model call after that. The tools' side is `tools/budget-completion.ts`.
 */
import type { Agent } from '../../agents/agent.js';
import { BudgetError } from '../../errors.js';
import type { ToolDefinition } from '../../agents/tool.js';
import type { Budget } from '../step/budget.js';
import { COST_LIMIT_REACHED, exhaustsAtLimit } from '../step/budget.js';
import type { TurnEvent } from '../step/events.js';
import { turnEvent } from '../step/events.js';
import type { TurnTx } from '../step/turn-step.js';
import type { TurnState } from '../step/turn-state.js';
import { toolCallParts } from '../step/turn-state.js';
import { toolForTurn } from './skills.js';

type ToolCall = ReturnType<typeof toolCallParts>[number];

/**
 * The first of `calls` that names a budget-completion tool this turn may call (`toolFor`
 * answers which tool of a name the turn may call).
 */
export async function saveCallOf(
  agent: Agent,
  calls: readonly ToolCall[],
  toolFor: (name: string) => Promise<ToolDefinition | undefined>,
): Promise<ToolCall | undefined> {
  for (const call of calls) {
    const tool = agent.effectiveTools.find((candidate) => candidate.name === call.name);
    if (tool?.budgetCompletion && (await toolFor(call.name))) return call;
  }
  return undefined;
}

/**
 * In the block that stores a response whose cost exhausts the spend (`Budget#spendExhausted`):
 * if it proposes a save, the save becomes the one call left to run. Its event, to publish
 * after the response's own; undefined when the turn fails on its spend as before.
 */
export async function enterAfterModelSpend(
  tx: TurnTx,
  agent: Agent,
  budget: Budget,
  cost: number | null,
): Promise<TurnEvent | undefined> {
  if (!exhaustsAtLimit(agent)) return undefined;
  const spent = budget.cost + (cost ?? 0);
  if (!budget.spendExhausted(spent)) return undefined;
  const mayCall = (name: string) => toolForTurn(tx.store, agent, tx.turn, name);
  const save = await saveCallOf(agent, toolCallParts(tx.state.parts), mayCall);
  if (!save) return undefined;
  tx.patchState({ budget_completion_call_id: save.id });
  const reached = { reached_by: 'model', cost: spent, max_spend: budget.limits.maxSpend };
  return turnEvent('budget_completion.started', { id: save.id, name: save.name, ...reached });
}

/** A turn in its budget completion makes no model call: the save ran (or failed) its once. */
export function checkNoModelCall(state: TurnState): void {
  if (state.budget_completion_call_id !== undefined) throw new BudgetError(COST_LIMIT_REACHED);
}
