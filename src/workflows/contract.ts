/**
 * The contract between the workflows and everything that talks to them (activities, the
 * client): inputs, results and settings, the activities a workflow may call, signal names,
 * workflow ids, search-attribute keys and the one builder of a turn workflow's start options.
 * Both sides import this module and nothing of each other. Deterministic: the workflow
 * bundle loads it.
 */
import type { SearchAttributePair } from '@temporalio/common';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CancelDescendants, CancelRequest } from '../contract/cancel-request.js';
import type { ControlRequest } from '../contract/control-request.js';
import type { PostReceipt, PostRequest } from '../contract/post-request.js';
import type {
  ClaimDigest,
  ClaimStepDigest,
  ModelStepDigest,
  OutputStepDigest,
  OwnerInput,
  TerminalNotice,
  ToolCallOutcome,
  TurnDigest,
  TurnErrorDigest,
} from '../contract/digests.js';
import type {
  ApprovalDecision,
  CompactionDigest,
  CompactionStepInput,
  ControlVerdict,
  FinishRequest,
  ModelStepInput,
  OutputAuditDigest,
  Steer,
  ToolCallInput,
} from '../contract/activities.js';
import type { Json } from '../store/types.js';
import type { PrepareScheduledTurnInput, ScheduledTurnDigest } from '../contract/schedule.js';

// --- Settings, inputs and results -------------------------------------------------------

/**
 * Per-kind activity settings. The heartbeat timeout is how soon a lost worker is noticed;
 * `maximumAttempts` and `scheduleToCloseTimeout` bound Temporal's own retries, which after
 * an infrastructure fault (a worker that died or stopped heartbeating) are the only ones:
 * provider and tool errors are counted by the engine (`TurnSettings.maxProviderAttempts`,
 * `maxToolAttempts`), so a crash-looping worker never spends the budget meant for them.
 */
export interface ActivitySettings {
  startToCloseTimeout?: string | number;
  heartbeatTimeout?: string | number;
  /** Temporal's attempts of the activity, whatever failed them; 0 is unbounded. */
  maximumAttempts?: number;
  /** All attempts of one activity together (never less than `startToCloseTimeout`). */
  scheduleToCloseTimeout?: string | number;
}

export interface TurnSettings {
  model?: ActivitySettings;
  tool?: ActivitySettings;
  /** Provider errors one model step may see; the last one fails the turn with ModelError. */
  maxProviderAttempts?: number;
  /** Runs of a replay-safe tool that threw (not a ToolError) before its execution is failed. */
  maxToolAttempts?: number;
  /**
   * The turn workflow's task timeout (Temporal's default: 10 s): how long a workflow task
   * handed to a worker that then froze (paused, not dead) holds its turn up.
   */
  workflowTaskTimeout?: string | number;
  /** The output checks: constraints and LLM-judged policies (user code with no time bound). */
  output?: ActivitySettings;
  /** Runs of the output checks that threw, per candidate, before the turn fails with that error. */
  maxOutputAttempts?: number;
  /**
   * When one run of the turn workflow continues as new (decision 32): at its next safe point
   * once its history holds `events` events or `bytes` bytes, or Temporal suggests it, whichever
   * comes first. Defaults: `CONTINUE_AS_NEW_AFTER`.
   */
  continueAsNewAfter?: { events?: number; bytes?: number };
  /**
   * The TurnKit web console's base URL (decision 46): the Temporal UI's details of each turn
   * (static and current, child and lane-started turns too) link to its console page.
   */
  consoleUrl?: string;
  /**
   * How long a conversation's lane stays open once idle, for the next post or wake, before it
   * closes (default 30 s). A post that reaches a lane as it closes is sent again (decision 57).
   */
  laneIdle?: string | number;

  /**
   * The store the turn's rows are in: set by the client from its store, and carried to every
   * activity of the turn (its id), so a worker of another store refuses them (decision 67).
   */
  store?: TurnStore;
}

