/**
 * The rows that give a conversation its next turn from outside the engine: a new conversation
 * (a run's), the user message that triggers the turn, and the turn. The client's `run`,
 * `prepare` and `ask` write through here, and so does a schedule's firing, so every turn a
 * caller starts is built the same way (by `buildTurn`).
 */
import type { Agent } from '../../agents/agent.js';
import type { ContentPart, Json, JsonObject, NewConversation, Store, TurnRecord } from '../../store/types.js';
import type { BuildTurnOptions } from './build-turn.js';
import { buildTurn } from './build-turn.js';

/** A run's task message: the task, and its structured input when there is one. */
export function taskText(task: string, input: Json | undefined): string {
  if (input === undefined) return `Task:\n${task}`;
  return `Task:\n${task}\n\nInput:\n${JSON.stringify(input, null, 2)}`;
}

export interface TurnRows {
  conversationId: string;
  /** Created first, for a run; absent, the message goes into the existing conversation. */
  conversation?: NewConversation;
  content: ContentPart[];
  metadata?: JsonObject;
  turn: BuildTurnOptions;
}

/** Writes the rows; call it under the conversation's lock (`store.atomic(conversationId, …)`). */
export async function writeTurnRows(store: Store, agent: Agent, rows: TurnRows): Promise<TurnRecord> {
  const conversation = rows.conversation
    ? await store.createConversation({ ...rows.conversation, id: rows.conversationId })
    : undefined;
  const message = await store.appendMessage({
    conversationId: rows.conversationId,
    role: 'user',
    content: rows.content,
    ...(rows.metadata ? { metadata: rows.metadata } : {}),
  });
  return buildTurn(
    store,
    agent,
    rows.conversationId,
    { id: message.id, sequence: message.sequence },
    rows.turn,
    conversation,
  );
}
