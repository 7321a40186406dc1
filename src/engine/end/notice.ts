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
  if (turn.submittedAt !== null && (await laneHasWork(store, turn.conversationId, turn.id)))
    lanes.push(turn.conversationId);
  return { waiters: await openWaiters(store, turn.id), lanes: [...new Set(lanes)] };
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

/** Turns waiting on `turnId` that are not finished yet: they get a nudge when it ends. */
async function openWaiters(store: Store, turnId: string): Promise<string[]> {
  const waiters: string[] = [];
  for (const edge of await store.listWaits({ targetTurnId: turnId })) {
    const waiter = await store.loadTurn(edge.turnId);
    if (!TERMINAL_TURN_STATUSES.includes(waiter.status)) waiters.push(waiter.id);
  }
  return waiters;
}

/**
 * Whether the conversation's lane has anything to do once `turnId` lets go of it: an
 * undelivered delivery, a buffered message, or another submitted pending turn.
 */
async function laneHasWork(store: Store, conversationId: string, turnId: string): Promise<boolean> {
  if (
    (await store.listDeliveries({ destinationConversationId: conversationId, pending: true, limit: 1 }))
      .length
  )
    return true;
  const lane = await store.listTurns({ conversationId, status: ['pending'] });
  if (lane.some((turn) => turn.id !== turnId && turn.submittedAt !== null)) return true;
  return (await store.nextDeliveryTrigger(conversationId)) !== null;
}