/** Which store a turn belongs to (its `StoreIdentity`'s id and location). */
interface TurnStore {
  id: string;
  location: string;
}

/** A turn's page in the web console at `base` (its hash route), or null without a base. */
export function consoleTurnUrl(base: string | undefined, turnId: string): string | null {
  if (!base) return null;
  return `${base.replace(/[#/]+$/, '')}/#/turns/${encodeURIComponent(turnId)}`;
}

/**
 * A run continues as new past 8,000 events or 16 MB of history (Temporal warns at 10,240
 * events and terminates at 51,200 or 50 MB); Temporal's own suggestion (about 4,000 events
 * on a default server) usually comes first.
 */
export const CONTINUE_AS_NEW_AFTER = { events: 8_000, bytes: 16 * 1024 * 1024 } as const;

/**
 * Heartbeats are sent every 100–500 ms (src/activities/heartbeat.ts; never rarer than 500 ms,
 * decision 24). A 3 s heartbeat timeout misses five of them before
 * a worker is given up for lost; that never fired spuriously under 1,000 concurrent runs on
 * 2 cores, and another worker retries a killed worker's step about 4 s after the kill
 * (docs/decisions/020-worker-loss.md). Infrastructure retries are unbounded, limited by the
 * schedule-to-close timeout and, before that, by the turn's root timeout.
 */
export const DEFAULT_TURN_SETTINGS = {
  model: {
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '3 seconds',
    maximumAttempts: 0,
    scheduleToCloseTimeout: '1 hour',
  },
  tool: {
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '3 seconds',
    maximumAttempts: 0,
    scheduleToCloseTimeout: '1 hour',
  },
  // User code: a longer heartbeat timeout than a model call's, for checks that hold the event
  // loop a while; errors are counted by the engine (maxOutputAttempts), as for a model step.
  output: {
    startToCloseTimeout: '5 minutes',
    heartbeatTimeout: '20 seconds',
    maximumAttempts: 0,
    scheduleToCloseTimeout: '1 hour',
  },
  maxProviderAttempts: 5,
  maxOutputAttempts: 3,
  // A replay-safe tool may be re-run until its last attempt; any other tool runs once.
  maxToolAttempts: 3,
} as const satisfies Required<{
  model: Required<ActivitySettings>;
  tool: Required<ActivitySettings>;
  output: Required<ActivitySettings>;
  maxProviderAttempts: number;
  maxOutputAttempts: number;
  maxToolAttempts: number;
}>;

export interface TurnWorkflowInput {
  turnId: string;
  settings?: TurnSettings;
  /** Set on a run that continues its predecessor's (continue-as-new, decision 32). */
  continued?: TurnContinuation;
}

/**
 * What a continued run needs that the store does not hold: the turn's state is in the store,
 * so this is workflow memory only (ids, counts, a person's controls not yet applied).
 */
export interface TurnContinuation {
  /** Runs of this turn's workflow before this one (1 on the first continued run). */
  runs: number;
  /** Model calls of the runs before (the console's count; step keys also carry the run's token). */
  modelCalls: number;
  /** Child turns the earlier runs started, for a cascading cancel. */
  children: string[];
  /** A person's controls accepted and not yet applied. */
  pauseRequested: boolean;
  steers: Steer[];
  decisions: [string, ApprovalDecision][];
  /** Approval timeouts still running: tool-call id → when it fires (ms since the epoch). */
  approvalDeadlines: [string, number][];
  /**
   * The tools phase's calls as the run before knew them: its calls, those awaiting a
   * decision, those settled (ran or closed) and, of those, the decided ones (absent before
   * decision 58: the continued run learned them only when it dispatched the calls again).
   */
  calls?: { phase: string[]; awaiting: string[]; settled: string[]; decided: string[] };
  /** Pauses and steerings authorized so far, as the store counts them (0.6, decision 82). */
  boundaryControls?: number;
}

