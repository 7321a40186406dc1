/**
 * A post's row in the store (decision 41): a delivery addressed to the conversation, with an
 * id and a key derived from the conversation and the request id, so that the store holds a
 * post's idempotency (primary key, unique key) and any process finds it without a scan. Its
 * payload is the receipt as it was decided; what the receipt learns later (the answering
 * turn, a steered message) is read from the conversation, never written back.
 */
import { createHash } from 'node:crypto';
import { RecordNotFound } from '../../errors.js';
import type { PostDisposition, PostReceipt, PostRequest } from '../../contract/post-request.js';
import type {
  DeliveryRecord,
  Json,
  JsonObject,
  MessageRecord,
  Store,
  TurnRecord,
  TurnStatus,
} from '../../store/types.js';

/** The delivery id of a post: the same conversation and request id, the same row. */
function postDeliveryId(conversationId: string, requestId: string): string {
  const digest = createHash('sha256').update(`${conversationId}\n${requestId}`).digest('hex');
  return `delivery_post${digest.slice(0, 40)}`;
}

/** The post recorded under this request id, or null. */
export async function findPost(
  store: Store,
  conversationId: string,
  requestId: string,
): Promise<DeliveryRecord | null> {
  try {
    return await store.loadDelivery(postDeliveryId(conversationId, requestId));
  } catch (error) {
    if (error instanceof RecordNotFound) return null;
    throw error;
  }
}

export interface PostWrite {
  request: PostRequest;
  disposition: PostDisposition;
  /** The message as posted (absent for a steered post: the running turn writes it). */
  message?: MessageRecord;
  /** The turn that answers, when the post decided it (started, steered). */
  turnId?: string;
  /** A steered post: its Update id (the message's `steer_id`) and where the conversation stood. */
  steer?: { id: string; afterSequence: number };
  /** An interrupting post: the turns it cancelled. */
  cancelled?: string[];
}

/** Appends a post's message (one user message: text, then media), as a delivered message. */
export async function appendPostMessage(
  store: Store,
  conversationId: string,
  request: PostRequest,
): Promise<MessageRecord> {
  return store.appendMessage({
    conversationId,
    role: 'user',
    content: [{ type: 'text', text: request.text }, ...(request.media as MessageRecord['content'])],
    // `delivery_id` makes it a delivered message: the lane's wake answers it (queued posts).
    metadata: {
      delivery_id: postDeliveryId(conversationId, request.requestId),
      request_id: request.requestId,
      posted_by: request.principal,
    },
  });
}

/** Records the post (call under the conversation's lock, after `findPost` found none). */
export async function recordPost(
  store: Store,
  conversationId: string,
  write: PostWrite,
): Promise<DeliveryRecord> {
  const { request } = write;
  const payload: JsonObject = {
    text: request.text,
    request_id: request.requestId,
    disposition: write.disposition,
    principal: request.principal,
    ...(request.policy ? { policy: request.policy } : {}),
    ...(write.turnId ? { turn_id: write.turnId } : {}),
    ...(write.steer ? { steer_id: write.steer.id, after_sequence: write.steer.afterSequence } : {}),
    ...(write.cancelled ? { cancelled: write.cancelled } : {}),
  };
  const delivery = await store.createDelivery({
    id: postDeliveryId(conversationId, request.requestId),
    destinationConversationId: conversationId,
    key: `post:${conversationId}:${request.requestId}`,
    payload,
  });
  // Delivered at once: the message is in the conversation (or, steered, is the turn's to write).
  return store.updateDelivery(delivery.id, {
    messageId: write.message?.id ?? null,
    deliveredAt: write.message?.createdAt ?? delivery.createdAt,
  });
}

/**
 * The first submitted turn whose snapshot holds the message: the one that answers a queued or
 * interrupting post (the lane builds it once the conversation is free). One row, found in SQL.
 */
export async function answeringTurn(
  store: Store,
  conversationId: string,
  sequence: number,
): Promise<TurnRecord | null> {
  const [turn] = await store.listTurns({
    conversationId,
    parentTurnId: null,
    submitted: true,
    seesSequence: sequence,
    limit: 1,
  });
  return turn ?? null;
}

/** What `inputStatus` answers: the receipt as it stands now, and where its turn is. */
export interface InputStatus extends PostReceipt {
  /** The answering turn's status, once there is one. */
  turnStatus: TurnStatus | null;
  postedAt: string;
}

/**
 * The message a steered post's turn wrote (`steer_id`): among that turn's text messages after
 * the post, so the read is the turn's, not the conversation's.
 */
export async function steerMessage(store: Store, delivery: DeliveryRecord): Promise<MessageRecord | null> {
  const { payload } = delivery;
  if (typeof payload['steer_id'] !== 'string' || typeof payload['turn_id'] !== 'string') return null;
  const written = await store.listMessages(delivery.destinationConversationId, {
    turnId: payload['turn_id'],
    afterSequence: typeof payload['after_sequence'] === 'number' ? payload['after_sequence'] : 0,
    kind: 'text',
  });
  return written.find((message) => message.metadata['steer_id'] === payload['steer_id']) ?? null;
}

/**
 * The receipt of a recorded post, with what the conversation has learned since. A steered
 * post whose row points at a message of its own was refused by the turn and queued instead.
 */
export async function receiptOf(store: Store, delivery: DeliveryRecord): Promise<InputStatus> {
  const payload = delivery.payload;
  const str = (value: Json | undefined) => (typeof value === 'string' ? value : null);
  const steered = str(payload['steer_id']) !== null;
  const queuedInstead = steered && delivery.messageId !== null;
  let messageId = delivery.messageId;
  let turnId = queuedInstead ? null : str(payload['turn_id']);
  if (steered && messageId === null) messageId = (await steerMessage(store, delivery))?.id ?? null;
  if (turnId === null && messageId !== null) {
    const message = await store.loadMessage(messageId);
    turnId = (await answeringTurn(store, delivery.destinationConversationId, message.sequence))?.id ?? null;
  }
  return {
    requestId: String(payload['request_id']),
    messageId,
    turnId,
    disposition: queuedInstead ? 'queued' : (payload['disposition'] as PostDisposition),
    turnStatus: turnId === null ? null : (await store.loadTurn(turnId)).status,
    postedAt: delivery.createdAt,
  };
}

/** The receipt alone (what `post` returns). */
export function receiptOnly(status: InputStatus): PostReceipt {
  return {
    requestId: status.requestId,
    messageId: status.messageId,
    turnId: status.turnId,
    disposition: status.disposition,
  };
}
