import { LostClaim, storedErrorClass } from '../../errors.js';
import { retakeClaim } from '../claim/claim.js';
import type { Runtime } from '../runtime.js';
import type { OwnerInput, TerminalNotice, TurnErrorDigest } from '../../contract/digests.js';
import { repeatedNotice, terminalNotice } from './notice.js';
import { writeTerminal } from './terminal-write.js';

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
    const { store } = await runtime.ownTurn(input, retaken ?? undefined);
    const error = { class: storedErrorClass(input.error.class), message: input.error.message };
    const { turn, callback } = await writeTerminal(
      runtime,
      store,
      input.turnId,
      { status: 'failed', error },
      `turn failed: ${error.message}`,
    );
    await runtime.emit(turn, 'turn.failed', { error });
    return { status: turn.status, notice: await terminalNotice(runtime.store, turn, callback) };
  } catch (error) {
    if (!(error instanceof LostClaim)) throw error;
    // Terminal already (this step's commit, or a cancel): tell whoever must hear of it again.
    const notice = await repeatedNotice(runtime, input.turnId);
    const status = (await runtime.store.loadTurn(input.turnId)).status;
    return notice ? { status, notice } : { status };
  }
}
