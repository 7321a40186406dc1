/**
 * What activities return to the workflow: small, fixed-size digests. The transcript, model
 * responses and tool outputs stay in the store and never enter Temporal history. Types only:
 * the workflow bundle loads nothing from here at run time.
 */
import type { ToolKind } from '../agents/tool.js';
import type { TurnStatus } from '../store/types.js';

/** Where a turn is in its loop (`options.state.phase`). */
export type Phase = 'model' | 'tools' | 'output';

/**
 * What an activity that writes as the turn's owner is given: the turn, the claim, and for
 * store steps (local activities) the history length of the workflow task that runs it.
 */
export interface OwnerInput {
  turnId: string;
  claimToken: string;
  /** `workflowInfo().historyLength`: fences a stale workflow task of the same run (StaleTask). */
  taskHistoryLength?: number;
}

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
  /** The agent has output constraints or policies: the output phase runs `outputAudit` first. */
  outputChecks?: boolean;
  /** For the Temporal UI's current details (absent in digests recorded before it existed). */
  progress?: TurnProgress;
  /** Release 0.6: the step made the output step's write itself (decision 82). */
  done?: OutputStepDigest;
}

/** Counts the UI shows while a turn runs: iteration against its limit, tokens and cost so far. */
interface TurnProgress {
  iteration: number;
  maxIterations: number;
  tokens: number;
  cost: number;
}

/**
 * Where the turn's model calls run when the worker gives providers queues of their own
 * (`createWorker({ models })`, decision 43): the task queue of each model of the turn's chain,
 * in order (null: the turn's own queue), and the fairness key of its tenant. Absent when no
 * model of the chain has a queue: the workflow then schedules exactly as before.
 */
export interface ModelRoute {
  queues: (string | null)[];
  fairnessKey?: string;
}

export type ClaimDigest =
  | ({ claimed: true; modelRoute?: ModelRoute } & TurnDigest)
  | {
      claimed: false;
      /** `waiting`: an application-level join whose targets are not finished yet. */
      reason: 'not_pending' | 'lane_busy' | 'waiting';
      status: TurnStatus;
      deadline?: string | null;
    };

/**
 * What `claimStep` answers (0.6, decision 82): the claim as `claimTurn` makes it and, when the
 * claimed turn's next phase was a model call on the turn's own queue, that call's digest.
 */
export interface ClaimStepDigest {
  claim: ClaimDigest;
  /** Absent: refused, or the claimed turn is not at a model call the step could make. */
  step?: ModelStepDigest;
}

export interface ModelStepDigest extends TurnDigest {
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  cost: number | null;
  /** True when a stored response was reused instead of calling the model again. */
  reused: boolean;
  /** The model of the chain that served the step (absent when reused). */
  model?: string;
  /** The model was not called: compaction is due first (only when the step asked). */
  compactionDue?: boolean;
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
  /** `wait_for`: the targets still unfinished. */
  waitTargets?: string[];
  /** `launch_agent`: the detached child the workflow starts. */
  launched?: { turnId: string; agent: string; conversationId: string };
  /** `send_message`: conversations whose lane must look at a new delivery. */
  wakeLanes?: string[];
  /** The call waits for a person's `approve` or `reject` (its execution is `awaiting_approval`). */
  awaitingApproval?: boolean;
  /** With `awaitingApproval`: reject after this many ms undecided (null: wait as long as it takes). */
  approvalTimeoutMs?: number | null;
  /** The call closed the tools phase (`close`): where the turn is now. */
  closed?: TurnDigest;
}

/** Who must hear about a terminal write: waiters to nudge, conversation lanes to wake. */
export interface TerminalNotice {
  waiters: string[];
  lanes: string[];
}

export interface OutputStepDigest {
  /** False when a revision was requested and the turn goes back to the model phase. */
  done: boolean;
  status: TurnStatus;
  notice?: TerminalNotice;
}

/** A turn error as stored and as carried in workflow results. */
export interface TurnErrorDigest {
  class: string;
  message: string;
}
