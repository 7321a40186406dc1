/**
 * How a turn workflow is asked to stop: the `cancel` signal, Temporal's own cancellation
 * request (0.5 runs) and the root timeout (root-deadline.ts). The policy decides on a cancel in an activity; an
 * accepted one, or the timeout, cancels the scope everything the turn does runs in.
 */
import { CancellationScope, log, setHandler } from '@temporalio/workflow';
import type { CancelRequest } from '../contract/cancel-request.js';
import { parseCancelRequest } from '../contract/cancel-request.js';
import type { TurnActivityProxies } from './activity-options.js';
import { cancelSignal } from './contract.js';
import type { TurnControls } from './controls.js';

/** Where a cancel is authorized: a scheduled or a local activity (see `TurnCancel`). */
type CancelChecks = TurnActivityProxies['controls'] | TurnActivityProxies['store'];

export class TurnCancel {
  /** The cancel the policy accepted; the first one wins. */
  request: CancelRequest | null = null;
  /** The root timeout fired: the turn fails ("turn timed out") rather than being cancelled. */
  timedOut = false;

  constructor(
    private readonly turnId: string,
    private readonly checks: CancelChecks,
    private readonly scope: CancellationScope,
    private readonly controls: TurnControls | null,
  ) {}

  /** Registers the cancel signal, and on 0.5 runs Temporal's own cancellation request. */
  register(shield: CancellationScope | undefined): void {
    // Shielded too: a cancel signal still counts after Temporal's own cancel was refused.
    setHandler(cancelSignal, (payload: unknown) =>
      shield ? shield.run(() => this.onSignal(payload)) : this.onSignal(payload),
    );
    // `temporal workflow cancel`, the UI's Cancel: unsigned, `verification: 'temporal'`.
    if (shield) void shield.cancelRequested.catch(() => this.onNativeCancel());
  }

  async onSignal(payload: unknown): Promise<void> {
    const parsed = parseCancelRequest(payload);
    if (!parsed.ok) {
      await this.checks.rejectCancel({ turnId: this.turnId, reason: parsed.reason });
      return;
    }
    const verdict = await this.checks.authorizeCancel({ turnId: this.turnId, ...parsed.value });
    this.#accept(verdict.allowed, parsed.value);
  }

  async onNativeCancel(): Promise<void> {
    const native = { descendants: 'retain' as const, principal: null };
    // An authorization that fails for good (the policy threw something else, the store stayed
    // down) is a refusal: an unhandled rejection here would fail every workflow task.
    const verdict = await CancellationScope.nonCancellable(() =>
      this.checks.authorizeCancel({ turnId: this.turnId, ...native, native: true }),
    ).catch((error: unknown) => {
      log.warn('turnkit native cancel: authorization failed, the cancel is refused', {
        turnId: this.turnId,
        error: error instanceof Error ? error.message : String(error),
      });
      return { allowed: false };
    });
    this.#accept(verdict.allowed, native);
  }

  /** The root deadline passed (its timer, or an activity that ended at it): stops the turn. */
  expire(): void {
    this.timedOut = true;
    this.scope.cancel();
  }

  #accept(allowed: boolean, request: CancelRequest): void {
    if (!allowed || this.request) return;
    this.request = request;
    if (this.controls) this.controls.finished = true;
    this.scope.cancel();
  }
}
