/**
 * The UI message types of a run's stream (`toUIMessageStreamResponse`), for the server and the
 * browser alike: type-only imports, nothing of Node (`turnkit/ui` re-exports them).
 */
import type {
  DynamicToolUIPart,
  InferUIMessageChunk,
  ReasoningUIPart,
  StepStartUIPart,
  TextUIPart,
  UIMessage,
} from 'ai';
import type { TurnStatus, Usage } from '../store/types.js';

export type { TurnStatus, Usage };

/** A part of a sub-agent's message: its steps, text, reasoning and tool calls. */
export type SubAgentUIPart = TextUIPart | ReasoningUIPart | DynamicToolUIPart | StepStartUIPart;

/**
 * The data of a `data-subagent` part: one sub-agent turn of the run's tree (nested ones too,
 * each its own part), as a message of its own that grows while it works.
 */
export interface SubAgentUIData {
  turnId: string;
  agentName: string | null;
  /** The turn that started it; the run's own turn, or a sub-agent's for a nested one. */
  parentTurnId: string | null;
  /** The parent's tool call that started it: the `dynamic-tool` part it belongs to. */
  toolCallId: string | null;
  status: TurnStatus;
  parts: SubAgentUIPart[];
}

/**
 * The run's message metadata (`message.metadata` in `useChat`): `{ turnId, status: 'running' }`
 * from the start; the end adds the final status and, for a run handle, the turn's ids, model,
 * the run's usage and cost over its tree, and a failed run's error class.
 */
export interface TurnKitMessageMetadata {
  turnId: string;
  /** `running` while it streams; then `completed`, `failed` or `cancelled` (or another end). */
  status: TurnStatus;
  rootTurnId?: string;
  conversationId?: string;
  agentName?: string;
  model?: string | null;
  /** Token usage of the run's tree (the turn and its sub-agents). */
  usage?: Usage;
  /** Observed cost of the run's tree in USD. */
  cost?: number;
  /** A failed run's error: its class, and the text the server chose to show (safe by default). */
  error?: { class: string; text: string };
}

/** The message `toUIMessageStream()` builds: `useChat<TurnKitUIMessage>()`. */
export type TurnKitUIMessage = UIMessage<TurnKitMessageMetadata, { subagent: SubAgentUIData }>;
export type TurnKitUIMessageChunk = InferUIMessageChunk<TurnKitUIMessage>;
