import { storedErrorClass } from '../../errors.js';
import { rootConversationId } from '../../store/tree.js';
import type { TurnRecord } from '../../store/types.js';
import { targetFinishedSignal, turnWorkflowId } from '../../workflows/contract.js';
import type { TerminalNotice } from '../../contract/digests.js';
import { callbackVerdict } from './callback.js';
import { terminalNotice } from './notice.js';
import type { RepairContext } from './repair.js';
import { announceTerminalWrite, emitInterrupted, writeTerminalRows } from './terminal-write.js';
import { wakeLane } from './workflow-start.js';

/**
 * Fails a turn whose workflow is gone, fenced: under the root's and the conversation's locks
 * (the claim's), and only while the row is as it was when Temporal was asked — same status,
 * same claim token, not updated since — so a run that claimed it meanwhile is never touched.
 * False when the row moved.
 */
export async function failVanished(
  context: RepairContext,
  seen: TurnRecord,
  workflow: string,
): Promise<boolean> {
  const { runtime } = context;
  const store = runtime.store;
  const error = { class: storedErrorClass('WorkflowClosed'), message: workflow };
  // The policy's word on a completion callback, before the transaction (no user code under its
  // lock); the terminal write re-checks what it decided on.
  const verdict = await callbackVerdict(runtime, seen);
  const written = await store.atomic(await rootConversationId(store, seen), () =>
    store.atomic(seen.conversationId, async () => {
      const fresh = await store.loadTurn(seen.id);
      const unchanged =
        fresh.status === seen.status &&
        fresh.claimToken === seen.claimToken &&
        fresh.updatedAt === seen.updatedAt;
      if (!unchanged) return null;
      return writeTerminalRows(
        store,
        seen.id,
        { status: 'failed', error },
        `turn failed: its workflow ${workflow}`,
        verdict,
      );
    }),
  );
  if (!written) return false;
  await emitInterrupted(runtime, written);
  await announceTerminalWrite(runtime, written);
  await runtime.emit(written.turn, 'turn.failed', { error, repaired: true });
  await deliverNotice(context, await terminalNotice(store, written.turn, written.callback.delivery), seen.id);
  return true;
}

/** What a turn's workflow does after its terminal write (`notify`), done from outside it. */
async function deliverNotice(context: RepairContext, notice: TerminalNotice, turnId: string): Promise<void> {
  for (const waiter of notice.waiters) {
    // A waiter whose workflow is gone is repaired on its own; the others re-check their waits.
    await context.temporal.workflow
      .getHandle(turnWorkflowId(waiter))
      .signal(targetFinishedSignal, turnWorkflowId(turnId))
      .catch(() => undefined);
  }
  for (const conversationId of notice.lanes) await wakeLane(context, conversationId);
}
