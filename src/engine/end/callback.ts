/**
 * The completion callback of a submitted turn (spec §5.8): the policy asked before the
 * terminal write, the delivery written inside it, its events after the commit.
 */
import { AuthorizationError, RecordNotFound, StoreError, storedErrorClass } from '../../errors.js';
import { canonicalJson, nowIso } from '../../store/records.js';
import type { DeliveryRecord, JsonObject, Store, TurnRecord } from '../../store/types.js';
import type { Runtime } from '../runtime.js';
import type { TurnEvent } from '../step/events.js';
import { turnEvent } from '../step/events.js';
import { principalOf } from '../step/turn-state.js';
import { subAgentResult } from '../step/sub-agents.js';

/** The policy's word on a turn's completion callback, and what it decided on. */
export interface CallbackVerdict {
  /** `callback_conversation_id` of a submitted turn; null: the turn has no callback. */
  destination: string | null;
  /** The principal's canonical JSON. */
  principal: string;
  denied: JsonObject | null;
}

/** Where a submitted turn's completion callback goes, if it has one. */
export function callbackDestination(turn: TurnRecord): string | null {
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

/** The events of a committed callback: its delivery, or the policy's denial. */
export function callbackEvents(callback: {
  delivery: DeliveryRecord | null;
  denied: JsonObject | null;
}): TurnEvent[] {
  const events: TurnEvent[] = [];
  if (callback.delivery) {
    events.push(
      turnEvent('callback.created', {
        delivery_id: callback.delivery.id,
        destination_conversation_id: callback.delivery.destinationConversationId,
      }),
    );
  }
  if (callback.denied) events.push(turnEvent('callback.denied', callback.denied));
  return events;
}

export async function emitCallback(
  runtime: Runtime,
  turn: TurnRecord,
  callback: { delivery: DeliveryRecord | null; denied: JsonObject | null },
): Promise<void> {
  await runtime.publish(turn, callbackEvents(callback));
}
