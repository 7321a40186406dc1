import type { BudgetLimits } from '../../agents/agent.js';
import { limitsFromJson } from '../../agents/agent.js';
import { BudgetError, RecordNotFound } from '../../errors.js';
import type { Store, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import { iterationsOf } from './turn-state.js';

/**
 * Root-wide budget of a turn tree (spec §3.4), seeded from the store. Reservations happen
 * inside a store transaction on the root conversation, so parallel children share the
 * limits and a retried activity never counts twice.
 */
export class Budget {
  readonly limits: BudgetLimits;
  /** When the root was submitted (or started): the timeout counts queue and wait time. */
  readonly rootStartedAt: Date;
  iterations: number;
  cost: number;
  toolExecutions: number;
  readonly toolExecutionsByName: Map<string, number>;

  constructor(init: {
    limits: BudgetLimits;
    rootStartedAt: Date;
    iterations?: number;
    cost?: number;
    toolExecutions?: readonly Pick<ToolExecutionRecord, 'toolName'>[];
    /** Counts per tool name, added to `toolExecutions`. */
    toolExecutionCounts?: Readonly<Record<string, number>>;
  }) {
    this.limits = init.limits;
    this.rootStartedAt = init.rootStartedAt;
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
    options: { excludingExecutionId?: string; root?: TurnRecord } = {},
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
    if (this.limits.maxSpend !== null && this.cost > this.limits.maxSpend)
      throw new BudgetError('cost limit reached');
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

  /** The spend cap alone, on the cost seeded from the store: strictly over it fails. */
  checkSpend(): void {
    if (this.limits.maxSpend !== null && this.cost > this.limits.maxSpend)
      throw new BudgetError('cost limit reached');
  }

  /** Spend is observed, not reserved: strictly over the cap fails (spec §10.4). */
  addCost(amount: number | null): void {
    if (amount === null || this.limits.maxSpend === null) return;
    this.cost += amount;
    if (this.cost > this.limits.maxSpend) throw new BudgetError('cost limit reached');
  }
}
