/**
 * Type guards and helpers for a run's UI message (`TurnKitUIMessage`) and for the store's
 * messages when a chat is rebuilt from them. Browser-safe: no Node, no TurnKit runtime.
 */
import type { DynamicToolUIPart, ReasoningUIPart, StepStartUIPart, TextUIPart, ToolUIPart } from 'ai';
import { TERMINAL_TURN_STATUSES } from '../contract/turn-statuses.js';
import type { SubAgentUIData, TurnKitMessageMetadata, TurnKitUIMessage, TurnStatus, Usage } from './types.js';

type Part = TurnKitUIMessage['parts'][number];
/** A `data-subagent` part: one sub-agent's turn, as it grows. */
export interface SubAgentDataPart {
  type: 'data-subagent';
  id?: string;
  data: SubAgentUIData;
}

export const isTextPart = (part: { type: string }): part is TextUIPart => part.type === 'text';
export const isReasoningPart = (part: { type: string }): part is ReasoningUIPart => part.type === 'reasoning';
export const isStepStartPart = (part: { type: string }): part is StepStartUIPart =>
  part.type === 'step-start';
/** A tool call: TurnKit sends `dynamic-tool` parts; `tool-<name>` ones are accepted too. */
export const isToolPart = (part: { type: string }): part is DynamicToolUIPart | ToolUIPart =>
  part.type === 'dynamic-tool' || part.type.startsWith('tool-');
export const isSubAgentPart = (part: { type: string }): part is SubAgentDataPart =>
  part.type === 'data-subagent';

/** The message's text parts joined, without reasoning or tools. */
export function messageText(message: Pick<TurnKitUIMessage, 'parts'>): string {
  return message.parts
    .filter(isTextPart)
    .map((part) => part.text)
    .join('');
}

/** A tool part's tool name, for `dynamic-tool` and `tool-<name>` parts alike. */
export function toolNameOf(part: DynamicToolUIPart | ToolUIPart): string {
  return part.type === 'dynamic-tool' ? part.toolName : part.type.slice('tool-'.length);
}

/** The sub-agents' latest data, in the order they started; `parentTurnId` gives the tree. */
export function subAgentsOf(message: Pick<TurnKitUIMessage, 'parts'>): SubAgentUIData[] {
  return (message.parts as Part[]).filter(isSubAgentPart).map((part) => part.data);
}

/** The sub-agent a tool part started (its `toolCallId`), if any. */
export function subAgentOfTool(
  message: Pick<TurnKitUIMessage, 'parts'>,
  toolCallId: string,
): SubAgentUIData | undefined {
  return subAgentsOf(message).find((data) => data.toolCallId === toolCallId);
}

type WithMetadata = { metadata?: TurnKitMessageMetadata | undefined };

/** The run's status: `running` while it streams, then how it ended (`undefined` before any metadata). */
export const runStatusOf = (message: WithMetadata): TurnStatus | undefined => message.metadata?.status;
export const isRunCancelled = (message: WithMetadata): boolean => message.metadata?.status === 'cancelled';
export const isRunFailed = (message: WithMetadata): boolean => message.metadata?.status === 'failed';
/** Whether the run ended: `completed`, `failed` or `cancelled`. */
export const isRunFinished = (message: WithMetadata): boolean =>
  message.metadata !== undefined && TERMINAL_TURN_STATUSES.includes(message.metadata.status);
/** Token usage of the run's tree, once it ended. */
export const runUsageOf = (message: WithMetadata): Usage | undefined => message.metadata?.usage;
/** Observed cost of the run's tree in USD, once it ended. */
export const runCostOf = (message: WithMetadata): number | undefined => message.metadata?.cost;
/** A failed run's error text (the server's safe text). */
export const runErrorOf = (message: WithMetadata): string | undefined => message.metadata?.error?.text;

/** A cost in USD for people: `$0.0042`, `$1.27`. */
export function formatCost(usd: number): string {
  return `$${usd >= 1 ? usd.toFixed(2) : usd.toPrecision(2)}`;
}

/** A message as the store keeps it (`run.messages()`), as far as these helpers read it. */
export interface StoredMessageLike {
  role: string;
  content: readonly { type: string; text?: string }[];
  metadata?: Record<string, unknown> | null;
}

const TASK_PREFIX = 'Task:\n';

/**
 * What the user wrote, for rebuilding a chat from the store: a run's task message is stored as
 * `Task:\n<text>` (and `Input:` JSON); its metadata keeps the caller's own text (`task_text`).
 * Older rows without it lose the prefix and the `Input:` block here. Other messages: their text.
 */
export function userTextOf(message: StoredMessageLike): string {
  const own = message.metadata?.['task_text'];
  if (typeof own === 'string') return own;
  const text = message.content
    .filter((part) => part.type === 'text')
    .map((part) => part.text ?? '')
    .join('');
  if (message.metadata?.['task'] !== true || !text.startsWith(TASK_PREFIX)) return text;
  const task = text.slice(TASK_PREFIX.length);
  const input = task.lastIndexOf('\n\nInput:\n');
  return input >= 0 ? task.slice(0, input) : task;
}
