/**
 * An evaluation's `budget.total`, reserved before each case starts (issue 43 #17): a case
 * reserves its cap (`budget.perCase`, else `total / concurrency`), which is also its run's
 * spend limit, and starts only when the spend so far plus every running case's reservation
 * plus its own fit in the total; it waits while running cases may still give theirs back, and
 * is skipped once the spend alone leaves no room. The cases running at once therefore never
 * spend more than is left (each may pass its cap by the model call that trips it).
 */
export class EvalBudget {
  readonly #total: number | undefined;
  readonly #perCase: number | undefined;
  #spent = 0;
  #reserved = 0;
  #waiting: (() => void)[] = [];

  constructor(budget: { perCase?: number; total?: number } | undefined, concurrency: number) {
    this.#total = budget?.total;
    this.#perCase = budget?.perCase ?? (budget?.total !== undefined ? budget.total / concurrency : undefined);
  }

  /** USD spent by the cases that ended. */
  get spent(): number {
    return this.#spent;
  }

  /**
   * Reserves a case's cap, waiting for room; `{ cap }` (undefined: no cap) once it may start,
   * null when the budget can no longer hold it.
   */
  async reserve(): Promise<{ cap: number | undefined } | null> {
    const cap = this.#perCase;
    if (this.#total === undefined || cap === undefined) return { cap };
    for (;;) {
      if (this.#spent >= this.#total || this.#spent + cap > this.#total + EPSILON) return null;
      if (this.#spent + this.#reserved + cap <= this.#total + EPSILON) {
        this.#reserved += cap;
        return { cap };
      }
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
  }

  /** A case ended: its reservation goes back and what it cost is spent; waiting cases look again. */
  settle(reservation: { cap: number | undefined }, cost: number): void {
    if (this.#total !== undefined && reservation.cap !== undefined) this.#reserved -= reservation.cap;
    this.#spent += cost;
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const wake of waiting) wake();
  }
}

/** Sums of dollar amounts drift in the last bits; a cap that fits to a billionth fits. */
const EPSILON = 1e-9;
