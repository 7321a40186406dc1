/**
 * Compaction (spec §3.6): a long history is summarized by its own model call into a
 * `context_summary` message; stored messages are never deleted, the projection hides what a
 * summary replaces. Automatic compaction runs in its own activity (`compactStep`) at the
 * start of a model phase; manual compaction (`conversation.compact()`) in the caller.
 */
import { alongChain } from '../../models/fallback.js';
import type { ModelChoice } from '../../models/model-chain.js';
import { modelChain } from '../../models/model-chain.js';
import type { Agent } from '../../agents/agent.js';
import type { CompactionPolicy } from '../../agents/compaction-policy.js';
import { CompactionError } from '../../errors.js';
import type { ModelClient, ModelMessage, ModelRequest, ModelUsage } from '../../models/types.js';
import { nowIso } from '../../store/records.js';
import type { JsonObject, MessageRecord, Store, TurnRecord } from '../../store/types.js';
import { historyForTurn, projectMessages } from './model-request.js';
import type { Runtime } from '../runtime.js';
import type { CompactionMetadata } from './summaries.js';
import { activeHistory, summaryMeta } from './summaries.js';
import { turnState } from '../step/turn-state.js';

/** TurnKit's estimate: `ceil(chars / 4) + 8` tokens per projected message. */
export function estimateTokens(messages: readonly ModelMessage[]): number {
  return messages.reduce((sum, message) => {
    const calls = message.role === 'assistant' && message.toolCalls ? JSON.stringify(message.toolCalls) : '';
    return sum + Math.ceil((message.content.length + calls.length) / 4) + 8;
  }, 0);
}

const tokensOf = (message: MessageRecord) => estimateTokens(projectMessages([message]));

export interface CompactionSelection {
  /** Messages to summarize (no summary among them). */
  middle: MessageRecord[];
  /** The latest summary in the middle, merged into the new one. */
  previous: MessageRecord | null;
  from: number;
  through: number;
  tailStart: number | null;
}

/**
 * Head, middle and tail (spec §3.6): the first `headMessages` stay, a tail of at most
 * `tailMessages` messages and `tailTokens` tokens (at least one) stays, the rest is
 * summarized; a tail never starts with a tool result whose call would be summarized.
 */
export function selectForCompaction(
  history: readonly MessageRecord[],
  policy: CompactionPolicy,
): CompactionSelection | null {
  const head = Math.min(policy.headMessages, history.length);
  let tailStart = history.length;
  let tokens = 0;
  while (tailStart > head) {
    const next = history[tailStart - 1]!;
    const cost = tokensOf(next);
    const count = history.length - tailStart;
    if (count >= 1 && (count >= policy.tailMessages || tokens + cost > policy.tailTokens)) break;
    tokens += cost;
    tailStart -= 1;
  }
  while (tailStart > head && history[tailStart]?.kind === 'tool_result') tailStart -= 1;
  const window = history.slice(head, tailStart);
  const previous = [...window].reverse().find((m) => m.kind === 'context_summary') ?? null;
  const middle = window.filter((m) => m.kind !== 'context_summary');
  if (middle.length === 0) return null;
  const previousFrom = previous ? summaryMeta(previous)!.replaces_from_sequence : Infinity;
  return {
    middle,
    previous,
    from: Math.min(previousFrom, middle[0]!.sequence),
    through: middle.at(-1)!.sequence,
    tailStart: history[tailStart]?.sequence ?? null,
  };
}

function transcriptLine(message: MessageRecord, policy: CompactionPolicy): string {
  const parts = message.content.map((part) => {
    switch (part.type) {
      case 'text':
      case 'thinking':
        return part.text;
      case 'tool_call':
        return `[called ${part.name} ${JSON.stringify(part.arguments)}]`;
      case 'tool_result':
        return part.text.length > policy.toolOutputMaxChars
          ? `${part.text.slice(0, policy.toolOutputMaxChars)}… [truncated]`
          : part.text;
      case 'image':
        return `[image ${part.mime_type}]`;
      case 'media_analysis':
        return `[media analysis] ${part.text}`;
      default:
        return '';
    }
  });
  return `${message.role} (${message.kind}, #${message.sequence}): ${parts.filter(Boolean).join('\n')}`;
}

/** The summarizer's request: no tools, a structured markdown template, the target length. */
export function summaryRequest(
  selection: CompactionSelection,
  policy: CompactionPolicy,
  options: { model: string; focus: string | null; metadata: ModelRequest['metadata'] },
): { request: ModelRequest; inputTokens: number } {
  const inputTokens = selection.middle.reduce((sum, m) => sum + tokensOf(m), 0);
  const target = Math.min(
    policy.maxSummaryTokens,
    Math.max(policy.minSummaryTokens, Math.ceil(inputTokens * policy.summaryRatio)),
  );
  const previous = selection.previous
    ? `Update the anchored summary below with the newer messages; keep what still matters.\n\n<previous_summary>\n${selection.previous.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n')}\n</previous_summary>\n\n`
    : '';
  const lines = selection.middle.map((m) => transcriptLine(m, policy)).join('\n\n');
  const focus = options.focus ? `\n\nFocus the summary on: ${options.focus}` : '';
  return {
    inputTokens,
    request: {
      model: options.model,
      instructions:
        'You compact a conversation so it can go on without the original messages. Reply in markdown with ' +
        'the sections "## Goal", "## Progress", "## Decisions", "## Open items" and "## Key facts". Keep names, ' +
        `ids, numbers and paths exact. Write about ${target} tokens at most.`,
      dynamicInstructions: '',
      messages: [{ role: 'user', content: `${previous}<messages>\n${lines}\n</messages>${focus}` }],
      tools: [],
      thinking: null,
      outputSchema: null,
      metadata: { ...options.metadata, purpose: 'compaction' },
    },
  };
}

