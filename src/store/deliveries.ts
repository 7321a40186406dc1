import type { DeliveryRecord, MessageRecord, Store } from './types.js';

/**
 * Delivers a durable message exactly once (spec §5.8): under the destination's lock, append
 * one user message and record it on the delivery. A second delivery finds it done.
 */
export async function deliver(
  store: Store,
  deliveryId: string,
): Promise<{ delivery: DeliveryRecord; message: MessageRecord | null; delivered: boolean }> {
  const initial = await store.loadDelivery(deliveryId);
  return store.atomic(initial.destinationConversationId, async () => {
    const delivery = await store.loadDelivery(deliveryId);
    if (delivery.messageId) return { delivery, message: null, delivered: false };
    const text =
      typeof delivery.payload['text'] === 'string'
        ? delivery.payload['text']
        : JSON.stringify(delivery.payload);
    const message = await store.appendMessage({
      conversationId: delivery.destinationConversationId,
      role: 'user',
      content: text,
      metadata: {
        delivery_id: delivery.id,
        source_conversation_id: delivery.sourceConversationId,
        source_turn_id: delivery.sourceTurnId,
      },
    });
    const updated = await store.updateDelivery(delivery.id, {
      messageId: message.id,
      deliveredAt: message.createdAt,
    });
    return { delivery: updated, message, delivered: true };
  });
}
