/**
 * An evaluation's `budget.total`, reserved before each case starts (issue 43 #17): a case
 * reserves its cap (`budget.perCase`, else `total / concurrency`; what is left, when less and
 * no other case runs), which is also its run's spend limit, and starts only when the spend so
 * far plus every running case's reservation plus its own fit in the total; it waits while
 * running cases may still give theirs back, and is skipped once the total is spent. The cases
 * running at once therefore never spend more than is left (each may pass its cap by the model
 * call that trips it).
 */
export class EvalBudget {
  readonly #total: number | undefined;
  readonly #perCase: number | undefined;
  #spent = 0;
  #reserved = 0;
  #holders = 0;
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
   * null when the budget can no longer hold it. A case starts with its full cap when that fits
   * beside the running cases' reservations, or, when none is running, with what is left.
   */
  async reserve(): Promise<{ cap: number | undefined } | null> {
    const perCase = this.#perCase;
    if (this.#total === undefined || perCase === undefined) return { cap: perCase };
    for (;;) {
      const left = this.#total - this.#spent - this.#reserved;
      if (this.#total - this.#spent <= EPSILON) return null;
      if (perCase <= left + EPSILON || this.#holders === 0) {
        const cap = Math.min(perCase, left);
        this.#reserved += cap;
        this.#holders += 1;
        return { cap };
      }
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
  }

  /** A case ended: its reservation goes back and what it cost is spent; waiting cases look again. */
  settle(reservation: { cap: number | undefined }, cost: number): void {
    if (this.#total !== undefined && reservation.cap !== undefined) {
      this.#reserved -= reservation.cap;
      this.#holders -= 1;
    }
    this.#spent += cost;
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const wake of waiting) wake();
  }
}

/** Sums of dollar amounts drift in the last bits; a cap that fits to a billionth fits. */
const EPSILON = 1e-9;
