/**
 * The TurnKit-compatible store contract (spec §2 data model, §8 interface), in TypeScript.
 *
 * Records are plain JSON-able objects with camelCase keys; the relational backends keep
 * TurnKit's snake_case column names, and the JSON documents inside rows (options, metadata,
 * usage, content parts, payloads) keep TurnKit's snake_case keys, so any process can read
 * the tables without this code. Times are ISO-8601 UTC strings.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export const TURN_STATUSES = [
  'pending',
  'waiting',
  'running',
  'completed',
  'failed',
  'cancelled',
  'stale',
  // Stopped by a person at a control boundary (`run.pause()`): no claim, no worker held.
  'paused',
] as const;
export type TurnStatus = (typeof TURN_STATUSES)[number];
// One list, owned by the contract: the workflow cannot import the store (lint).
export { TERMINAL_TURN_STATUSES } from '../contract/turn-statuses.js';
/** A turn in one of these holds its conversation's lane (pending only once submitted). */
export const LANE_TURN_STATUSES: readonly TurnStatus[] = ['pending', 'waiting', 'running', 'paused'];
/** Started and not finished: no other turn of the conversation may start. */
export const BUSY_TURN_STATUSES: readonly TurnStatus[] = ['waiting', 'running', 'paused'];

export const TOOL_EXECUTION_STATUSES = [
  'pending',
  'running',
  'completed',
  'failed',
  'cancelled',
  'interrupted',
  // Held for a person's decision (`needsApproval`); the tool has not run.
  'awaiting_approval',
] as const;
export type ToolExecutionStatus = (typeof TOOL_EXECUTION_STATUSES)[number];
/** Not finished: the call has no outcome yet, so it has no result message either. */
export const OPEN_TOOL_EXECUTION_STATUSES: readonly ToolExecutionStatus[] = [
  'pending',
  'running',
  'awaiting_approval',
];
export function isOpenToolExecution(execution: { status: ToolExecutionStatus }): boolean {
  return OPEN_TOOL_EXECUTION_STATUSES.includes(execution.status);
}

export const MESSAGE_ROLES = ['user', 'assistant', 'tool'] as const;
export type MessageRole = (typeof MESSAGE_ROLES)[number];
export const MESSAGE_KINDS = [
  'text',
  'tool_call',
  'tool_result',
  'context_summary',
  'image',
  'media_analysis',
] as const;
export type MessageKind = (typeof MESSAGE_KINDS)[number];

export type ContentPart =
  | { type: 'text'; text: string }
  | { type: 'thinking'; text: string; signature?: string; redacted?: boolean }
  | { type: 'tool_call'; id: string; name: string; arguments: JsonObject; arguments_error?: string }
  | { type: 'tool_result'; tool_call_id: string; text: string; error: boolean }
  | {
      type: 'image';
      url?: string;
      data?: string;
      mime_type: string;
      model?: string;
      provider?: string;
      revised_prompt?: string;
      metadata?: JsonObject;
    }
  | { type: 'file'; url?: string; data?: string; mime_type: string; filename?: string }
  | {
      type: 'media_analysis';
      text: string;
      data?: Json;
      media?: JsonObject;
      model?: string;
      provider?: string;
    }
  | { type: 'provider'; kind: string; data: Json };

export interface Subject {
  type: string;
  id: string;
}

export interface ConversationRecord {
  id: string;
  agentName: string;
  model: string | null;
  subject: Subject | null;
  metadata: JsonObject;
  /** A fork's origin (decision 47): the conversation it was forked from; null otherwise. */
  forkedFromConversationId: string | null;
  /** The origin's last message the fork carries; null for a fork with an empty history. */
  forkedFromMessageId: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface MessageRecord {
  id: string;
  conversationId: string;
  turnId: string | null;
  role: MessageRole;
  kind: MessageKind;
  /** Positive, unique and increasing per conversation; allocated under the conversation lock. */
  sequence: number;
  content: ContentPart[];
  toolExecutionId: string | null;
  providerMessageId: string | null;
  metadata: JsonObject;
  createdAt: string;
}

/** Token totals of a turn, stored in TurnKit's own JSON shape (snake_case keys). */
export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  thinking_tokens: number;
  /** Sum of the five counters. */
  total_tokens: number;
  cost_details?: {
    input: number | null;
    output: number | null;
    cache_read: number | null;
    cache_write: number | null;
    thinking: number | null;
    total: number | null;
  };
}