export interface TurnWorkflowResult {
  turnId: string;
  /** The turn's status when this run let go of it. */
  status: string;
  /** False when the turn was not pending (already done, or owned by another run). */
  claimed: boolean;
  error?: TurnErrorDigest;
}

export interface LaneWorkflowInput {
  conversationId: string;
  /** Passed on to the turns this lane starts. */
  settings?: TurnSettings;
  /** A wake that arrived during the previous run's last step: this run steps at once (0.5). */
  pendingWake?: boolean;
  /** Lane steps per run before continue-as-new (default 200); for tests. */
  stepsPerRun?: number;
  /** Steps that failed in a row in the previous runs (0.5): carried by continue-as-new. */
  failedSteps?: number;
  /**
   * Failed steps in a row after which the lane stops retrying on its own and waits for the
   * next wake (default 8, 0.5); for tests.
   */
  failureLimit?: number;
}

/** What one lane step did: deliveries appended, a continuation turn built, a turn started. */
interface LaneStepResult {
  delivered: number;
  woke: string | null;
  started: string | null;
  /** Submitted turns still waiting for the lane after this step (absent in older histories). */
  queued?: number;
}

// --- Activities ------------------------------------------------------------------------

/** The activities the workflows call; `createTurnActivities` implements them. */
export interface TurnActivities {
  /** One step of a conversation's lane: deliver, wake, and start the turn whose time it is. */
  laneStep(input: LaneWorkflowInput): Promise<LaneStepResult>;
  /** Wakes the lanes of these conversations (signal-with-start of their lane workflows). */
  wakeLanes(input: { conversationIds: string[]; settings?: TurnSettings }): Promise<void>;
  /**
   * A post to the conversation (the lane's `post` Update): authorized, written once per
   * request id, and applied by the policy; returns its receipt (decision 41).
   */
  acceptPost(input: {
    conversationId: string;
    request: PostRequest;
    settings?: TurnSettings;
  }): Promise<PostReceipt>;
  /** Whether every wait target of the turn is finished. */
  waitsReady(input: { turnId: string }): Promise<{ ready: boolean }>;
  claimTurn(input: OwnerInput): Promise<ClaimDigest>;
  /**
   * A run's first step (0.6): claims the turn in the model activity, then makes the model call
   * when the turn's phase is model and its models run on the turn's own queue (decision 82).
   */
  claimStep(input: ModelStepInput): Promise<ClaimStepDigest>;
  modelStep(input: ModelStepInput): Promise<ModelStepDigest>;
  /** Automatic compaction before a model call (its own model call, purpose `compaction`). */
  compactStep(input: CompactionStepInput): Promise<CompactionDigest>;
  /** `maxAttempts`: the turn's `maxToolAttempts`. */
  toolCall(input: ToolCallInput & { maxAttempts: number }): Promise<ToolCallOutcome>;
  finishTools(input: OwnerInput & { terminalToolCallId: string | null }): Promise<TurnDigest>;
  suspendTurn(input: OwnerInput): Promise<void>;
  resumeTurn(input: OwnerInput): Promise<TurnDigest>;
  turnStatus(input: { turnId: string }): Promise<{ status: string }>;
  /** Runs the output constraints and judges on the candidate; stores the audit for `outputStep`. */
  outputAudit(
    input: OwnerInput & { maxAttempts?: number; finish?: FinishRequest },
  ): Promise<OutputAuditDigest>;
  outputStep(input: OwnerInput): Promise<OutputStepDigest>;
  authorizeCancel(
    input: { turnId: string; native?: boolean } & CancelRequest,
  ): Promise<{ allowed: boolean; reason?: string; finished?: boolean }>;
  rejectCancel(input: { turnId: string; reason: string }): Promise<void>;
  cancelTurn(input: {
    turnId: string;
    descendants: CancelDescendants;
  }): Promise<{ status: string; cancelled: string[]; notice: TerminalNotice }>;
  failTurn(
    input: OwnerInput & { error: TurnErrorDigest },
  ): Promise<{ status: string; notice?: TerminalNotice }>;
  /** A person's control: the signed principal verified, then the policy; recorded as an event. */
  authorizeControl(input: { turnId: string; request: ControlRequest }): Promise<ControlVerdict>;
  /** At a control boundary: `paused`, claim cleared. */
  pauseTurn(input: OwnerInput): Promise<void>;
  /** Takes the paused turn back (LostClaim once it was cancelled meanwhile). */
  resumePausedTurn(input: OwnerInput): Promise<TurnDigest>;
  /** At a control boundary: closes unstarted calls as superseded, appends the person's messages. */
  steerTurn(input: OwnerInput & { steers: Steer[] }): Promise<TurnDigest>;
  /**
   * A schedule's firing: writes its turn's rows (ids derived from the firing, so a retry finds
   * them), or nothing when the schedule's spend per day is used up.
   */
  prepareScheduledTurn(input: PrepareScheduledTurnInput): Promise<ScheduledTurnDigest>;
  /** Cancels a firing's turn as its schedule's principal (signed with the worker's key, if any). */
  cancelScheduledTurn(input: { turnId: string; principal: Json }): Promise<void>;
}

