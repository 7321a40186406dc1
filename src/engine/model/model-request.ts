import { createHash } from 'node:crypto';
import type { Agent, PromptMode } from '../../agents/agent.js';
import { offeredTools } from '../../agents/agent.js';
import { copyForCallback } from '../../agents/prompt.js';
import type { ToolDefinition } from '../../agents/tool.js';
import { ArgumentError } from '../../errors.js';
import { modelMediaOf } from '../../models/media.js';
import type { ModelMessage, ModelRequest, ModelToolSpec } from '../../models/types.js';
import type { ConversationRecord, MessageRecord, Store, TurnRecord } from '../../store/types.js';
import { loadedSkillsOf } from './skills.js';
import { activeHistory, hiddenRanges, projectSummary } from './summaries.js';
import { atCallBoundaries } from './call-boundaries.js';
import { promptDataBlock, renderSystemPrompt, untrustedBlock } from './system-prompt.js';
import type { Runtime } from '../runtime.js';
import { contextOf, iterationsOf } from '../step/turn-state.js';
import { EARLIER_TURNS_THROUGH } from '../../store/tree.js';

/** Snapshots up to this many messages are read in one query, summaries or not... */
export const SHORT_HISTORY = 32;
/** ...while the turn has run at most this many iterations (its own messages grow with it). */
const SHORT_TURN_ITERATIONS = 4;

/**
 * The history a turn's next model call sees (spec §3.6, §3.7): its snapshot, what earlier turns
 * wrote before it started (decision 52), and its own outputs, with summaries applied.
 */
export async function historyForTurn(store: Store, turn: TurnRecord): Promise<MessageRecord[]> {
  const shown = await snapshotMessages(store, turn);
  const earlier = await earlierTurnsMessages(store, turn);
  if (earlier.length === 0) return activeHistory(shown);
  const ids = new Set(shown.map((message) => message.id));
  const merged = [...shown, ...earlier.filter((message) => !ids.has(message.id))];
  return activeHistory(merged.sort((a, b) => a.sequence - b.sequence));
}

/**
 * The snapshot and the turn's own messages, summaries not yet applied. It reads only what that
 * needs: the summaries first (by kind, indexed), then only the sequence ranges no summary hides
 * (indexed ranges), so a turn reads as much after its conversation's 500th turn as after its
 * 5th, once compaction ran.
 */
async function snapshotMessages(store: Store, turn: TurnRecord): Promise<MessageRecord[]> {
  const visible = { throughSequence: turn.contextMessageSequence, turnId: turn.id };
  // A short conversation and a short turn are read whole: one query rather than two.
  if (turn.contextMessageSequence <= SHORT_HISTORY && iterationsOf(turn) <= SHORT_TURN_ITERATIONS)
    return store.listMessages(turn.conversationId, visible);
  const summaries = await store.listMessages(turn.conversationId, { ...visible, kind: 'context_summary' });
  const hidden = hiddenRanges(summaries);
  if (hidden.length === 0) return store.listMessages(turn.conversationId, visible);
  const shown: MessageRecord[] = [...summaries];
  const ids = new Set(summaries.map((message) => message.id));
  let after = 0;
  for (const range of [...hidden, { from: Infinity, through: Infinity }]) {
    if (range.from > after + 1) {
      const between = await store.listMessages(turn.conversationId, {
        ...visible,
        afterSequence: after,
        ...(range.from === Infinity ? {} : { beforeSequence: range.from }),
      });
      shown.push(...between.filter((message) => !ids.has(message.id)));
    }
    after = range.through;
  }
  return shown.sort((a, b) => a.sequence - b.sequence);
}

/**
 * What the turns ahead of a lane turn wrote between its snapshot and its start: their calls,
 * results, answers, summaries, and the results a cancel or a repair wrote. Input nobody's turn
 * wrote in that range (a later message, a post, a delivery) is not this turn's: a later turn
 * answers it, as TurnKit's snapshot rule has it (CORE-11).
 */
async function earlierTurnsMessages(store: Store, turn: TurnRecord): Promise<MessageRecord[]> {
  const through = turn.options[EARLIER_TURNS_THROUGH];
  if (typeof through !== 'number' || through <= turn.contextMessageSequence) return [];
  const range = await store.listMessages(turn.conversationId, {
    afterSequence: turn.contextMessageSequence,
    beforeSequence: through + 1,
  });
  return range.filter((message) => message.turnId !== null && message.turnId !== turn.id);
}

