/**
 * How often a long activity (model call, tool, compaction, output checks) heartbeats.
 *
 * A heartbeat does two jobs. It keeps a live attempt from timing out (3 s heartbeat timeout,
 * docs/decisions/020-worker-loss.md), which needs one every 500 ms. And, unless the server
 * pushes cancellations to the worker (Temporal's worker commands), its reply is the only way a
 * cancel reaches the attempt, so the period bounds how late a cancel aborts the model request
 * or tool. The pacer therefore beats every 500 ms when cancellations are pushed, and otherwise
 * as often as every 100 ms, spreading a budget of heartbeats per second over the attempts in
 * flight in this process, never slower than the 500 ms liveness needs (decision 24).
 */

/** Liveness alone: a 3 s heartbeat timeout misses five of these before a worker is lost. */
export const LIVENESS_INTERVAL_MS = 500;
/** The shortest period, for a cancel carried by the heartbeat's reply. */
export const CANCEL_INTERVAL_MS = 100;
/** Heartbeats per second one worker process sends at most, above the liveness floor. */
export const HEARTBEAT_BUDGET_PER_SECOND = 200;

/** How a cancel reaches an activity attempt in flight. */
export type CancelDelivery = 'worker-command' | 'heartbeat';

export class HeartbeatPacer {
  #inFlight = 0;
  #sent = 0;

  constructor(readonly delivery: CancelDelivery = 'heartbeat') {}

  /** Heartbeats sent by this process's activities so far (before the SDK's own throttle). */
  get sent(): number {
    return this.#sent;
  }

  /** The period for the next heartbeat, from how many attempts are in flight now. */
  interval(): number {
    if (this.delivery === 'worker-command') return LIVENESS_INTERVAL_MS;
    const spread = (this.#inFlight * 1000) / HEARTBEAT_BUDGET_PER_SECOND;
    return Math.min(LIVENESS_INTERVAL_MS, Math.max(CANCEL_INTERVAL_MS, spread));
  }

  /** Runs `fn`, calling `beat` at the paced period until it settles. */
  async run<T>(beat: () => void, fn: () => Promise<T>): Promise<T> {
    this.#inFlight += 1;
    let timer: NodeJS.Timeout | undefined;
    const next = () => {
      timer = setTimeout(() => {
        this.#sent += 1;
        beat();
        next();
      }, this.interval());
    };
    next();
    try {
      return await fn();
    } finally {
      clearTimeout(timer);
      this.#inFlight -= 1;
    }
  }
}