export interface TurnError {
  class: string;
  message: string;
  [key: string]: Json;
}

export interface TurnRecord {
  id: string;
  conversationId: string;
  agentName: string;
  parentTurnId: string | null;
  parentToolExecutionId: string | null;
  /** Root of the tree; budgets are root-wide. Defaults to the turn's own id. */
  rootTurnId: string;
  /** Latest message sequence of the conversation when the turn was built. */
  contextMessageSequence: number;
  status: TurnStatus;
  model: string | null;
  /** Write-once configuration plus the runtime `state` (phase, parts, candidate, …). */
  options: JsonObject;
  usage: Usage | null;
  /** Running total of observed cost in USD. */
  cost: number;
  error: TurnError | null;
  outputText: string | null;
  outputData: Json;
  /** Present on every turn handed to the background engine (every Temporal turn). */
  submittedAt: string | null;
  /** Token of the current owner; null when nobody owns the turn. */
  claimToken: string | null;
  startedAt: string | null;
  heartbeatAt: string | null;
  completedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface ToolExecutionError {
  message: string;
  details?: JsonObject;
}

export interface ToolExecutionRecord {
  id: string;
  turnId: string;
  toolCallId: string;
  toolName: string;
  arguments: JsonObject;
  status: ToolExecutionStatus;
  result: Json;
  error: ToolExecutionError | null;
  startedAt: string | null;
  completedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface DeliveryRecord {
  id: string;
  sourceConversationId: string | null;
  destinationConversationId: string;
  sourceTurnId: string | null;
  /** Globally unique idempotency key. */
  key: string;
  /** JSON-canonicalized payload, `{text}`. */
  payload: JsonObject;
  messageId: string | null;
  deliveredAt: string | null;
  createdAt: string;
}

/** `Store.afterTurnEnd`: who must hear of a turn's end. */
export interface AfterTurnEnd {
  /** Turns waiting on the turn that have not ended, in the order of their waits. */
  waiters: string[];
  /** The lane asked about has something to do once the turn lets go of it. */
  laneWork: boolean;
}

export interface WaitRecord {
  turnId: string;
  targetTurnId: string;
  createdAt: string;
}

/**
 * Spend a schedule reserved for one of its runs on one UTC day (decision 58): the run's cap,
 * written with its turn, so firings that run at once share the day's cap instead of each
 * seeing all of it.
 */
export interface ScheduleSpendRecord {
  scheduleId: string;
  /** The firing's UTC day, `YYYY-MM-DD`. */
  day: string;
  rootTurnId: string;
  /** USD: the run's spend cap when it was written. */
  reserved: number;
  createdAt: string;
}

/** One entry of a turn's durable, append-only event log (written after commit). */
export interface EventRecord {
  turnId: string;
  /** 1, 2, 3, … per turn. */
  sequence: number;
  type: string;
  conversationId: string;
  payload: JsonObject;
  createdAt: string;
}

/**
 * What a run's live stream carries (`run.stream()`), one row per part. Deltas are written by
 * the model activity in small batches; the committed message stays the source of truth.
 */
export const STREAM_PART_TYPES = [
  'text.delta',
  'reasoning.delta',
  'tool.call',
  'tool.result',
  'step.started',
  'step.restarted',
  'step.finished',
  'status',
  'finish',
] as const;
export type StreamPartType = (typeof STREAM_PART_TYPES)[number];

/** One stored part of a run's live stream. */
export interface StreamPartRecord {
  /** Store-wide, increasing in commit order within a root: the part's cursor. */
  sequence: number;
  rootTurnId: string;
  turnId: string;
  /** The model step key (`<run>:<n>`) of step and delta parts. */
  step: string | null;
  /** Deltas: the sequence of their attempt's `step.started` part. */
  attempt: number | null;
  type: StreamPartType;
  payload: JsonObject;
  createdAt: string;
}

export interface NewStreamPart {
  rootTurnId: string;
  turnId: string;
  step?: string | null;
  attempt?: number | null;
  type: StreamPartType;
  payload?: JsonObject;
}

export interface NewConversation {
  id?: string;
  agentName: string;
  model?: string | null;
  subject?: Subject | null;
  metadata?: JsonObject;
  forkedFromConversationId?: string | null;
  forkedFromMessageId?: string | null;
}

/** What `copyMessages` copies: `from`'s messages through `throughSequence`, into `to`. */
export interface CopyMessagesOptions {
  from: string;
  to: string;
  throughSequence: number;
}

/** The keys `updateConversation` accepts; anything else is an ArgumentError. */
export const CONVERSATION_UPDATE_KEYS = ['metadata', 'model'] as const;
export type ConversationUpdate = Partial<Pick<ConversationRecord, (typeof CONVERSATION_UPDATE_KEYS)[number]>>;

export interface NewMessage {
  id?: string;
  conversationId: string;
  turnId?: string | null;
  role: MessageRole;
  kind?: MessageKind;
  content: ContentPart[] | string;
  toolExecutionId?: string | null;
  providerMessageId?: string | null;
  metadata?: JsonObject;
}

export interface NewTurn {
  id?: string;
  conversationId: string;
  agentName: string;
  parentTurnId?: string | null;
  parentToolExecutionId?: string | null;
  rootTurnId?: string | null;
  contextMessageSequence?: number;
  status?: TurnStatus;
  model?: string | null;
  options?: JsonObject;
  submittedAt?: string | null;
}

/** The keys `updateTurn` accepts (spec §8); anything else is an ArgumentError. */
export const TURN_UPDATE_KEYS = [
  'status',
  'options',
  'usage',
  'cost',
  'error',
  'outputText',
  'outputData',
  'submittedAt',
  'claimToken',
  'startedAt',
  'heartbeatAt',
  'completedAt',
] as const;
export type TurnUpdate = Partial<Pick<TurnRecord, (typeof TURN_UPDATE_KEYS)[number]>>;

export interface NewToolExecution {
  id?: string;
  turnId: string;
  toolCallId: string;
  toolName: string;
  arguments?: JsonObject;
  status?: ToolExecutionStatus;
  startedAt?: string | null;
}

/** The keys `claimToolExecution` may set besides the status. */
export const TOOL_EXECUTION_UPDATE_KEYS = ['result', 'error', 'startedAt', 'completedAt'] as const;
export type ToolExecutionUpdate = Partial<
  Pick<ToolExecutionRecord, (typeof TOOL_EXECUTION_UPDATE_KEYS)[number]>
>;

export interface NewDelivery {
  id?: string;
  sourceConversationId?: string | null;
  destinationConversationId: string;
  sourceTurnId?: string | null;
  key: string;
  payload: JsonObject;
}

export const DELIVERY_UPDATE_KEYS = ['messageId', 'deliveredAt'] as const;
export type DeliveryUpdate = Partial<Pick<DeliveryRecord, (typeof DELIVERY_UPDATE_KEYS)[number]>>;

export interface ClaimTurnOptions extends TurnUpdate {
  /** Status (or statuses) the turn must be in; default `pending`. */
  from?: TurnStatus | readonly TurnStatus[];
  /** Status to set; default `running`. */
  to?: TurnStatus;
}

export interface ClaimToolExecutionOptions extends ToolExecutionUpdate {
  from?: ToolExecutionStatus | readonly ToolExecutionStatus[];
  to?: ToolExecutionStatus;
}

export interface ListMessagesOptions {
  /** Keep `sequence <= throughSequence OR turnId == turnId` (a turn's snapshot view). */
  throughSequence?: number;
  turnId?: string;
  /** Only messages that report this tool execution. */
  toolExecutionId?: string;
  /** Only messages of this kind (indexed: a conversation's summaries without its history). */
  kind?: MessageKind;
  /** Only `sequence > afterSequence` (an indexed range). */
  afterSequence?: number;
  /** Only `sequence < beforeSequence` (an indexed range). */
  beforeSequence?: number;
  /** At most this many, the first in sequence order (a page). */
  limit?: number;
}

export interface ListTurnsFilter {
  rootTurnId?: string;
  conversationId?: string;
  agentName?: string;
  /** A parent's turns; `null`: only turns without a parent. */
  parentTurnId?: string | null;
  parentToolExecutionId?: string;
  status?: TurnStatus | readonly TurnStatus[];
  /**
   * Only turns whose snapshot holds this message sequence (`contextMessageSequence >= seesSequence`).
   * With `conversationId` (and no `after`), ordered by `contextMessageSequence` first: the
   * first turns to see the message, found by an index whatever the conversation's length.
   */
  seesSequence?: number;
  /** Only submitted turns (true) or only unsubmitted ones (false). */
  submitted?: boolean;
  /** Only root turns (no parent turn). */
  root?: boolean;
  /** Only turns created at or after this time (ISO 8601). */
  createdFrom?: string;
  /** Only turns created before this time (ISO 8601). */
  createdBefore?: string;
  /** Only turns after this one in the listing's order (createdAt, id): the next page. */
  after?: { createdAt: string; id: string };
  limit?: number;
}

/**
 * Which tool executions to list: one turn's or several turns'. Optionally only those with one
 * of `toolCallIds` (an empty list selects none), only `toolName`'s, or only those that have
 * (`hasError: true`) or have not (`false`) an error.
 */
export type ToolExecutionFilter = ({ turnId: string } | { turnIds: readonly string[] }) & {
  toolCallIds?: readonly string[];
  toolName?: string;
  hasError?: boolean;
};

export interface ListDeliveriesFilter {
  sourceConversationId?: string;
  destinationConversationId?: string;
  /** Only undelivered ones. */
  pending?: boolean;
  limit?: number;
}

/**
 * A turn tree's budget counters (spec §10), kept by the store as rows change (decision 59):
 * iterations and cost summed over the tree's turns; tool executions, in total and by tool
 * name, leaving out cancelled ones and those the budget denied (`error.details.budget_denied`).
 */
export interface BudgetUsage {
  iterations: number;
  cost: number;
  toolExecutions: number;
  toolExecutionsByName: Record<string, number>;
}

export type StoreBackend = 'memory' | 'sqlite' | 'postgres';

/**
 * Which store this is (decision 67): an id made when the store is first opened and kept in
 * it, where it is (a file, a database and schema, or `memory`), and the task queue its
 * workers and clients use unless they name one. Turns carry the id, so a worker of another
 * store refuses them.
 */
export interface StoreIdentity {
  /** `store_<20 hex>`, written once, on first open. */
  readonly id: string;
  /** A SQLite file, `host:port/database (schema s)`, or `memory`: never a credential. */
  readonly location: string;
  /** `turnkit-<id's 12 last hex>`; `turnkit` for a store that held turns before it had an id. */
  readonly defaultTaskQueue: string;
}

/**
 * The store contract. Every method is async. Writes outside `atomic` are each their own
 * transaction. `load*` raise RecordNotFound; list methods return copies in the stated order.
 */
export interface Store {
  readonly backend: StoreBackend;
  /** Which store this is, and its default task queue (decision 67). */
  readonly identity: StoreIdentity;

