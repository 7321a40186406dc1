import type { Agent, BudgetLimits } from '../../agents/agent.js';
import { limitsFromJson } from '../../agents/agent.js';
import { BudgetError } from '../../errors.js';
import type { Store, ToolExecutionRecord, TurnRecord } from '../../store/types.js';

export const COST_LIMIT_REACHED = 'cost limit reached';

/**
 * The spend rule of a turn of this agent. TurnKit 0.6 fails only strictly over `maxSpend`
 * (spec §10.4); its later versions count spend equal to the cap as exhausted. A turn of an
 * agent with a `budgetCompletion` tool follows the later rule, every other turn keeps 0.6's:
 * its behaviour and the 0.6 tests stay as they were (decision 38).
 */
export function exhaustsAtLimit(agent: Pick<Agent, 'effectiveTools'>): boolean {
  return agent.effectiveTools.some((tool) => tool.budgetCompletion === true);
}

/** Whether an execution counts against the tree's budget: not cancelled, not budget-denied. */
function countsAgainstBudget(execution: ToolExecutionRecord): boolean {
  return execution.status !== 'cancelled' && execution.error?.details?.['budget_denied'] !== true;
}

/**
 * Root-wide budget of a turn tree (spec §3.4), seeded from the store. Reservations happen
 * inside a store transaction on the root conversation, so parallel children share the
 * limits and a retried activity never counts twice.
 */
export class Budget {
  readonly limits: BudgetLimits;
  /** When the root was submitted (or started): the timeout counts queue and wait time. */
  readonly rootStartedAt: Date;
  /** Spend equal to `maxSpend` is exhausted (`exhaustsAtLimit`); otherwise only spend over it. */
  readonly atLimit: boolean;
  iterations: number;
  cost: number;
  toolExecutions: number;
  readonly toolExecutionsByName: Map<string, number>;

  constructor(init: {
    limits: BudgetLimits;
    rootStartedAt: Date;
    atLimit?: boolean;
    iterations?: number;
    cost?: number;
    toolExecutions?: readonly Pick<ToolExecutionRecord, 'toolName'>[];
    /** Counts per tool name, added to `toolExecutions`. */
    toolExecutionCounts?: Readonly<Record<string, number>>;
  }) {
    this.limits = init.limits;
    this.rootStartedAt = init.rootStartedAt;
    this.atLimit = init.atLimit ?? false;
    this.iterations = init.iterations ?? 0;
    this.cost = init.cost ?? 0;
    this.toolExecutions = 0;
    this.toolExecutionsByName = new Map();
    const add = (name: string, count: number) => {
      if (count <= 0) return;
      this.toolExecutions += count;
      this.toolExecutionsByName.set(name, (this.toolExecutionsByName.get(name) ?? 0) + count);
    };
    for (const execution of init.toolExecutions ?? []) add(execution.toolName, 1);
    for (const [name, count] of Object.entries(init.toolExecutionCounts ?? {})) add(name, count);
  }

  /**
   * Seeds from the tree's counters, which the store keeps in one row as the tree's rows change
   * (decision 59): iterations and cost summed over its turns; tool executions counted except
   * cancelled ones and budget-denied ones (spec §10.3: unknown-tool and invalid-argument
   * executions do count). `excluding` is an execution the caller has just created in this
   * transaction and is deciding about: it is left out of the counts.
   */
  static async load(
    store: Store,
    rootTurnId: string,
    fallback: BudgetLimits,
    options: { excluding?: ToolExecutionRecord; root?: TurnRecord; atLimit?: boolean } = {},
  ): Promise<Budget> {
    // A root's step already read its row under the lock: it is the root.
    const root = options.root?.id === rootTurnId ? options.root : await store.loadTurn(rootTurnId);
    const usage = await store.budgetUsage(rootTurnId);
    const counts = { ...usage.toolExecutionsByName };
    const excluded = options.excluding;
    if (excluded && countsAgainstBudget(excluded) && (counts[excluded.toolName] ?? 0) > 0) {
      counts[excluded.toolName] = counts[excluded.toolName]! - 1;
    }
    return new Budget({
      limits: limitsFromJson(root.options['budget_limits'], fallback),
      rootStartedAt: new Date(root.submittedAt ?? root.startedAt ?? new Date().toISOString()),
      atLimit: options.atLimit ?? false,
      iterations: usage.iterations,
      cost: usage.cost,
      toolExecutionCounts: counts,
    });
  }

  /** The root's deadline, or null when the tree has no timeout. */
  get deadline(): Date | null {
    return this.limits.timeout === null
      ? null
      : new Date(this.rootStartedAt.getTime() + this.limits.timeout * 1000);
  }

  /** The deadline from the root's row alone (no reads of the tree): what the claim needs. */
  static deadlineOf(root: TurnRecord, fallback: BudgetLimits): Date | null {
    return new Budget({
      limits: limitsFromJson(root.options['budget_limits'], fallback),
      rootStartedAt: new Date(root.submittedAt ?? root.startedAt ?? new Date().toISOString()),
    }).deadline;
  }

  /** Checked at the top of every step: depth, wall clock, spend. */
  check(depth: number, now: Date = new Date()): void {
    if (depth > this.limits.maxDepth) throw new BudgetError('maximum sub-agent depth reached');
    const deadline = this.deadline;
    if (deadline && now.getTime() >= deadline.getTime()) throw new BudgetError('turn timed out');
    this.checkSpend();
  }

  reserveIteration(): void {
    if (this.iterations >= this.limits.maxIterations) throw new BudgetError('maximum iterations reached');
    this.iterations += 1;
  }

  reserveToolExecution(name: string): void {
    if (this.toolExecutions >= this.limits.maxToolExecutions)
      throw new BudgetError('maximum tool executions reached');
    const cap = this.limits.maxToolExecutionsByName[name];
    const used = this.toolExecutionsByName.get(name) ?? 0;
    if (cap !== undefined && used >= cap)
      throw new BudgetError(`maximum executions reached for tool ${name}`);
    this.toolExecutions += 1;
    this.toolExecutionsByName.set(name, used + 1);
  }

  /** Whether `cost` leaves nothing to spend: over the cap, or at it under the later rule. */
  spendExhausted(cost: number = this.cost): boolean {
    const cap = this.limits.maxSpend;
    return cap !== null && (this.atLimit ? cost >= cap : cost > cap);
  }

  /** The spend cap alone, on the cost seeded from the store. */
  checkSpend(): void {
    if (this.spendExhausted()) throw new BudgetError(COST_LIMIT_REACHED);
  }

  /** Spend is observed, not reserved: the cap is checked once the cost is known (spec §10.4). */
  addCost(amount: number | null): void {
    if (amount === null || this.limits.maxSpend === null) return;
    this.cost += amount;
    this.checkSpend();
  }
}
