/**
 * Backend-neutral store policy built only on Store primitives (spec §5.8, §5.10, §8 "default
 * impl provided"). Every backend may call these; a backend with a cheaper indexed query may
 * override the listing parts but must keep the same answers.
 */
import { RecordNotFound } from '../errors.js';
import { canonicalJson, nowIso } from './records.js';
import { rootConversationId } from './tree.js';
import type { DeliveryRecord, MessageRecord, Store, TurnRecord } from './types.js';

/** `maintenance_batch_size`: how many rows one maintenance pass looks at by default. */
const DEFAULT_MAINTENANCE_LIMIT = 100;

/**
 * Marks old unsubmitted pending/running turns `stale` (spec §5.10): a bounded listing, then
 * each candidate rechecked under its root conversation's lock, because its worker may have
 * heartbeated or finished since it was listed.
 */
export async function reconcileStaleTurns(
  store: Store,
  options: { before: string; limit?: number },
): Promise<TurnRecord[]> {
  const candidates = await store.listStaleInlineTurns({
    before: options.before,
    limit: options.limit ?? DEFAULT_MAINTENANCE_LIMIT,
  });
  const stale: TurnRecord[] = [];
  for (const candidate of candidates) {
    const root = await rootConversationId(store, candidate);
    const row = await store.atomic(root, async () => {
      const fresh = await store.loadTurn(candidate.id);
      const anchor = fresh.heartbeatAt ?? fresh.startedAt ?? fresh.createdAt;
      if (fresh.submittedAt !== null || !(anchor < options.before)) return null;
      return store.claimTurn(fresh.id, {
        from: ['pending', 'running'],
        to: 'stale',
        claimToken: null,
        completedAt: nowIso(),
      });
    });
    if (row) stale.push(row);
  }
  return stale;
}

export interface DeliveryOutcome {
  delivery: DeliveryRecord;
  /** The destination message (also when an earlier call delivered it). */
  message: MessageRecord | null;
  /** Whether this call appended the message. */
  delivered: boolean;
}

/**
 * Delivers a durable message exactly once (spec §5.8): under the destination's lock, append
 * one user text message (no turn id) and record it on the delivery. `onDelivered` runs in the
 * same transaction (the engine's wake-up), so a failure anywhere rolls all of it back.
 */
export async function deliver(
  store: Store,
  deliveryId: string,
  options: { onDelivered?: (outcome: DeliveryOutcome) => Promise<void> } = {},
): Promise<DeliveryOutcome> {
  const initial = await store.loadDelivery(deliveryId);
  return store.atomic(initial.destinationConversationId, async () => {
    const delivery = await store.loadDelivery(deliveryId);
    // Rechecked under the lock: a concurrent deliver of the same row may have won.
    if (delivery.messageId !== null || delivery.deliveredAt !== null) {
      return { delivery, message: await loadMessageOrNull(store, delivery.messageId), delivered: false };
    }
    const text =
      typeof delivery.payload['text'] === 'string'
        ? delivery.payload['text']
        : canonicalJson(delivery.payload);
    const message = await store.appendMessage({
      conversationId: delivery.destinationConversationId,
      role: 'user',
      kind: 'text',
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
    const outcome = { delivery: updated, message, delivered: true };
    await options.onDelivered?.(outcome);
    return outcome;
  });
}

async function loadMessageOrNull(store: Store, id: string | null): Promise<MessageRecord | null> {
  if (id === null) return null;
  try {
    return await store.loadMessage(id);
  } catch (error) {
    if (error instanceof RecordNotFound) return null;
    throw error;
  }
}
