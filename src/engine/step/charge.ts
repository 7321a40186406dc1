/**
 * Internal calls a turn makes besides its main model calls (an output-policy judge, an image
 * generation, a media analysis) are charged to the turn like a model call: usage and cost
 * through the runtime's cost rates and calculator, then the root's spend cap (spec §3.4).
 */
import type { BudgetLimits } from '../../agents/agent.js';
import type { Cost } from '../../models/cost.js';
import { addUsage, costFromUsage } from '../../models/cost.js';
import type { ModelUsage } from '../../models/types.js';
import type { Store } from '../../store/types.js';
import { Budget } from './budget.js';
import type { Runtime } from '../runtime.js';

/**
 * Adds the call's usage and cost to the turn in one transaction, then checks the tree's
 * spend: over `maxSpend` is a BudgetError "cost limit reached", raised after the cost is
 * recorded (like a main model call's).
 */
export async function chargeInternalCall(
  runtime: Pick<Runtime, 'cost'>,
  store: Store,
  turnId: string,
  usage: ModelUsage,
  model: string,
  limits: BudgetLimits,
): Promise<Cost> {
  const cost = await recordInternalCall(runtime, store, turnId, usage, model);
  if (cost.total !== null) await checkTreeSpend(store, turnId, limits);
  return cost;
}

/** Adds the call's usage and cost to the turn, in one transaction (no spend check). */
export async function recordInternalCall(
  runtime: Pick<Runtime, 'cost'>,
  store: Store,
  turnId: string,
  usage: ModelUsage,
  model: string,
): Promise<Cost> {
  const cost = costFromUsage(usage, model, runtime.cost);
  await store.atomic(null, async () => {
    const fresh = await store.loadTurn(turnId);
    await store.updateTurn(turnId, {
      usage: addUsage(fresh.usage, usage, cost),
      cost: (fresh.cost ?? 0) + (cost.total ?? 0),
    });
  });
  return cost;
}

/** BudgetError "cost limit reached" when the turn's tree spent more than its `maxSpend`. */
export async function checkTreeSpend(store: Store, turnId: string, limits: BudgetLimits): Promise<void> {
  const turn = await store.loadTurn(turnId);
  (await Budget.load(store, turn.rootTurnId, limits)).checkSpend();
}
