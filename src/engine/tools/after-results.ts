/**
 * Messages a completed tool call asked for after the results (`ToolContext.appendAfterResults`:
 * an image, a media analysis), kept in `state.after_results` until every call of the response
 * has its result: written when the tools phase closes, or when a failure or a cancel repairs
 * the transcript.
 */
import type { AfterResultsMessage } from '../../agents/tool.js';
import type { MessageRecord, Store, TurnRecord } from '../../store/types.js';
import { turnState, updateState } from '../step/turn-state.js';

/**
 * Writes the messages completed calls asked for after the results (an image, a media
 * analysis): every call of the response has its result by now, so none sits between a call
 * and its result. Inside the caller's transaction, which also clears them from the state.
 */
export async function appendAfterResults(store: Store, turn: TurnRecord): Promise<MessageRecord[]> {
  const pending = turnState(await store.loadTurn(turn.id)).after_results ?? [];
  if (pending.length === 0) return [];
  const appended: MessageRecord[] = [];
  for (const message of pending as unknown as (AfterResultsMessage & { id: string })[]) {
    appended.push(
      await store.appendMessage({ ...message, conversationId: turn.conversationId, turnId: turn.id }),
    );
  }
  await updateState(store, turn.id, { after_results: null });
  return appended;
}