/** The history (`read`, if given) in the order the model reads it (compaction reads it as stored). */
export async function modelHistory(store: Store, turn: TurnRecord, read?: readonly MessageRecord[]) {
  const trigger = turn.options['trigger_message_id'];
  const viewer = { id: turn.id, triggerMessageId: typeof trigger === 'string' ? trigger : null };
  return atCallBoundaries(read ?? (await historyForTurn(store, turn)), viewer);
}

/** Text parts as they are; an image part as a short placeholder (never its bytes). */
function textOf(message: MessageRecord): string {
  return message.content
    .flatMap((part) => {
      if (part.type === 'text') return [part.text];
      if (part.type === 'image')
        return [`[image ${part.mime_type}${part.url ? ` ${part.url}` : ''} message ${message.id}]`];
      if (part.type === 'media_analysis')
        return [
          `[media analysis of ${JSON.stringify(part.media ?? {})} message ${message.id}]\n${part.text}`,
        ];
      return [];
    })
    .join('\n');
}

const plainText = (message: MessageRecord) =>
  message.content.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('\n');

/** Provider-neutral projection of stored messages (thinking before text, tool calls exposed). */
export function projectMessages(messages: readonly MessageRecord[]): ModelMessage[] {
  return messages.flatMap((message): ModelMessage | ModelMessage[] => {
    if (message.kind === 'context_summary') return projectSummary(message);
    if (message.kind === 'tool_result') {
      const part = message.content.find((p) => p.type === 'tool_result');
      return {
        role: 'tool',
        content: part?.type === 'tool_result' ? part.text : '',
        toolCallId: part?.type === 'tool_result' ? part.tool_call_id : '',
        toolName: String(message.metadata['tool_name'] ?? ''),
      };
    }
    if (message.kind === 'tool_call') {
      const thinking = message.content
        .filter((p) => p.type === 'thinking')
        .map((p) => (p as { text: string }).text);
      const calls = message.content.flatMap((p) =>
        p.type === 'tool_call' ? [{ id: p.id, name: p.name, arguments: p.arguments }] : [],
      );
      return {
        role: 'assistant',
        content: [...thinking, textOf(message)].filter(Boolean).join('\n'),
        toolCalls: calls,
      };
    }
    if (message.role === 'tool') return { role: 'user', content: textOf(message) };
    // A user's images and files reach the model as real image / file parts, not as text.
    if (message.role === 'user') {
      const media = message.content.flatMap((part) => modelMediaOf(part) ?? []);
      if (media.length > 0) return { role: 'user', content: plainText(message), media };
    }
    return { role: message.role, content: textOf(message) } as ModelMessage;
  });
}

function effectivePromptMode(agent: Agent, turn: TurnRecord, depth: number): PromptMode {
  const stored = turn.options['prompt_mode'];
  if (stored === 'full' || stored === 'minimal' || stored === 'task' || stored === 'none') return stored;
  return agent.promptMode ?? (depth > 0 ? 'minimal' : 'full');
}

/** The subject's prompt snapshot: the turn's (taken when it was built), else the conversation's. */
function subjectPromptOf(turn: TurnRecord, conversation: ConversationRecord): string | null {
  const own = turn.options['subject_prompt'];
  if (typeof own === 'string') return own;
  const stored = conversation.metadata['turnkit_subject_prompt'];
  return typeof stored === 'string' ? stored : null;
}

interface ContributorFailure {
  index: number;
  message: string;
}

/**
 * The live-context blocks of one model call (spec §3.7): the run context first, then each
 * contributor's block. Contributors get copies, so what they mutate never reaches the store;
 * one that throws or returns a wrong shape is skipped and reported, and the call goes on.
 */
