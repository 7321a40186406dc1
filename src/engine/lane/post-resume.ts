/**
 * What a post finishes after it was recorded (decision 57): the recorded post is the single
 * source of what was decided, and whoever finds it (the retried activity after a crash, or the
 * same request id sent again) completes what is missing and never repeats what was done: the
 * started turn's workflow, the steer's Update (the same Update id; refused, the post queues
 * once), the interrupting post's cancels and its next turn.
 */
import type { PostReceipt, PostRequest } from '../../contract/post-request.js';
import type { Agent } from '../../agents/agent.js';
import { PostConflictError } from '../../errors.js';
import { occupiesLane } from '../../store/records.js';
import type { DeliveryRecord, MessageRecord, Store, TurnRecord } from '../../store/types.js';
import { LANE_TURN_STATUSES, TERMINAL_TURN_STATUSES } from '../../store/types.js';
import type { RepairContext } from '../end/repair.js';
import { startOrNudgeTurn } from '../end/workflow-start.js';
import { wakeConversation } from './lane-step.js';
import { cancelOnBehalf, steerOnBehalf } from './post-effects.js';
import { answeringTurn, appendPostMessage, receiptOf, receiptOnly, steerMessage } from './post-record.js';

/** How long an interrupting post waits for the turns it cancelled before it names the next turn. */
const INTERRUPT_WAIT_MS = 15_000;

/** One post being decided: who sent it, and whether its signature checked out. */
export interface Post {
  context: RepairContext;
  conversationId: string;
  request: PostRequest;
  agent: Agent;
  verified: boolean;
}

/** The turns that hold the conversation's lane (or wait for it). */
export async function laneOf(store: Store, conversationId: string): Promise<TurnRecord[]> {
  return (await store.listTurns({ conversationId, status: [...LANE_TURN_STATUSES] })).filter((turn) =>
    occupiesLane(turn, true),
  );
}

/**
 * A post already recorded: its receipt, after finishing what a crash may have cut short. The
 * same request id with another text is a PostConflictError.
 */
export async function resumePost(post: Post, delivery: DeliveryRecord): Promise<PostReceipt> {
  const { context, request } = post;
  const store = context.runtime.store;
  if (delivery.payload['text'] !== request.text)
    throw new PostConflictError(
      `request id ${request.requestId} was already posted to this conversation with another text`,
      { details: { requestId: request.requestId } },
    );
  const status = await receiptOf(store, delivery);
  if (status.disposition === 'started' && status.turnId && status.turnStatus === 'pending')
    await startOrNudgeTurn(context, await store.loadTurn(status.turnId));
  if (status.disposition === 'steered' && status.messageId === null) return completeSteer(post, delivery);
  if (status.disposition === 'interrupted' && status.turnId === null && status.messageId) {
    const cancelled = delivery.payload['cancelled'];
    const targets = Array.isArray(cancelled)
      ? cancelled.filter((id): id is string => typeof id === 'string')
      : [];
    const turnId = await interruptTurns(post, await store.loadMessage(status.messageId), targets);
    return { ...receiptOnly(status), turnId };
  }
  return receiptOnly(status);
}

/**
 * Sends the recorded steer's Update (its own id: a second send meets the first one's outcome).
 * Refused, or its turn already finished without writing it, the post queues instead.
 */
export async function completeSteer(post: Post, delivery: DeliveryRecord): Promise<PostReceipt> {
  const { context, request } = post;
  const turnId = String(delivery.payload['turn_id']);
  const updateId = String(delivery.payload['steer_id']);
  const turn = await context.runtime.store.loadTurn(turnId);
  const steered = TERMINAL_TURN_STATUSES.includes(turn.status)
    ? 'refused'
    : await steerOnBehalf(context.runtime, context.temporal, {
        turnId,
        updateId,
        request,
        verified: post.verified,
      });
  if (steered === 'accepted')
    return { requestId: request.requestId, messageId: null, turnId, disposition: 'steered' };
  return queueRefusedSteer(post, delivery);
}

/**
 * A steer the turn did not take: the text is appended as a queued post's message, once, and
 * the row points at it (its receipt then says `queued`). Under the lock, and only when the
 * turn has not written the steer after all (an earlier Update of the same id was applied).
 */
async function queueRefusedSteer(post: Post, delivery: DeliveryRecord): Promise<PostReceipt> {
  const { conversationId, request } = post;
  const store = post.context.runtime.store;
  await store.atomic(conversationId, async () => {
    const current = await store.loadDelivery(delivery.id);
    if (current.messageId !== null || (await steerMessage(store, current))) return;
    const message = await appendPostMessage(store, conversationId, request);
    await store.updateDelivery(delivery.id, { messageId: message.id, deliveredAt: message.createdAt });
  });
  return receiptOnly(await receiptOf(store, await store.loadDelivery(delivery.id)));
}

/** Cancels the targets still open (retain) and names the turn that answers the message. */
export async function interruptTurns(
  post: Post,
  message: MessageRecord,
  targets: readonly string[],
): Promise<string | null> {
  const { context, request } = post;
  const store = context.runtime.store;
  const open = (await Promise.all(targets.map((id) => store.loadTurn(id))))
    .filter((turn) => !TERMINAL_TURN_STATUSES.includes(turn.status))
    .map((turn) => turn.id);
  await cancelOnBehalf(context.runtime, context.temporal, open, request, post.verified);
  return nextTurnAfter(context, post.conversationId, message, targets);
}

/**
 * Once the cancelled turns ended, the lane's wake-up builds the turn that sees the message
 * (here or in the lane's own step, whichever comes first) and it is started. Null when they
 * have not ended in time: the lane builds it when they do, and `inputStatus` names it.
 */
async function nextTurnAfter(
  context: RepairContext,
  conversationId: string,
  message: MessageRecord,
  cancelled: readonly string[],
): Promise<string | null> {
  const store = context.runtime.store;
  const until = Date.now() + INTERRUPT_WAIT_MS;
  for (let wait = 25; ; wait = Math.min(wait * 2, 250)) {
    const turns = await Promise.all(cancelled.map((id) => store.loadTurn(id)));
    if (turns.every((turn) => TERMINAL_TURN_STATUSES.includes(turn.status))) break;
    if (Date.now() > until) return null;
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  await store.atomic(conversationId, () => wakeConversation(context.runtime, store, conversationId));
  const next = await answeringTurn(store, conversationId, message.sequence);
  if (next && next.status === 'pending') await startOrNudgeTurn(context, next);
  return next?.id ?? null;
}
