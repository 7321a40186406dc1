/**
 * The conversation lane's step (spec §5.8): deliveries, wake-ups, and the turn that may run
 * now. Every function here is idempotent, so a crash or retry anywhere repeats it safely.
 */
import { deliver } from '../../store/maintenance.js';
import { BUSY_TURN_STATUSES, LANE_TURN_STATUSES } from '../../store/types.js';
import type { Store, TurnRecord } from '../../store/types.js';
import { buildTurn } from './build-turn.js';
import type { Runtime } from '../runtime.js';

/**
 * `wake(conversation)`: when the conversation is idle and holds a delivered message newer
 * than anything its turns consumed, build one submitted turn triggered by the newest such
 * message, with the destination conversation's own principal. Call it under the
 * conversation's lock.
 */
export async function wakeConversation(
  runtime: Runtime,
  store: Store,
  conversationId: string,
): Promise<TurnRecord | null> {
  if (await store.busyConversation(conversationId)) return null;
  const trigger = await store.nextDeliveryTrigger(conversationId);
  if (!trigger) return null;
  const conversation = await store.loadConversation(conversationId);
  const agent = runtime.agents.resolve(conversation.agentName);
  // The turn snapshots the conversation as it is now, so it sees every buffered message.
  const sequence = await store.latestMessageSequence(conversationId);
  return buildTurn(store, agent, conversationId, { id: trigger.id, sequence }, { submit: true });
}

export interface LaneStep {
  /** Deliveries this step appended to the conversation. */
  delivered: number;
  /** A continuation turn built by a wake-up, if any. */
  woke: string | null;
  /** The turn the lane should run now: the oldest submitted pending one of an idle lane. */
  next: TurnRecord | null;
  /** Submitted pending turns in the lane, `next` included. */
  queued: number;
  /** The turns that hold the lane (running, waiting, paused): why `next` is null. */
  busy: TurnRecord[];
}

/**
 * One step of a conversation's lane: deliver what is addressed to it (each delivery with its
 * wake-up in one transaction), wake it for messages buffered while it was busy, and name the
 * turn that may run now. The lane workflow then starts (or nudges) that turn's workflow.
 */
export async function laneStep(runtime: Runtime, conversationId: string): Promise<LaneStep> {
  const store = runtime.store;
  let delivered = 0;
  let woke: string | null = null;
  for (const delivery of await store.listDeliveries({
    destinationConversationId: conversationId,
    pending: true,
  })) {
    const outcome = await deliver(store, delivery.id, {
      onDelivered: async () => {
        const turn = await wakeConversation(runtime, store, conversationId);
        if (turn) woke = turn.id;
      },
    });
    if (outcome.delivered) delivered += 1;
  }
  const buffered = await store.atomic(conversationId, () => wakeConversation(runtime, store, conversationId));
  if (buffered) woke = buffered.id;
  const lane = await store.listTurns({ conversationId, status: [...LANE_TURN_STATUSES] });
  const queue = lane.filter((turn) => turn.status === 'pending' && turn.submittedAt !== null);
  const busy = lane.filter((turn) => BUSY_TURN_STATUSES.includes(turn.status));
  if (busy.length > 0) return { delivered, woke, next: null, queued: queue.length, busy };
  const next = queue.sort((a, b) =>
    a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1,
  )[0];
  return { delivered, woke, next: next ?? null, queued: queue.length, busy };
}
