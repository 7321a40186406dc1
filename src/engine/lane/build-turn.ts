import { z } from 'zod';
import type { Agent, BudgetLimits, PromptMode } from '../../agents/agent.js';
import { limitsToJson, resolvePromptMode, resolveThinking, schemaToJson } from '../../agents/agent.js';
import { ArgumentError } from '../../errors.js';
import type { Thinking } from '../../models/types.js';
import type { ModelChoice } from '../../models/model-chain.js';
import { modelChain } from '../../models/model-chain.js';
import { TOOL_REPLAY_OPTION } from '../step/turn-options.js';
import { jsonCopy, nowIso } from '../../store/records.js';
import type {
  ConversationRecord,
  Json,
  JsonObject,
  Store,
  ToolExecutionRecord,
  TurnRecord,
} from '../../store/types.js';

export interface BuildTurnOptions {
  /** The turn's id, when the caller allocated it first (to authorize with it). */
  id?: string;
  /** The application's identity; absent → the conversation's stored principal. */
  principal?: Json;
  /** Run context; absent → the conversation's stored context. */
  context?: JsonObject;
  /** The turn's model or fallback chain; absent → the conversation's model, else the agent's chain. */
  model?: ModelChoice;
  promptMode?: PromptMode;
  /** Thinking for this turn; `null` turns it off. Absent → the agent's. */
  thinking?: Thinking | null;
  /** Structured output of this turn (a zod schema or a JSON Schema). Absent → the agent's. */
  outputSchema?: z.ZodType | JsonObject;
  /** `true` forces compaction before the model phase, `false` disables it for this turn. */
  compact?: boolean;
  /** This turn's instructions instead of the agent's (a regenerated run's, decision 47). */
  instructions?: string;
  /** The limits of the tree this turn roots, instead of the agent's (a schedule's caps). */
  limits?: BudgetLimits;
  /** The recorded turn whose tool executions answer this turn's tool calls (decision 48). */
  toolReplay?: { turnId: string };
  /** Joins an existing root tree (shared budget and usage). */
  rootTurnId?: string;
  /** Marks the turn submitted (a background turn that a workflow will run). */
  submit?: boolean;
  /** Where the completion callback goes (spec §5.8). */
  callbackConversationId?: string;
  /**
   * A child turn (a sub-agent, a launched agent): its parent and the execution that created it.
   * It joins the parent's tree, is submitted, and names only what it was given: its agent's
   * thinking and output schema apply as defined when it runs.
   */
  lineage?: { parent: TurnRecord; execution: ToolExecutionRecord };
}

/**
 * Builds a pending turn that snapshots the conversation as it is now (spec §3.1): the
 * trigger message, the agent's limits, and copies of the principal and the run context.
 * The one turn builder: the client's turns, wake-ups, sub-agents and launched agents.
 */
export async function buildTurn(
  store: Store,
  agent: Agent,
  conversationId: string,
  trigger: { id: string; sequence: number },
  options: BuildTurnOptions = {},
  /** The conversation's row, when the caller has just written it. */
  written?: ConversationRecord,
): Promise<TurnRecord> {
  const conversation = written ?? (await store.loadConversation(conversationId));
  const { lineage } = options;
  const thinking =
    options.thinking !== undefined
      ? resolveThinking('turn', options.thinking)
      : lineage
        ? undefined
        : (agent.thinking ?? null);
  const turnOptions: JsonObject = {
    trigger_message_id: trigger.id,
    budget_limits: limitsToJson(options.limits ?? agent.limits),
    // An explicit null is kept: it turns the agent's thinking off for this turn (CORE-08).
    ...(thinking === undefined ? {} : { thinking: jsonCopy(thinking) as Json }),
    context: jsonCopy(
      options.context ?? (conversation.metadata['turnkit_context'] as JsonObject | undefined) ?? {},
    ),
    principal: jsonCopy(options.principal ?? conversation.metadata['principal'] ?? null),
  };
  const schema = outputJsonSchema(options.outputSchema) ?? (lineage ? undefined : agent.outputJsonSchema);
  if (schema) turnOptions['output_schema'] = jsonCopy(schema);
  if (options.instructions !== undefined) {
    if (typeof options.instructions !== 'string') throw new ArgumentError('instructions must be a string');
    turnOptions['instructions'] = options.instructions;
  }
  if (options.compact !== undefined) {
    if (typeof options.compact !== 'boolean') throw new ArgumentError('compact must be true or false');
    turnOptions['compact'] = options.compact;
  }
  // The subject's prompt as it was when the turn was built (BG-04).
  const subjectPrompt = conversation.metadata['turnkit_subject_prompt'];
  if (typeof subjectPrompt === 'string') turnOptions['subject_prompt'] = subjectPrompt;
  if (options.promptMode !== undefined)
    turnOptions['prompt_mode'] = resolvePromptMode('turn', options.promptMode)!;
  if (options.toolReplay) turnOptions[TOOL_REPLAY_OPTION] = { turn_id: options.toolReplay.turnId };
  if (options.callbackConversationId)
    turnOptions['callback_conversation_id'] = options.callbackConversationId;
  // The chain's first model is the turn's `model`; the rest ride with its options (decision 42).
  const models =
    options.model !== undefined
      ? modelChain(options.model, 'model')
      : conversation.model
        ? [conversation.model]
        : agent.models;
  if (models && models.length > 1) turnOptions['fallback_models'] = [...models.slice(1)];
  return store.createTurn({
    ...(options.id ? { id: options.id } : {}),
    conversationId,
    agentName: agent.name,
    contextMessageSequence: trigger.sequence,
    ...(lineage
      ? {
          parentTurnId: lineage.parent.id,
          parentToolExecutionId: lineage.execution.id,
          rootTurnId: lineage.parent.rootTurnId,
        }
      : options.rootTurnId
        ? { rootTurnId: options.rootTurnId }
        : {}),
    model: models?.[0] ?? null,
    options: turnOptions,
    submittedAt: options.submit || lineage ? nowIso() : null,
  });
}

/** The JSON Schema of a per-turn output schema: a zod schema is converted, an object is taken as is. */
function outputJsonSchema(schema: z.ZodType | JsonObject | undefined): JsonObject | undefined {
  if (schema === undefined) return undefined;
  if (schema instanceof z.ZodType) return schemaToJson(schema);
  if (schema && typeof schema === 'object' && !Array.isArray(schema)) return schema;
  throw new ArgumentError('outputSchema must be a zod schema or a JSON Schema object');
}