/** Calls the summarizer; an empty summary is a CompactionError. */
export async function summarize(
  client: ModelClient,
  request: ModelRequest,
  options: { signal: AbortSignal; onProgress?: () => void },
): Promise<{ text: string; usage: ModelUsage; model: string }> {
  const result = await client.chat(request, options);
  const text = (result?.parts ?? [])
    .flatMap((part) => (part.type === 'text' ? [part.text] : []))
    .join('\n')
    .trim();
  if (text === '') throw new CompactionError('the summarizer returned an empty summary');
  return { text, usage: result.usage, model: result.model ?? request.model };
}

/** The summary message's metadata. */
export function compactionMetadata(
  selection: CompactionSelection,
  options: {
    auto: boolean;
    focus: string | null;
    model: string;
    inputTokens: number;
    usage: ModelUsage;
    turnId: string | null;
  },
): JsonObject {
  const meta: CompactionMetadata = {
    auto: options.auto,
    focus: options.focus,
    replaces_from_sequence: selection.from,
    replaces_through_sequence: selection.through,
    tail_start_sequence: selection.tailStart,
    summary_model: options.model,
    input_tokens: options.inputTokens,
    summary_tokens: options.usage.outputTokens ?? 0,
    created_for_turn_id: options.turnId,
    created_at: nowIso(),
  };
  return { compaction: meta as unknown as JsonObject };
}

/** Whether the model phase about to run should compact first (spec §3.6 auto trigger). */
export async function compactionDue(
  store: Store,
  agent: Agent,
  turn: TurnRecord,
  /** The turn's history, when the caller has read it already. */
  read?: readonly MessageRecord[],
): Promise<boolean> {
  const policy = agent.compaction;
  const compact = turn.options['compact'];
  if (!policy || compact === false) return false;
  if (compact === true && turnState(turn).compaction_forced) return false;
  const history = read ?? (await historyForTurn(store, turn));
  // Nothing to summarize (a single huge message, say): no activity for nothing.
  if (!selectForCompaction(history, policy)) return false;
  if (compact === true) return true;
  const limit = policy.threshold * Math.max(policy.contextLimit - policy.reservedTokens, 1);
  return estimateTokens(projectMessages(history)) >= limit;
}

export interface ManualCompactionOptions {
  /** A topic the summary should keep in focus. */
  focus?: string;
  /** Summary model or chain; absent → policy model, conversation model, agent chain, default. */
  model?: ModelChoice;
  /** Summary client; absent → policy client, agent client, the runtime's. */
  client?: ModelClient;
  signal?: AbortSignal;
}

/**
 * `conversation.compact()` (spec §3.6): summarizes the conversation's history now, outside
 * any turn. Nothing to summarize, a disabled policy, an empty summary or any failure of the
 * summarizer is a CompactionError. Returns the summary message.
 */
export async function compactConversation(
  runtime: Runtime,
  agent: Agent,
  conversationId: string,
  options: ManualCompactionOptions = {},
): Promise<MessageRecord> {
  const store = runtime.store;
  const policy = agent.compaction;
  if (!policy) throw new CompactionError(`compaction is disabled for agent ${agent.name}`);
  if (options.focus !== undefined && typeof options.focus !== 'string')
    throw new CompactionError('focus must be a string');
  const conversation = await store.loadConversation(conversationId);
  const selection = selectForCompaction(activeHistory(await store.listMessages(conversationId)), policy);
  if (!selection) throw new CompactionError('not enough messages to compact');
  const chain = modelChain(
    options.model ?? policy.model ?? conversation.model ?? agent.models ?? runtime.defaultModels,
    'compaction model',
  );
  const model = chain[0]!;
  const focus = options.focus ?? null;
  const { request, inputTokens } = summaryRequest(selection, policy, {
    model,
    focus,
    metadata: { turnId: '', conversationId, agentName: agent.name },
  });
  let summary: Awaited<ReturnType<typeof summarize>>;
  try {
    summary = await summarize(
      alongChain(options.client ?? policy.client ?? runtime.modelClientFor(agent), chain),
      request,
      {
        signal: options.signal ?? new AbortController().signal,
      },
    );
  } catch (error) {
    if (error instanceof CompactionError) throw error;
    throw new CompactionError(
      `compaction failed: ${error instanceof Error ? error.message : String(error)}`,
      {
        cause: error,
      },
    );
  }
  return store.atomic(conversationId, () =>
    store.appendMessage({
      conversationId,
      role: 'assistant',
      kind: 'context_summary',
      content: summary.text,
      metadata: compactionMetadata(selection, {
        auto: false,
        focus,
        model: summary.model,
        inputTokens,
        usage: summary.usage,
        turnId: null,
      }),
    }),
  );
}
