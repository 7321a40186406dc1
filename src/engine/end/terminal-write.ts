import { nowIso } from '../../store/records.js';
import type {
  DeliveryRecord,
  JsonObject,
  MessageRecord,
  Store,
  ToolExecutionRecord,
  TurnRecord,
  TurnUpdate,
} from '../../store/types.js';
import type { Runtime } from '../runtime.js';
import { interruptOpen } from '../step/tool-results.js';
import type { CallbackVerdict } from './callback.js';
import { callbackEvents, completionCallback, emitCallback } from './callback.js';
import { messageCreated } from '../step/events.js';
import type { TurnTx } from '../step/turn-step.js';
import { repairTranscript } from './transcript-repair.js';

/** The rows of a terminal write, and what it must announce once they commit. */
export interface TerminalWrite {
  turn: TurnRecord;
  repaired: MessageRecord[];
  /** The executions this write interrupted (open when it ran). */
  interrupted: ToolExecutionRecord[];
  callback: { delivery: DeliveryRecord | null; denied: JsonObject | null };
}

/**
 * The rows of the one terminal write (see `writeTerminalIn`), inside the caller's transaction (which may check the row
 * first, as the repair of a vanished workflow does); `announceTerminalWrite` after the commit.
 * `verdict` is the policy's word on the callback, asked before the transaction.
 */
export async function writeTerminalRows(
  store: Store,
  turnId: string,
  attrs: TurnUpdate & { status: 'completed' | 'failed' | 'cancelled' },
  reason: string,
  verdict: CallbackVerdict,
): Promise<TerminalWrite> {
  return store.atomic(null, async () => {
    let turn = await store.loadTurn(turnId);
    let repaired: MessageRecord[] = [];
    let interrupted: ToolExecutionRecord[] = [];
    if (attrs.status !== 'completed') {
      interrupted = await interruptOpen(store, turn, reason);
      repaired = await repairTranscript(store, turn, reason);
      // The repair cleared `after_results` from the options this write may store again.
      turn = await store.loadTurn(turnId);
    }
    const completedAt = nowIso();
    // The callback is written while the claim is still ours, from the row as it will be stored.
    const callback = await completionCallback(
      store,
      { ...turn, ...attrs, completedAt } as TurnRecord,
      verdict,
    );
    const options = callback.denied ? { ...turn.options, callback_denied: callback.denied } : undefined;
    const updated = await store.updateTurn(turnId, {
      ...attrs,
      ...(options ? { options } : {}),
      claimToken: null,
      completedAt,
    });
    return { turn: updated, repaired, interrupted, callback };
  });
}

/**
 * The terminal write as a block of the turn's own step (a failure, the output step): the
 * block's read is the fence check, and its events go out after the commit.
 */
export async function writeTerminalIn(
  tx: TurnTx,
  attrs: TurnUpdate & { status: 'completed' | 'failed' | 'cancelled' },
  reason: string,
  verdict: CallbackVerdict,
): Promise<TerminalWrite> {
  const write = await writeTerminalRows(tx.store, tx.turn.id, attrs, reason, verdict);
  tx.emit(...write.repaired.map(messageCreated), ...callbackEvents(write.callback));
  return write;
}

/**
 * The terminal write of a turn that completes, in the caller's block and in its one update of
 * the row (decision 89): nothing is open to interrupt or repair, so the callback (as `verdict`
 * decided) and the terminal attributes are all it writes; its events go with the block's.
 */
export async function writeCompletionIn(
  tx: TurnTx,
  attrs: TurnUpdate & { status: 'completed' },
  verdict: CallbackVerdict,
): Promise<TerminalWrite['callback']> {
  const completedAt = nowIso();
  const turn = tx.turn;
  const callback = await completionCallback(
    tx.store,
    { ...turn, ...attrs, completedAt } as TurnRecord,
    verdict,
  );
  tx.set({
    ...attrs,
    ...(callback.denied ? { options: { ...turn.options, callback_denied: callback.denied } } : {}),
    claimToken: null,
    completedAt,
  });
  tx.emit(...callbackEvents(callback));
  return callback;
}

/** The events of a committed terminal write: its repaired transcript, its callback. */
export async function announceTerminalWrite(runtime: Runtime, write: TerminalWrite): Promise<void> {
  await runtime.publish(write.turn, write.repaired.map(messageCreated));
  await emitCallback(runtime, write.turn, write.callback);
}

/** `tool_call.interrupted` for each execution a terminal write interrupted. */
export async function emitInterrupted(runtime: Runtime, write: TerminalWrite): Promise<void> {
  for (const execution of write.interrupted) {
    await runtime.emit(write.turn, 'tool_call.interrupted', {
      id: execution.toolCallId,
      name: execution.toolName,
      tool_execution_id: execution.id,
    });
  }
}
