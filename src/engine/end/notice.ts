/**
 * Who must hear of a terminal write once it committed: the turns waiting on it, and the lanes
 * with something to do. The workflow delivers the notice (signals, lane wake-ups).
 */
import { TERMINAL_TURN_STATUSES } from '../../store/types.js';
import type { DeliveryRecord, Store, TurnRecord } from '../../store/types.js';
import type { Runtime } from '../runtime.js';
import type { TerminalNotice } from '../../contract/digests.js';

/**
 * After a terminal write has committed: the turns waiting on it, and the lanes with
 * something to do (the callback's destination; its own conversation when work queued up).
 */
export async function terminalNotice(
  store: Store,
  turn: TurnRecord,
  callback: DeliveryRecord | null,
): Promise<TerminalNotice> {
  const lanes: string[] = [];
  if (callback) lanes.push(callback.destinationConversationId);
  // One read answers both: the waiters, and whether the turn's own lane has work.
  const lane = turn.submittedAt !== null ? turn.conversationId : null;
  const next = await store.afterTurnEnd(turn.id, lane);
  if (lane !== null && next.laneWork) lanes.push(lane);
  return { waiters: next.waiters, lanes: [...new Set(lanes)] };
}

/**
 * The notice of a terminal write that already committed, for a step that runs again after
 * its worker died between the commit and the step's result (a `turn.completed` listener that
 * exits the process, BG-14): the waiters and lanes, with the completion callback's
 * destination while that delivery is still undelivered. Null while the turn is not terminal.
 */
export async function repeatedNotice(runtime: Runtime, turnId: string): Promise<TerminalNotice | null> {
  const store = runtime.store;
  const turn = await store.loadTurn(turnId);
  if (!TERMINAL_TURN_STATUSES.includes(turn.status)) return null;
  const callback = (await store.listDeliveries({ sourceConversationId: turn.conversationId })).find(
    (delivery) => delivery.key === `completion:${turn.id}` && delivery.deliveredAt === null,
  );
  return terminalNotice(store, turn, callback ?? null);
}

export function mergeNotices(notices: readonly TerminalNotice[]): TerminalNotice {
  return {
    waiters: [...new Set(notices.flatMap((notice) => notice.waiters))],
    lanes: [...new Set(notices.flatMap((notice) => notice.lanes))],
  };
}