  /**
   * Reentrant, rollback-on-error transaction that serializes work on `conversationId`
   * across processes. Nested calls (even on other conversations) join the outer
   * transaction; an error rolls back everything the outermost block wrote.
   */
  atomic<T>(conversationId: string | null, fn: () => Promise<T>): Promise<T>;
  /** Global serialization for wait-graph mutation (joins an enclosing transaction). */
  atomicGraph<T>(fn: () => Promise<T>): Promise<T>;

  createConversation(attrs: NewConversation): Promise<ConversationRecord>;
  loadConversation(id: string): Promise<ConversationRecord>;
  /** Replaces the conversation's metadata (reserved keys included). */
  updateConversation(
    id: string,
    attrs: { metadata?: JsonObject; model?: string | null },
  ): Promise<ConversationRecord>;

  /** Conversations forked from this one (decision 47), order createdAt, id. */
  listForks(conversationId: string): Promise<ConversationRecord[]>;

  nextMessageSequence(conversationId: string): Promise<number>;
  latestMessageSequence(conversationId: string): Promise<number>;
  /** Assigns the next sequence atomically; validates role and kind. */
  appendMessage(attrs: NewMessage): Promise<MessageRecord>;
  loadMessage(id: string): Promise<MessageRecord>;
  /**
   * A fork's history (decision 47): copies `from`'s messages with `sequence <= throughSequence`
   * into `to`, which must have no messages, keeping their sequences (summary ranges stay true)
   * as `forkedMessage` rewrites them: new ids, no turn, no delivery mark. Returns the count.
   */
  copyMessages(options: CopyMessagesOptions): Promise<number>;
  /** Ordered by sequence. */
  listMessages(conversationId: string, options?: ListMessagesOptions): Promise<MessageRecord[]>;

