/**
 * What activities return to the workflow: small, fixed-size digests. The transcript, model
 * responses and tool outputs stay in the store and never enter Temporal history.
 */
import type { ToolKind } from '../agents/tool.js';
import type { TurnStatus } from '../store/types.js';
import type { Phase } from './turn-state.js';

export interface ToolCallDigest {
  id: string;
  name: string;
  /** `unknown` when the model named a tool the agent does not have. */
  kind: ToolKind | 'unknown';
  terminal: boolean;
}

export interface TurnDigest {
  turnId: string;
  status: TurnStatus;
  phase: Phase;
  /** Tool calls of the persisted response when the phase is `tools`. */
  toolCalls: ToolCallDigest[];
  /** The root's deadline (ISO) for the workflow's timer, or null (set by the claim only). */
  deadline: string | null;
}

export type ClaimDigest =
  | ({ claimed: true } & TurnDigest)
  | { claimed: false; reason: 'not_pending' | 'lane_busy'; status: TurnStatus };

export interface ModelStepDigest extends TurnDigest {
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  cost: number | null;
  /** True when a stored response was reused instead of calling the model again. */
  reused: boolean;
}

export interface ToolCallOutcome {
  toolCallId: string;
  executionId: string;
  status: string;
  /** A completed terminal tool: the turn ends with its completion message. */
  terminal: boolean;
  /** A sub-agent / join that must resolve before dispatch can go on. */
  waiting: boolean;
  childTurnId?: string;
  childConversationId?: string;
}

export interface OutputStepDigest {
  /** False when a revision was requested and the turn goes back to the model phase. */
  done: boolean;
  status: TurnStatus;
}

/** A turn error as stored and as carried in workflow results. */
export interface TurnErrorDigest {
  class: string;
  message: string;
}