// --- Signals -----------------------------------------------------------------------------

/** Signal names, as they appear in recorded histories. */
export const SIGNALS = {
  cancel: 'cancel',
  /** To a turn waiting for its conversation's lane: it may be free now. */
  laneFree: 'laneFree',
  /** To a turn waiting on others: one of its targets finished. */
  targetFinished: 'targetFinished',
  /** To a conversation's lane: look at deliveries and queued turns. */
  wake: 'wake',
} as const;

/**
 * `cancel` with `{descendants: 'retain' | 'cascade', principal}`: authorized, then the
 * in-flight model request or tool is aborted and the turn is cancelled (spec §5.9).
 */
export const cancelSignal = defineSignal<[unknown]>(SIGNALS.cancel);
/** From the conversation's lane: the lane may be free now (claim again). */
export const laneFreeSignal = defineSignal<[]>(SIGNALS.laneFree);
/** From a turn this one waits on: it finished (check the join again). */
export const targetFinishedSignal = defineSignal<[string?]>(SIGNALS.targetFinished);
/** To a conversation's lane: look at deliveries and queued turns. */
export const wakeSignal = defineSignal<[]>(SIGNALS.wake);

// --- Updates (a person's controls) ------------------------------------------------------

/** Update names, as `temporal workflow update execute --name …` sends them. */
export const UPDATES = {
  approve: 'approve',
  reject: 'reject',
  pause: 'pause',
  resume: 'resume',
  steer: 'steer',
} as const;

/** What `approve` and `reject` return: the decision the call now carries. */
export interface ApprovalResult {
  toolCallId: string;
  decision: 'approved' | 'rejected';
  verified: boolean;
}

/** What `controlState` returns, and what pause/resume/steer answer with. */
export interface ControlState {
  /** `pause` was accepted and no `resume` since (the turn stops at its next boundary). */
  pauseRequested: boolean;
  /** The turn stands at a boundary, paused (status `paused`). */
  paused: boolean;
  /** Tool-call ids awaiting a decision. */
  awaitingApproval: string[];
  /** Steering messages accepted and not yet written (they are at the next boundary). */
  pendingSteers: number;
  /** The turn committed to its output: `pause` and `steer` are refused (`too_late`). */
  finishing: boolean;
  /** The turn's workflow has finished its work. */
  finished: boolean;
}