  createTurn(attrs: NewTurn): Promise<TurnRecord>;
  loadTurn(id: string): Promise<TurnRecord>;
  updateTurn(id: string, attrs: TurnUpdate): Promise<TurnRecord>;
  /** Compare-and-set on status; null when the turn is not in `from`. */
  claimTurn(id: string, options?: ClaimTurnOptions): Promise<TurnRecord | null>;
  /** Filters are AND-ed; order createdAt, id. */
  listTurns(filter?: ListTurnsFilter): Promise<TurnRecord[]>;
  /**
   * A conversation's lane in one read: its open turns (pending, waiting, running, paused), as
   * `listTurns` lists them, and its newest message sequence (0 for none): what a lane claim
   * decides on (decision 88).
   */
  listLane(conversationId: string): Promise<{ turns: TurnRecord[]; latestMessageSequence: number }>;
  /** Historical inventory of submitted turns, order createdAt, id. */
  listSubmittedTurns(options?: { limit?: number }): Promise<TurnRecord[]>;
  /** Submitted and pending/waiting/running; order updatedAt, id; bounded. */
  listActionableTurns(options: { limit: number }): Promise<TurnRecord[]>;
  /** Unsubmitted, pending/running, `coalesce(heartbeatAt, startedAt, createdAt) < before`. */
  listStaleInlineTurns(options: { before: string; limit: number }): Promise<TurnRecord[]>;
  /** Any running/waiting turn, or (by default) a submitted pending one. */
  busyConversation(id: string, options?: { includePending?: boolean }): Promise<boolean>;
  /**
   * Newest delivered message whose sequence exceeds the highest `contextMessageSequence`
   * of the conversation's turns that are not unsubmitted-pending.
   */
  nextDeliveryTrigger(conversationId: string): Promise<MessageRecord | null>;
  /**
   * What follows the end of `turnId`, in one read: the turns waiting on it that have not ended
   * (in the order of their waits), and, given `laneConversationId`, whether that lane has work
   * once the turn lets go of it (an undelivered delivery to it, another submitted pending turn,
   * or `nextDeliveryTrigger`); `laneWork` is false without it.
   */
  afterTurnEnd(turnId: string, laneConversationId: string | null): Promise<AfterTurnEnd>;

