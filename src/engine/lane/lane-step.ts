/**
 * Durable messages between conversations (spec §5.8): deliveries, wake-ups, completion
 * callbacks, and the conversation lane's step. Every function here is idempotent, so a
 * crash or retry anywhere repeats it safely.
 */
import {
  ArgumentError,
  AuthorizationError,
  RecordNotFound,
  StoreError,
  storedErrorClass,
} from '../../errors.js';
import { deliver } from '../../store/maintenance.js';
import { canonicalJson, nowIso } from '../../store/records.js';
import { BUSY_TURN_STATUSES, LANE_TURN_STATUSES, TERMINAL_TURN_STATUSES } from '../../store/types.js';
import type { DeliveryRecord, Json, JsonObject, Store, TurnRecord } from '../../store/types.js';
import { buildTurn } from './build-turn.js';
import { subAgentResult } from '../tools/delegation.js';
import type { Runtime } from '../runtime.js';
import { principalOf } from '../step/turn-state.js';
import type { TerminalNotice } from '../../contract/digests.js';

export interface SendMessageInput {
  sourceConversationId: string | null;
  destinationConversationId: string;
  text: string;
  /** Globally unique idempotency key: an exact retry returns the original delivery. */
  key: string;
  sourceTurnId?: string | null;
  principal: Json;
}

/**
 * `Background.send_message`: authorize `send_message`, require the destination, then create
 * the delivery under its key. Delivering it (and waking the destination) is the lane's job.
 */
export async function sendMessage(
  runtime: Runtime,
  store: Store,
  input: SendMessageInput,
): Promise<DeliveryRecord> {
  if (typeof input.text !== 'string' || input.text.trim() === '')
    throw new ArgumentError('a message needs a non-empty text');
  if (typeof input.key !== 'string' || input.key === '') throw new ArgumentError('a message needs a key');
  await runtime.authorize('send_message', input.principal, {
    source_conversation: input.sourceConversationId,
    destination_conversation: input.destinationConversationId,
  });
  await store.loadConversation(input.destinationConversationId);
  return store.createDelivery({
    sourceConversationId: input.sourceConversationId,
    destinationConversationId: input.destinationConversationId,
    sourceTurnId: input.sourceTurnId ?? null,
    key: input.key,
    payload: { text: input.text },
  });
}

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

/**
 * Whether the conversation's lane has anything to do once `turnId` lets go of it: an
 * undelivered delivery, a buffered message, or another submitted pending turn.
 */
export async function laneHasWork(store: Store, conversationId: string, turnId: string): Promise<boolean> {
  if (
    (await store.listDeliveries({ destinationConversationId: conversationId, pending: true, limit: 1 }))
      .length
  )
    return true;
  const lane = await store.listTurns({ conversationId, status: ['pending'] });
  if (lane.some((turn) => turn.id !== turnId && turn.submittedAt !== null)) return true;
  return (await store.nextDeliveryTrigger(conversationId)) !== null;
}

export function mergeNotices(notices: readonly TerminalNotice[]): TerminalNotice {
  return {
    waiters: [...new Set(notices.flatMap((notice) => notice.waiters))],
    lanes: [...new Set(notices.flatMap((notice) => notice.lanes))],
  };
}

/** The policy's word on a turn's completion callback, and what it decided on. */
export interface CallbackVerdict {
  /** `callback_conversation_id` of a submitted turn; null: the turn has no callback. */
  destination: string | null;
  /** The principal's canonical JSON. */
  principal: string;
  denied: JsonObject | null;
}

function callbackDestination(turn: TurnRecord): string | null {
  const destination = turn.options['callback_conversation_id'];
  return typeof destination === 'string' && turn.submittedAt !== null ? destination : null;
}

/**
 * Asks the policy (`callback`, with the stored principal) about the completion callback of
 * `turn`, before the terminal write's transaction opens: user code never runs under its lock.
 */
export async function callbackVerdict(runtime: Runtime, turn: TurnRecord): Promise<CallbackVerdict> {
  const destination = callbackDestination(turn);
  const verdict = { destination, principal: canonicalJson(principalOf(turn)), denied: null };
  if (destination === null) return verdict;
  try {
    await runtime.authorize('callback', principalOf(turn), {
      turn: turn.id,
      destination_conversation: destination,
    });
    return verdict;
  } catch (error) {
    if (!(error instanceof AuthorizationError)) throw error;
    return {
      ...verdict,
      denied: { class: storedErrorClass(error.name), message: error.message, at: nowIso() },
    };
  }
}

/**
 * The completion callback of a submitted turn with `callback_conversation_id` (spec §5.8):
 * as `verdict` decided, the delivery `completion:<turnId>` whose text is the JSON of the
 * turn's result. Runs inside the terminal write's transaction, before the claim is cleared;
 * `final` is the turn as it will be stored, and what the policy decided on is re-checked
 * against it. A denial leaves the turn terminal and is returned for `options.callback_denied`.
 */
export async function completionCallback(
  store: Store,
  final: TurnRecord,
  verdict: CallbackVerdict,
): Promise<{ delivery: DeliveryRecord | null; denied: JsonObject | null }> {
  const destination = callbackDestination(final);
  if (destination !== verdict.destination || canonicalJson(principalOf(final)) !== verdict.principal)
    throw new StoreError(`the completion callback of ${final.id} changed while it was authorized`, {
      retryable: true,
    });
  if (destination === null) return { delivery: null, denied: null };
  if (verdict.denied) return { delivery: null, denied: verdict.denied };
  try {
    await store.loadConversation(destination);
  } catch (error) {
    if (!(error instanceof RecordNotFound)) throw error;
    return {
      delivery: null,
      denied: { class: storedErrorClass('RecordNotFound'), message: error.message, at: nowIso() },
    };
  }
  const delivery = await store.createDelivery({
    key: `completion:${final.id}`,
    sourceConversationId: final.conversationId,
    destinationConversationId: destination,
    sourceTurnId: final.id,
    payload: { text: canonicalJson(subAgentResult(final)) },
  });
  return { delivery, denied: null };
}

/** Turns waiting on `turnId` that are not finished yet: they get a nudge when it ends. */
export async function openWaiters(store: Store, turnId: string): Promise<string[]> {
  const waiters: string[] = [];
  for (const edge of await store.listWaits({ targetTurnId: turnId })) {
    const waiter = await store.loadTurn(edge.turnId);
    if (!TERMINAL_TURN_STATUSES.includes(waiter.status)) waiters.push(waiter.id);
  }
  return waiters;
}