/** `{toolCallId, principal?, note?, signature?}` */
export const approveUpdate = defineUpdate<ApprovalResult, [unknown]>(UPDATES.approve);
/** `{toolCallId, principal?, reason?, signature?}` */
export const rejectUpdate = defineUpdate<ApprovalResult, [unknown]>(UPDATES.reject);
/** `{principal?, signature?}` */
export const pauseUpdate = defineUpdate<ControlState, [unknown]>(UPDATES.pause);
/** `{principal?, signature?}` */
export const resumeUpdate = defineUpdate<ControlState, [unknown]>(UPDATES.resume);
/** `{text, principal?, signature?}` */
export const steerUpdate = defineUpdate<ControlState, [unknown]>(UPDATES.steer);

/** The lane's Update: `temporal workflow update execute --name post` on `turnkit-lane-<id>`. */
const LANE_UPDATES = { post: 'post' } as const;

/** `{requestId, text, principal?, policy?, media?, signature?}` (contract/post-request.ts) */
export const postUpdate = defineUpdate<PostReceipt, [unknown]>(LANE_UPDATES.post);

// --- Queries -----------------------------------------------------------------------------

/** Query names, as the Temporal UI and CLI send them. */
const QUERIES = { state: 'state', controlState: 'controlState' } as const;

/** What `state` returns: the turn's progress as the workflow last saw it in a digest. */
export interface TurnConsoleState {
  turnId: string;
  status: string;
  phase: string | null;
  iteration: number;
  maxIterations: number | null;
  modelCalls: number;
  /** The model that served the last model step (a fallback chain's later model, when it did). */
  model?: string | null;
  runningTools: string[];
  /** e.g. "model call 2 → 3 tool calls", "tool lookup completed". */
  lastStep: string | null;
  tokens: number;
  cost: number;
}

/** `temporal workflow query --type state`: the turn's progress (ids, counts and names only). */
export const stateQuery = defineQuery<TurnConsoleState>(QUERIES.state);
/** `temporal workflow query --type controlState`: pause, approvals awaiting, steering queued. */
export const controlStateQuery = defineQuery<ControlState>(QUERIES.controlState);

// --- Workflow ids, claim tokens, search attributes ---------------------------------------

/**
 * The task queue of stores that held turns before stores had an id. A newer store has its
 * own default (`StoreIdentity.defaultTaskQueue`, `turnkit-<id>`, decision 67); an option or
 * TURNKIT_TASK_QUEUE overrides either.
 */
export const DEFAULT_TASK_QUEUE = 'turnkit';

export const TURN_WORKFLOW_ID_PREFIX = 'turnkit-turn-';
const LANE_WORKFLOW_ID_PREFIX = 'turnkit-lane-';
/** A TurnKit schedule's Temporal id, and its firings' workflow ids (Temporal appends the time). */
export const SCHEDULE_ID_PREFIX = 'turnkit-schedule-';

export function turnWorkflowId(turnId: string): string {
  return `${TURN_WORKFLOW_ID_PREFIX}${turnId}`;
}

/** One lane workflow per conversation: it delivers messages and starts the next turn. */
export function laneWorkflowId(conversationId: string): string {
  return `${LANE_WORKFLOW_ID_PREFIX}${conversationId}`;
}

/**
 * The claim token of a turn-workflow run: its run id without dashes. A reset, a re-run or any
 * other run has another one, so the store fences every write of the run it superseded.
 */
export function claimTokenOf(runId: string): string {
  return runId.replace(/-/g, '');
}

/** Registered by temporal-dev.sh; register them on any other cluster the same way. */
export const TURNKIT_AGENT = defineSearchAttributeKey('TurnKitAgent', SearchAttributeType.KEYWORD);
export const TURNKIT_CONVERSATION_ID = defineSearchAttributeKey(
  'TurnKitConversationId',
  SearchAttributeType.KEYWORD,
);
export const TURNKIT_ROOT_TURN_ID = defineSearchAttributeKey(
  'TurnKitRootTurnId',
  SearchAttributeType.KEYWORD,
);
export const TURNKIT_STATUS = defineSearchAttributeKey('TurnKitStatus', SearchAttributeType.KEYWORD);
/** On a schedule, its firings and each firing's turn: the TurnKit schedule id. */
export const TURNKIT_SCHEDULE_ID = defineSearchAttributeKey('TurnKitScheduleId', SearchAttributeType.KEYWORD);

