import { ArgumentError } from '../../errors.js';
import type { DeliveryRecord, Json, Store } from '../../store/types.js';
import type { Runtime } from '../runtime.js';

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
