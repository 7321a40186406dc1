/**
 * The root timeout of a turn: the deadline its tree's root set when it started (the claim
 * says it). When it passes, whatever the turn has in flight is cancelled and the turn fails
 * "turn timed out".
 *
 * Runs before 0.6 start a durable timer when the claim returns. 0.6 runs (decision 87) arm
 * that timer only when the turn is about to wait on something else than one of its own model,
 * tool or output activities: those are scheduled with a schedule-to-close that ends at the
 * deadline, so a turn that only calls them needs no timer, and its history no timer events.
 * An activity that times out at the deadline then stops the turn as the timer would have.
 */
import type { ActivityOptions } from '@temporalio/workflow';
import {
  ActivityFailure,
  CancellationScope,
  CancelledFailure,
  sleep,
  TimeoutFailure,
} from '@temporalio/workflow';
import { msToNumber } from '@temporalio/common/lib/time.js';

export class RootDeadline {
  #at: number | null = null;
  #armed = false;
  #expired = false;
  /** What the deadline stops: set by the turn's cancel (its scope). */
  onExpire: () => void = () => undefined;

  /** @param lazy arm the timer only before a wait (0.6 runs); otherwise when the claim returns. */
  constructor(private readonly lazy: boolean) {}

  /** The claim's deadline (ISO time); null: the turn has none. */
  set(deadline: string | null | undefined): void {
    if (!deadline || this.#at !== null) return;
    this.#at = Date.parse(deadline);
    if (!this.lazy) this.arm();
  }

  /** Starts the durable timer, once; before a wait that no activity's timeout bounds. */
  arm(): void {
    if (this.#at === null || this.#armed) return;
    this.#armed = true;
    const remaining = Math.max(this.#at - Date.now(), 0);
    void CancellationScope.nonCancellable(() => sleep(remaining)).then(() => this.#expire());
  }

  /**
   * The options that end an activity at the deadline: its schedule-to-close (and its
   * start-to-close) cut to the time left. None when there is no deadline or the timer is armed
   * (it cancels the activity). Past the deadline the turn times out here, before scheduling.
   */
  bound(options: ActivityOptions): Partial<ActivityOptions> {
    if (this.#at === null || this.#armed) return {};
    const left = this.#at - Date.now();
    if (left <= 0) {
      this.#expire();
      throw new CancelledFailure('turn timed out');
    }
    const cut = (limit: ActivityOptions['startToCloseTimeout']) =>
      limit === undefined ? left : Math.min(msToNumber(limit), left);
    return {
      scheduleToCloseTimeout: cut(options.scheduleToCloseTimeout),
      startToCloseTimeout: cut(options.startToCloseTimeout),
    };
  }

  /**
   * An activity scheduled with `bound` failed: a timeout at or after the deadline is the root
   * timeout, and stops the turn (the caller rethrows; the turn fails "turn timed out").
   */
  failed(error: unknown): void {
    if (this.#at === null || this.#armed || Date.now() < this.#at) return;
    if (error instanceof ActivityFailure && error.cause instanceof TimeoutFailure) this.#expire();
  }

  #expire(): void {
    if (this.#expired) return;
    this.#expired = true;
    this.onExpire();
  }
}