// --- Starting a turn ---------------------------------------------------------------------

/** What every start of a turn workflow needs to know about the turn (a turn row fits). */
export interface TurnStart {
  turn: {
    id: string;
    agentName: string;
    conversationId: string;
    rootTurnId: string;
    status: string;
    parentTurnId?: string | null;
  };
  /** What the turn is about, for the summary shown in the Temporal UI. */
  task: string;
  settings?: TurnSettings | undefined;
}

/**
 * The start options every path shares (client, child start, lane): the fixed workflow id,
 * the input, the summary and the search attributes, so a turn is found in the UI by agent,
 * conversation, root and status however it was started.
 */
export function turnStartOptions({ turn, task, settings }: TurnStart): {
  workflowId: string;
  args: [TurnWorkflowInput];
  staticSummary: string;
  staticDetails: string;
  typedSearchAttributes: SearchAttributePair[];
  workflowTaskTimeout?: string | number;
} {
  const head = task.replace(/\s+/g, ' ').trim().slice(0, 120);
  return {
    ...(settings?.workflowTaskTimeout !== undefined
      ? { workflowTaskTimeout: settings.workflowTaskTimeout }
      : {}),
    workflowId: turnWorkflowId(turn.id),
    args: [{ turnId: turn.id, ...(settings ? { settings } : {}) }],
    staticSummary: `${turn.agentName}: ${head}`,
    staticDetails: turnDetails(turn, head, consoleTurnUrl(settings?.consoleUrl, turn.id)),
    typedSearchAttributes: [
      { key: TURNKIT_AGENT, value: turn.agentName },
      { key: TURNKIT_CONVERSATION_ID, value: turn.conversationId },
      { key: TURNKIT_ROOT_TURN_ID, value: turn.rootTurnId },
      // A pending turn's workflow starts by claiming it: it shows `running` from its start, and
      // `pending` only while a busy lane or an open join refuses the claim (decision 87).
      { key: TURNKIT_STATUS, value: turn.status === 'pending' ? 'running' : turn.status },
    ],
  };
}

/** The turn's static details in the UI (markdown): who, where in the tree, and the task's head. */
function turnDetails(turn: TurnStart['turn'], head: string, consoleUrl: string | null): string {
  const code = (value: string) => `\`${value.replace(/`/g, "'")}\``;
  const tree = [`conversation ${code(turn.conversationId)}`, `root ${code(turn.rootTurnId)}`];
  if (turn.parentTurnId) tree.push(`parent ${code(turn.parentTurnId)}`);
  return [
    `**agent** ${code(turn.agentName)} · **turn** ${code(turn.id)}`,
    tree.join(' · '),
    `> ${head}`,
    ...(consoleUrl ? [`[open in the TurnKit console](${consoleUrl})`] : []),
  ].join('\n\n');
}

/** Start options of a conversation's lane, for every path that starts one. */
export function laneWorkflowOptions(conversationId: string, settings?: TurnSettings) {
  return {
    workflowId: laneWorkflowId(conversationId),
    args: [{ conversationId, ...(settings ? { settings } : {}) }] as [LaneWorkflowInput],
    staticSummary: `lane of ${conversationId}`,
    staticDetails: `**conversation** \`${conversationId}\`\n\nDelivers its messages and runs its turns one at a time.`,
  };
}

/** Signal-with-start options of a conversation's lane, for every path that wakes one. */
export function laneStartOptions(conversationId: string, settings?: TurnSettings) {
  return { ...laneWorkflowOptions(conversationId, settings), signal: wakeSignal, signalArgs: [] as [] };
}
