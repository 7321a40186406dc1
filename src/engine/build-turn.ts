import type { Agent } from '../agents/agent.js';
import { limitsToJson } from '../agents/agent.js';
import { jsonCopy, nowIso } from '../store/records.js';
import type { Json, JsonObject, Store, TurnRecord } from '../store/types.js';

export interface BuildTurnOptions {
  /** The turn's id, when the caller allocated it first (to authorize with it). */
  id?: string;
  /** The application's identity; absent → the conversation's stored principal. */
  principal?: Json;
  /** Run context; absent → the conversation's stored context. */
  context?: JsonObject;
  model?: string;
  promptMode?: string;
  /** Marks the turn submitted (a background turn that a workflow will run). */
  submit?: boolean;
  /** Where the completion callback goes (spec §5.8). */
  callbackConversationId?: string;
}

/**
 * Builds a pending turn that snapshots the conversation as it is now (spec §3.1): the
 * trigger message, the agent's limits, and copies of the principal and the run context.
 * Used by the client, by wake-ups and by launched agents, so every turn is built alike.
 */
export async function buildTurn(
  store: Store,
  agent: Agent,
  conversationId: string,
  trigger: { id: string; sequence: number },
  options: BuildTurnOptions = {},
): Promise<TurnRecord> {
  const conversation = await store.loadConversation(conversationId);
  const turnOptions: JsonObject = {
    trigger_message_id: trigger.id,
    budget_limits: limitsToJson(agent.limits),
    context: jsonCopy(
      options.context ?? (conversation.metadata['turnkit_context'] as JsonObject | undefined) ?? {},
    ),
    principal: jsonCopy(options.principal ?? conversation.metadata['principal'] ?? null),
  };
  if (options.promptMode) turnOptions['prompt_mode'] = options.promptMode;
  if (options.callbackConversationId)
    turnOptions['callback_conversation_id'] = options.callbackConversationId;
  return store.createTurn({
    ...(options.id ? { id: options.id } : {}),
    conversationId,
    agentName: agent.name,
    contextMessageSequence: trigger.sequence,
    model: options.model ?? conversation.model ?? agent.model ?? null,
    options: turnOptions,
    submittedAt: options.submit ? nowIso() : null,
  });
}

/** What a turn is about: the text of its trigger (the last message it sees), else its id. */
export async function taskOf(store: Store, turn: TurnRecord): Promise<string> {
  const trigger = (
    await store.listMessages(turn.conversationId, { throughSequence: turn.contextMessageSequence })
  ).at(-1);
  const text = trigger?.content.find((part) => part.type === 'text');
  return text && text.type === 'text' ? text.text : turn.id;
}
