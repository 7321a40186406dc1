import type { Agent, BudgetLimits } from '../../agents/agent.js';
import { limitsFromJson } from '../../agents/agent.js';
import { BudgetError, RecordNotFound } from '../../errors.js';
import type { Store, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import { iterationsOf } from './turn-state.js';

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
   * Seeds from every turn of the root's tree: iterations and cost summed; tool executions
   * counted except cancelled ones and budget-denied ones (spec §10.3: unknown-tool and
   * invalid-argument executions do count).
   */
  static async load(
    store: Store,
    rootTurnId: string,
    fallback: BudgetLimits,
    options: { excludingExecutionId?: string; root?: TurnRecord; atLimit?: boolean } = {},
  ): Promise<Budget> {
    // A root's step already read its row under the lock: it is the root.
    const root = options.root?.id === rootTurnId ? options.root : await store.loadTurn(rootTurnId);
    const turns = await store.listTurns({ rootTurnId });
    // Counted in the store, not read whole: a long turn holds thousands of executions. Only
    // those with an error are read, to leave the budget-denied ones out.
    const turnIds = turns.map((turn) => turn.id);
    const exceptStatuses = ['cancelled'] as const;
    const counts = turnIds.length
      ? await store.countToolExecutions({ turnIds, hasError: false, exceptStatuses })
      : {};
    const errored = turnIds.length ? await store.listToolExecutions({ turnIds, hasError: true }) : [];
    const counted = errored.filter(
      (execution) =>
        execution.id !== options.excludingExecutionId &&
        execution.status !== 'cancelled' &&
        execution.error?.details?.['budget_denied'] !== true,
    );
    const excluded = options.excludingExecutionId
      ? await store.loadToolExecution(options.excludingExecutionId).catch((error: unknown) => {
          if (error instanceof RecordNotFound) return null;
          throw error;
        })
      : null;
    if (
      excluded &&
      excluded.error == null &&
      excluded.status !== 'cancelled' &&
      turnIds.includes(excluded.turnId) &&
      (counts[excluded.toolName] ?? 0) > 0
    ) {
      counts[excluded.toolName] = (counts[excluded.toolName] ?? 0) - 1;
    }
    return new Budget({
      limits: limitsFromJson(root.options['budget_limits'], fallback),
      rootStartedAt: new Date(root.submittedAt ?? root.startedAt ?? new Date().toISOString()),
      atLimit: options.atLimit ?? false,
      iterations: turns.reduce((sum, turn) => sum + iterationsOf(turn), 0),
      cost: turns.reduce((sum, turn) => sum + (turn.cost ?? 0), 0),
      toolExecutions: counted,
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
