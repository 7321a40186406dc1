import { LostClaim, storedErrorClass } from '../../errors.js';
import { retakeClaim } from '../claim/claim.js';
import type { Runtime } from '../runtime.js';
import type { OwnerInput, TerminalNotice, TurnErrorDigest } from '../../contract/digests.js';
import { repeatedNotice, terminalNotice } from './notice.js';
import { writeTerminalIn } from './terminal-write.js';
import { callbackVerdict } from './callback.js';
import { turnEvent } from '../step/events.js';
import { TurnStep } from '../step/turn-step.js';

/**
 * Fails the turn durably with a typed error (no-op when the claim is gone). A turn that is
 * suspended waiting (claim released) is taken back by its own run first, so a root timeout
 * during a join fails it instead of leaving it waiting.
 */
export async function failTurn(
  runtime: Runtime,
  input: OwnerInput & { error: TurnErrorDigest },
): Promise<{ status: string; notice?: TerminalNotice }> {
  try {
    const retaken = await retakeClaim(runtime, input, ['waiting', 'pending', 'paused']);
    const step = await TurnStep.open(runtime, input, retaken ?? undefined);
    const error = { class: storedErrorClass(input.error.class), message: input.error.message };
    // The policy's word on the callback comes before the block: no user code under its lock.
    const verdict = await callbackVerdict(runtime, step.turn);
    const { turn, callback } = await step.write(async (tx) => {
      const write = await writeTerminalIn(
        tx,
        { status: 'failed', error },
        `turn failed: ${error.message}`,
        verdict,
      );
      tx.emit(turnEvent('turn.failed', { error }));
      return write;
    });
    return { status: turn.status, notice: await terminalNotice(runtime.store, turn, callback.delivery) };
  } catch (error) {
    if (!(error instanceof LostClaim)) throw error;
    // Terminal already (this step's commit, or a cancel): tell whoever must hear of it again.
    const notice = await repeatedNotice(runtime, input.turnId);
    const status = (await runtime.store.loadTurn(input.turnId)).status;
    return notice ? { status, notice } : { status };
  }
}
