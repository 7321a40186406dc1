/**
 * Fork and regenerate (decision 47). A fork is a new conversation whose history is a copy of
 * another's up to and including one message; the original is never written. A regenerated
 * run is a fork just before a run's input, with that input given again to a new turn (with
 * another model, other instructions or other per-turn options).
 */
import type { ModelChoice } from '../models/model-chain.js';
import type { Thinking } from '../models/types.js';
import type { PromptMode } from '../agents/agent.js';
import type { Runtime } from '../engine/runtime.js';
import type { BuildTurnOptions } from '../engine/lane/build-turn.js';
import { buildTurn } from '../engine/lane/build-turn.js';
import { ArgumentError, ForkError } from '../errors.js';
import { forkedMessage, jsonCopy } from '../store/records.js';
import type {
  ConversationRecord,
  Json,
  JsonObject,
  MessageRecord,
  Store,
  TurnRecord,
} from '../store/types.js';
import { TERMINAL_TURN_STATUSES } from '../store/types.js';
import type { z } from 'zod';

export interface ForkOptions {
  /**
   * The id of the last message the fork carries (it must be the conversation's); `null` makes
   * a fork with an empty history.
   */
  at: string | null;
  /**
   * Who forks: authorized as `fork` (with the source's principal in the request as
   * `conversation_principal`), and the fork's principal. Absent: the policy sees `null`, and
   * the fork keeps the source's principal.
   */
  principal?: Json;
}

export interface RegenerateOptions {
  /** Another model (or fallback chain); absent: the run's own. */
  model?: ModelChoice;
  /** Other instructions, instead of the agent's, for this run only. */
  instructions?: string;
  /** Thinking for the new run; `null` turns it off. Absent: the run's own. */
  thinking?: Thinking | null;
  /** Structured output for the new run. Absent: the run's own. */
  outputSchema?: z.ZodType | JsonObject;
  promptMode?: PromptMode;
  compact?: boolean;
  /** Run context; absent: the run's own. */
  context?: JsonObject;
  /**
   * Who regenerates: authorized as `fork` of the run's conversation (absent: `null`); the new
   * run's principal (absent: the run's own).
   */
  principal?: Json;
  /** `false` only prepares the new run (it stays pending until `start()`). */
  start?: boolean;
}

const finished = (turn: TurnRecord) => TERMINAL_TURN_STATUSES.includes(turn.status);

/** The message a fork ends at: it must exist and be the conversation's. */
async function forkPoint(store: Store, conversationId: string, at: unknown): Promise<MessageRecord> {
  if (typeof at !== 'string' || at === '')
    throw new ArgumentError('fork needs `at`: a message id of the conversation (null: an empty history)');
  const message = await store.loadMessage(at);
  if (message.conversationId !== conversationId)
    throw new ForkError(`message ${at} is not a message of conversation ${conversationId}`, {
      code: 'foreign_message',
      details: { conversationId, messageId: at },
    });
  return message;
}

/**
 * A call made at or before the message, in its turn, whose result comes after it: the fork
 * would carry a call without its result, which no provider accepts.
 */
async function refuseInsideToolRound(store: Store, at: MessageRecord): Promise<void> {
  const round = at.turnId
    ? (await store.listMessages(at.conversationId, { turnId: at.turnId })).filter(
        (message) => message.sequence <= at.sequence,
      )
    : [at];
  const calls: string[] = [];
  const results = new Set<string>();
  for (const message of round)
    for (const part of message.content) {
      if (part.type === 'tool_call') calls.push(part.id);
      if (part.type === 'tool_result') results.add(part.tool_call_id);
    }
  const open = calls.filter((id) => !results.has(id));
  if (open.length > 0)
    throw new ForkError(
      `message ${at.id} is inside a tool round: call${open.length === 1 ? '' : 's'} ${open.join(', ')} ` +
        'would have no result in the fork; fork at the last result of the round, or before its call',
      { code: 'tool_round', details: { messageId: at.id, toolCallIds: open } },
    );
}

/**
 * A turn still working (waiting, running, paused, or submitted and pending) that wrote the
 * message, or that answers it when no finished turn has: the fork would take half an answer.
 */
async function refuseUnfinished(store: Store, at: MessageRecord): Promise<void> {
  const turns = await store.listTurns({ conversationId: at.conversationId });
  const working = turns.filter(
    (turn) => !finished(turn) && !(turn.status === 'pending' && turn.submittedAt === null),
  );
  if (working.length === 0) return;
  const own = at.turnId ? turns.find((turn) => turn.id === at.turnId) : undefined;
  const answered =
    (own !== undefined && finished(own)) ||
    turns.some((turn) => finished(turn) && turn.contextMessageSequence >= at.sequence);
  const busy =
    own !== undefined && !finished(own)
      ? own
      : answered
        ? undefined
        : working.find((turn) => turn.contextMessageSequence >= at.sequence);
  if (busy)
    throw new ForkError(
      `turn ${busy.id} (${busy.status}) has not finished answering message ${at.id}; fork once it ends, or at an earlier message`,
      { code: 'unfinished_turn', details: { messageId: at.id, turnId: busy.id } },
    );
}

/**
 * Writes the fork (authorized first, checked under the source's lock) and returns its row, or
 * what `extend` writes on the fork in the same transaction (a regenerated turn).
 */