async function liveContextBlocks(
  agent: Agent,
  turn: TurnRecord,
  conversation: ConversationRecord,
  model: string,
): Promise<{ blocks: string[]; failures: ContributorFailure[] }> {
  const blocks: string[] = [];
  const failures: ContributorFailure[] = [];
  const context = contextOf(turn);
  if (Object.keys(context).length > 0)
    blocks.push(untrustedBlock('run_context', JSON.stringify(context, null, 2), agent.promptDataMaxChars));
  for (const [index, contributor] of agent.contextContributors.entries()) {
    try {
      const value = await contributor({
        agent: { name: agent.name, description: agent.description },
        turn: copyForCallback(turn),
        conversation: copyForCallback(conversation),
        model,
      });
      if (value === undefined || value === null || value === '') continue;
      if (typeof value === 'string') {
        blocks.push(untrustedBlock(`context_${index + 1}`, value, agent.promptDataMaxChars));
        continue;
      }
      if (typeof value !== 'object' || typeof value.name !== 'string' || typeof value.content !== 'string')
        throw new ArgumentError(
          'a contributor must return nothing, a string or {name, content, trusted, maxChars}',
        );
      const max = Math.min(
        typeof value.maxChars === 'number' && value.maxChars > 0 ? value.maxChars : agent.promptDataMaxChars,
        agent.promptDataMaxChars,
      );
      blocks.push(
        value.trusted === true
          ? promptDataBlock(value.name, value.content, max)
          : untrustedBlock(value.name, value.content, max),
      );
    } catch (error) {
      failures.push({ index, message: error instanceof Error ? error.message : String(error) });
    }
  }
  return { blocks, failures };
}

function toolSpec(tool: ToolDefinition): ModelToolSpec {
  return { name: tool.name, description: tool.description, inputSchema: tool.jsonSchema };
}

export interface PromptReport {
  chars: number;
  hash: string;
  stable_chars: number;
  dynamic_chars: number;
  /** The rendered sections, in order (CORE-30). */
  sections: { name: string; chars: number; dynamic: boolean }[];
  tool_count: number;
  mode: PromptMode;
  /** Context contributors that threw or returned a wrong shape on this call (skipped). */
  contributor_errors?: ContributorFailure[];
}

export interface TurnPreview {
  request: ModelRequest;
  report: PromptReport;
}

/** Builds the request the next model call of this turn would send (also CORE-09 preview). */
export async function buildModelRequest(
  runtime: Runtime,
  store: Store,
  agent: Agent,
  turn: TurnRecord,
  depth: number,
  /** The model of the chain that serves this attempt (default: the chain's first). */
  serving?: string,
  /** The turn's history (`historyForTurn`), when the caller has read it already. */
  history?: readonly MessageRecord[],
): Promise<TurnPreview> {
  const mode = effectivePromptMode(agent, turn, depth);
  const model = serving ?? runtime.modelFor(agent, turn);
  const conversation = await store.loadConversation(turn.conversationId);
  const loaded = await loadedSkillsOf(store, agent, turn.id);
  const tools = offeredTools(agent, loaded);
  const live =
    mode === 'full' || mode === 'task'
      ? await liveContextBlocks(agent, turn, conversation, model)
      : { blocks: [], failures: [] };
  const prompt = renderSystemPrompt({
    agent,
    turn,
    mode,
    model,
    tools,
    loadedSkills: [...agent.skills, ...agent.availableSkills.filter((skill) => loaded.has(skill.key))],
    availableSkills: agent.availableSkills.filter((skill) => !loaded.has(skill.key)),
    subjectPrompt: subjectPromptOf(turn, conversation),
    liveContext: live.blocks,
  });
  for (const failure of live.failures)
    runtime.logger.warn(
      `turnkit: context contributor ${failure.index} of ${agent.name} failed: ${failure.message}`,
    );
  const messages = projectMessages(await modelHistory(store, turn, history));
  const thinking =
    'thinking' in turn.options ? (turn.options['thinking'] as ModelRequest['thinking']) : agent.thinking;
  const outputSchema =
    (turn.options['output_schema'] as ModelRequest['outputSchema']) ?? agent.outputJsonSchema ?? null;
  const request: ModelRequest = {
    model,
    instructions: prompt.stable,
    dynamicInstructions: prompt.dynamic,
    messages,
    tools: tools.map(toolSpec),
    thinking: thinking ?? null,
    outputSchema,
    metadata: { turnId: turn.id, conversationId: turn.conversationId, agentName: agent.name },
  };
  const full = `${prompt.stable}\n\n${prompt.dynamic}`;
  return {
    request,
    report: {
      chars: full.length,
      hash: createHash('sha256').update(full).digest('hex'),
      stable_chars: prompt.stable.length,
      dynamic_chars: prompt.dynamic.length,
      sections: prompt.sections.map((s) => ({ name: s.name, chars: s.text.length, dynamic: s.dynamic })),
      tool_count: request.tools.length,
      mode,
      ...(live.failures.length > 0 ? { contributor_errors: live.failures } : {}),
    },
  };
}
