/**
 * Taking a turn back after it let go of its claim: once its children resolved (`waiting`),
 * or when a person resumes it (`paused`). Both retake the claim the turn gave up.
 */
import { LostClaim } from '../../errors.js';
import type { TurnStatus } from '../../store/types.js';
import { turnDigest } from '../step/digest.js';
import type { Runtime } from '../runtime.js';
import type { OwnerInput, TurnDigest } from '../../contract/digests.js';
import { retakeClaim } from './claim.js';

/** The turn retaken from `from`; LostClaim when it was cancelled (or timed out) meanwhile. */
async function retake(runtime: Runtime, input: OwnerInput, from: TurnStatus) {
  const resumed = await retakeClaim(runtime, input, [from]);
  if (!resumed) {
    const { status } = await runtime.store.loadTurn(input.turnId);
    throw new LostClaim(`turn ${input.turnId} is ${status}: it can no longer resume`);
  }
  return resumed;
}

/** Takes the turn back after its children resolved; fails with LostClaim if it was cancelled meanwhile. */
export async function resumeTurn(runtime: Runtime, input: OwnerInput): Promise<TurnDigest> {
  const resumed = await retake(runtime, input, 'waiting');
  return turnDigest(runtime.agents.resolve(resumed.agentName), resumed);
}

/** Takes the paused turn back; LostClaim when it was cancelled (or timed out) meanwhile. */
export async function resumePausedTurn(runtime: Runtime, input: OwnerInput): Promise<TurnDigest> {
  const resumed = await retake(runtime, input, 'paused');
  await runtime.emit(resumed, 'turn.resumed', {});
  return turnDigest(runtime.agents.resolve(resumed.agentName), resumed);
}
