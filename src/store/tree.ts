import type { Store, TurnRecord } from './types.js';

/** The conversation of the turn's root turn: the lock every write of the tree serializes on. */
export async function rootConversationId(store: Store, turn: TurnRecord): Promise<string> {
  if (turn.rootTurnId === turn.id) return turn.conversationId;
  return (await store.loadTurn(turn.rootTurnId)).conversationId;
}