  /** Insert, or return the existing row for `key`; a mismatch is a ToolError. */
  createDelivery(attrs: NewDelivery): Promise<DeliveryRecord>;
  loadDelivery(id: string): Promise<DeliveryRecord>;
  updateDelivery(id: string, attrs: DeliveryUpdate): Promise<DeliveryRecord>;
  listDeliveries(filter?: ListDeliveriesFilter): Promise<DeliveryRecord[]>;

  /** Idempotent insert. */
  createWait(attrs: { turnId: string; targetTurnId: string }): Promise<WaitRecord>;
  listWaits(filter?: { turnId?: string; targetTurnId?: string }): Promise<WaitRecord[]>;
  /**
   * A turn and the waits it has (`listWaits({ turnId })`), in one read: what a claim decides
   * on (decision 88). RecordNotFound when the turn is missing.
   */
  loadTurnWithWaits(id: string): Promise<{ turn: TurnRecord; waits: WaitRecord[] }>;

  /** Idempotent insert: one reservation per (schedule, day, run). */
  reserveScheduleSpend(attrs: Omit<ScheduleSpendRecord, 'createdAt'>): Promise<ScheduleSpendRecord>;
  /** The schedule's reservations of one day, oldest first. */
  listScheduleSpend(scheduleId: string, day: string): Promise<ScheduleSpendRecord[]>;

