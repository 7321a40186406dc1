/**
 * Internal calls a turn makes besides its main model calls (an output-policy judge, an image
 * generation, a media analysis) are charged to the turn like a model call: usage and cost
 * through the runtime's cost rates and calculator, then the root's spend cap (spec §3.4).
 */
import type { BudgetLimits } from '../../agents/agent.js';
import type { Cost } from '../../models/cost.js';
import { costFromUsage } from '../../models/cost.js';
import type { ModelUsage } from '../../models/types.js';
import type { Store } from '../../store/types.js';
import { Budget, exhaustsAtLimit } from './budget.js';
import type { Runtime } from '../runtime.js';
import type { TurnStep, TurnTx } from './turn-step.js';

/** Adds the call's usage and cost to the turn in the block's one update (no spend check). */
export function chargeCall(
  tx: Pick<TurnTx, 'charge'>,
  runtime: Pick<Runtime, 'cost'>,
  usage: ModelUsage,
  model: string,
): Cost {
  const cost = costFromUsage(usage, model, runtime.cost);
  tx.charge(usage, cost);
  return cost;
}

/**
 * BudgetError "cost limit reached" when the step's tree spent more than its `maxSpend`, checked
 * once the charge committed (the cost is recorded even when it trips the cap). A root reuses
 * the step's row.
 */
export async function checkStepSpend(step: Pick<TurnStep, 'store' | 'turn' | 'agent'>): Promise<void> {
  const { store, turn, agent } = step;
  const atLimit = exhaustsAtLimit(agent);
  (await Budget.load(store, turn.rootTurnId, agent.limits, { root: turn, atLimit })).checkSpend();
}

/**
 * BudgetError "cost limit reached" when the turn's tree spent more than its `maxSpend` (or as
 * much, under the later rule: `exhaustsAtLimit`).
 */
export async function checkTreeSpend(
  store: Store,
  turnId: string,
  limits: BudgetLimits,
  atLimit = false,
): Promise<void> {
  const turn = await store.loadTurn(turnId);
  (await Budget.load(store, turn.rootTurnId, limits, { atLimit })).checkSpend();
}
