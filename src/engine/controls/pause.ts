/** Pausing a turn at a control boundary (spec Appendix A); `claim/resume.ts` takes it back. */
import { turnEvent } from '../step/events.js';
import { TurnStep } from '../step/turn-step.js';
import type { Runtime } from '../runtime.js';
import type { OwnerInput } from '../../contract/digests.js';

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