  /** Unique per (turnId, toolCallId): creating a second one is a StoreError. */
  createToolExecution(attrs: NewToolExecution): Promise<ToolExecutionRecord>;
  loadToolExecution(id: string): Promise<ToolExecutionRecord>;
  /** Compare-and-set on status; null when the execution is not in `from`. */
  claimToolExecution(id: string, options?: ClaimToolExecutionOptions): Promise<ToolExecutionRecord | null>;
  /**
   * Order createdAt, id. The optional narrowing fields keep a long turn's per-step reads
   * proportional to the step, not to the turn (decision 32).
   */
  listToolExecutions(filter: ToolExecutionFilter): Promise<ToolExecutionRecord[]>;
  /**
   * How many of the selected executions there are, per tool name (names with none are absent).
   * `exceptStatuses` leaves those statuses out.
   */
  countToolExecutions(
    filter: ToolExecutionFilter & { exceptStatuses?: readonly ToolExecutionStatus[] },
  ): Promise<Record<string, number>>;

  /**
   * The budget counters of the tree rooted at `rootTurnId`, from one row (all zero for a root
   * the store does not hold). Inside a transaction they include the transaction's writes.
   */
  budgetUsage(rootTurnId: string): Promise<BudgetUsage>;

  /** Appends to the turn's durable event log; sequence is allocated per turn. */
  appendEvent(attrs: {
    turnId: string;
    conversationId: string;
    type: string;
    payload?: JsonObject;
  }): Promise<EventRecord>;
  /**
   * Appends several events of one turn, in order, with sequences that follow one another (one
   * statement where the store can). Joins an enclosing transaction.
   */
  appendEvents(attrs: {
    turnId: string;
    conversationId: string;
    events: readonly { type: string; payload?: JsonObject | undefined }[];
  }): Promise<EventRecord[]>;
  listEvents(turnId: string, options?: { afterSequence?: number; limit?: number }): Promise<EventRecord[]>;

  /**
   * Appends parts to their runs' live streams, in order. Sequences are store-wide and, within
   * one root, allocated and committed in the same order (a lock per root), so a reader never
   * sees a later part before an earlier one. Joins an enclosing transaction.
   */
  appendStreamParts(parts: readonly NewStreamPart[]): Promise<StreamPartRecord[]>;
  /**
   * The parts of a root's stream after `afterSequence`, in sequence order. A delta whose
   * attempt is not the latest `step.started` of its step (an attempt that died) is left out.
   */
  listStreamParts(
    rootTurnId: string,
    options?: { afterSequence?: number; limit?: number },
  ): Promise<StreamPartRecord[]>;
  /** Whether `sequence` is a part of this root's stream (left out or not). */
  hasStreamPart(rootTurnId: string, sequence: number): Promise<boolean>;
  /**
   * Push, where the backend has it (PostgreSQL `LISTEN`): `wake` runs after parts of the root
   * committed. Returns the unsubscribe. Absent: readers poll.
   */
  watchStream?(rootTurnId: string, wake: () => void): Promise<() => void>;

  /**
   * Marks old unsubmitted pending/running turns `stale` (claim cleared, completedAt set),
   * each rechecked under its root conversation's lock. Bounded by `limit`.
   */
  reconcileStaleTurns(options: { before: string; limit?: number }): Promise<TurnRecord[]>;

  close(): Promise<void>;
}
