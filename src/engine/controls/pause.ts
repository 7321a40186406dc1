/** Pausing a turn at a control boundary and taking it back (spec Appendix A). */
import { LostClaim } from '../../errors.js';
import { retakeClaim } from '../claim/claim.js';
import { turnDigest } from '../step/digest.js';
import { turnEvent } from '../step/events.js';
import { TurnStep } from '../step/turn-step.js';
import type { Runtime } from '../runtime.js';
import type { OwnerInput, TurnDigest } from '../../contract/digests.js';

/**
 * Stops the turn at a control boundary: `paused`, claim cleared, no worker held. Run again
 * after its worker died past the commit, it finds the turn paused and has nothing to do.
 */
export async function pauseTurn(runtime: Runtime, input: OwnerInput): Promise<void> {
  const current = await runtime.store.loadTurn(input.turnId);
  if (current.status === 'paused' && current.claimToken === null) return;
  const step = await TurnStep.open(runtime, input, current);
  await step.write(async (tx) => {
    tx.set({ status: 'paused', claimToken: null });
    tx.emit(turnEvent('turn.paused'));
  });
}

/** Takes the paused turn back; LostClaim when it was cancelled (or timed out) meanwhile. */
export async function resumePausedTurn(runtime: Runtime, input: OwnerInput): Promise<TurnDigest> {
  const resumed = await retakeClaim(runtime, input, ['paused']);
  if (!resumed) {
    const { status } = await runtime.store.loadTurn(input.turnId);
    throw new LostClaim(`turn ${input.turnId} is ${status}: it can no longer resume`);
  }
  await runtime.emit(resumed, 'turn.resumed', {});
  return turnDigest(runtime.agents.resolve(resumed.agentName), resumed);
}
