/**
 * Messages a completed tool call asked for after the results (`ToolContext.appendAfterResults`:
 * an image, a media analysis), kept in `state.after_results` until every call of the response
 * has its result: written when the tools phase closes, or when a failure or a cancel repairs
 * the transcript.
 */
import type { AfterResultsMessage } from '../../agents/tool.js';
import type { JsonObject, MessageRecord, Store, TurnRecord } from '../../store/types.js';
import type { TurnTx } from './turn-step.js';
import { turnState } from './turn-state.js';

/**
 * Writes the messages completed calls asked for after the results: every call of the
 * response has its result by now, so none sits between a call and its result. In the
 * block that also clears them from the state.
 */
export async function appendAfterResults(tx: TurnTx): Promise<MessageRecord[]> {
  const appended = await writePending(tx.store, tx.turn, tx.state.after_results);
  if (appended.length > 0) tx.patchState({ after_results: null });
  return appended;
}

/**
 * `appendAfterResults` for a terminal write outside a step (a cancel, the repair of a
 * vanished workflow): inside the caller's transaction, on the row as it reads it now.
 */
export async function appendAfterResultsTo(store: Store, turnId: string): Promise<MessageRecord[]> {
  const turn = await store.loadTurn(turnId);
  const appended = await writePending(store, turn, turnState(turn).after_results);
  if (appended.length === 0) return appended;
  const state = { ...turnState(turn), after_results: null } as JsonObject;
  await store.updateTurn(turnId, { options: { ...turn.options, state } });
  return appended;
}

async function writePending(
  store: Store,
  turn: TurnRecord,
  pending: JsonObject[] | null | undefined,
): Promise<MessageRecord[]> {
  const appended: MessageRecord[] = [];
  for (const message of (pending ?? []) as unknown as (AfterResultsMessage & { id: string })[]) {
    appended.push(
      await store.appendMessage({ ...message, conversationId: turn.conversationId, turnId: turn.id }),
    );
  }
  return appended;
}