export async function forkConversation(
  runtime: Runtime,
  conversationId: string,
  options: ForkOptions,
): Promise<ConversationRecord>;
export async function forkConversation<T>(
  runtime: Runtime,
  conversationId: string,
  options: ForkOptions,
  extend: (fork: ConversationRecord) => Promise<T>,
): Promise<T>;
export async function forkConversation<T>(
  runtime: Runtime,
  conversationId: string,
  options: ForkOptions,
  extend?: (fork: ConversationRecord) => Promise<T>,
): Promise<ConversationRecord | T> {
  const { store } = runtime;
  if (!options || typeof options !== 'object' || !('at' in options))
    throw new ArgumentError('fork needs `at`: a message id of the conversation (null: an empty history)');
  const source = await store.loadConversation(conversationId);
  const at = options.at === null ? null : await forkPoint(store, source.id, options.at);
  const principal = options.principal === undefined ? null : jsonCopy(options.principal);
  await runtime.authorize('fork', principal, {
    conversation: source.id,
    message: at?.id ?? null,
    conversation_principal: source.metadata['principal'] ?? null,
  });
  return store.atomic(source.id, async () => {
    if (at) {
      await refuseInsideToolRound(store, at);
      await refuseUnfinished(store, at);
    }
    const metadata: JsonObject = jsonCopy(source.metadata);
    if (options.principal !== undefined) metadata['principal'] = principal;
    const fork = await store.createConversation({
      agentName: source.agentName,
      model: source.model,
      subject: source.subject,
      metadata,
      forkedFromConversationId: source.id,
      forkedFromMessageId: at?.id ?? null,
    });
    if (at) await store.copyMessages({ from: source.id, to: fork.id, throughSequence: at.sequence });
    return extend ? extend(fork) : fork;
  });
}

/** The message right before `sequence` in the conversation, if any. */
async function messageBefore(store: Store, conversationId: string, sequence: number) {
  if (sequence <= 1) return null;
  const near = await store.listMessages(conversationId, {
    afterSequence: sequence - 2,
    beforeSequence: sequence,
  });
  return (
    near.at(-1) ?? (await store.listMessages(conversationId, { beforeSequence: sequence })).at(-1) ?? null
  );
}

/** What a regenerated turn keeps of the run's own options, with the caller's on top. */
function regeneratedTurnOptions(turn: TurnRecord, options: RegenerateOptions): BuildTurnOptions {
  const own = turn.options;
  const fallbacks = Array.isArray(own['fallback_models']) ? (own['fallback_models'] as string[]) : [];
  const model = options.model ?? (turn.model ? [turn.model, ...fallbacks] : undefined);
  const promptMode = options.promptMode ?? (own['prompt_mode'] as PromptMode | undefined);
  const instructions =
    options.instructions ?? (typeof own['instructions'] === 'string' ? own['instructions'] : undefined);
  const outputSchema = options.outputSchema ?? (own['output_schema'] as JsonObject | undefined);
  const compact = options.compact ?? (typeof own['compact'] === 'boolean' ? own['compact'] : undefined);
  const thinking =
    options.thinking !== undefined
      ? options.thinking
      : 'thinking' in own
        ? (own['thinking'] as unknown as Thinking | null)
        : undefined;
  return {
    principal: options.principal !== undefined ? options.principal : (own['principal'] ?? null),
    context: options.context ?? (own['context'] as JsonObject | undefined) ?? {},
    ...(model !== undefined ? { model } : {}),
    ...(promptMode ? { promptMode } : {}),
    ...(instructions !== undefined ? { instructions } : {}),
    ...(outputSchema !== undefined ? { outputSchema } : {}),
    ...(compact !== undefined ? { compact } : {}),
    ...(thinking !== undefined ? { thinking } : {}),
    submit: options.start !== false,
  };
}

/**
 * Forks the run's conversation just before its input (its trigger message) and writes a new
 * turn that answers the same input on the fork. Returns the new turn, not yet started.
 */
export async function regenerateTurn(
  runtime: Runtime,
  turnId: string,
  options: RegenerateOptions = {},
): Promise<TurnRecord> {
  const { store } = runtime;
  if (options === null || typeof options !== 'object')
    throw new ArgumentError('regenerate options must be an object');
  const turn = await store.loadTurn(turnId);
  const agent = runtime.agents.resolve(turn.agentName);
  const triggerId = turn.options['trigger_message_id'];
  const input = typeof triggerId === 'string' ? await store.loadMessage(triggerId).catch(() => null) : null;
  if (!input || input.conversationId !== turn.conversationId)
    throw new ForkError(`turn ${turn.id} has no input message in its conversation to give again`, {
      code: 'no_input',
      details: { turnId: turn.id },
    });
  const before = await messageBefore(store, turn.conversationId, input.sequence);
  const turnOptions = regeneratedTurnOptions(turn, options);
  const at = {
    at: before?.id ?? null,
    ...(options.principal !== undefined ? { principal: options.principal } : {}),
  };
  // One transaction: a turn that cannot be built (a bad option) leaves no fork behind.
  return forkConversation(runtime, turn.conversationId, at, async (fork) => {
    const copy = forkedMessage(input, fork.id);
    const message = await store.appendMessage({
      conversationId: fork.id,
      role: copy.role,
      kind: copy.kind,
      content: copy.content,
      metadata: { ...copy.metadata, regenerated_from_turn_id: turn.id },
    });
    return buildTurn(store, agent, fork.id, { id: message.id, sequence: message.sequence }, turnOptions);
  });
}
