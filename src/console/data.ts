/**
 * What the web console shows, read from the store (decisions 46 and 63): pages of turn
 * summaries, conversations and calls awaiting approval, a turn's page (tree, tool executions,
 * per-step usage, phase timeline) and its transcript in pages. Every read takes a page and a
 * keyset cursor, and only rows the `Scope` lets this principal read are shown. Plain JSON for
 * the browser; nothing of Temporal.
 */
import type {
  ConsoleKey,
  ConsoleReads,
  ConsoleTurnQuery,
  ConsoleWaitReason,
} from '../store/console-reads.js';
import type {
  EventRecord,
  Json,
  JsonObject,
  MessageRecord,
  Store,
  ToolExecutionRecord,
  TurnRecord,
  TurnStatus,
} from '../store/types.js';
import { TURN_STATUSES } from '../store/types.js';
import { ArgumentError } from '../errors.js';

/** One row of the turn list. */
export interface ConsoleTurnSummary {
  id: string;
  conversationId: string;
  agentName: string;
  status: TurnStatus;
  /** For a running or waiting turn, what it waits for (a person's approval, its sub-agents), when known. */
  waitingFor: ConsoleWaitReason | null;
  parentTurnId: string | null;
  rootTurnId: string;
  principal: Json;
  model: string | null;
  tokens: number;
  cost: number;
  error: { class: string; message: string } | null;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
}

/** The list's filters, from the query string: the store's query, paged by `cursor` (the previous page's `nextCursor`). */
export type TurnListFilter = Omit<ConsoleTurnQuery, 'after' | 'limit'> & {
  cursor?: ConsoleKey;
  limit?: number;
};

/** Whether the principal asking may read this turn (the `read_control` or `read_messages` action). */
export type Scope = (action: 'read_control' | 'read_messages', turn: TurnRecord) => Promise<boolean>;

/** A page of a list and the cursor of the next one (null at the end). */
export interface ConsolePage {
  nextCursor: string | null;
}

const DEFAULT_LIST_LIMIT = 50;
const MAX_LIST_LIMIT = 500;
/** How many store pages one console page may scan for rows the scope allows. */
const MAX_SCAN_PAGES = 5;

/** A keyset position as an opaque URL-safe cursor. */
function encodeCursor(key: ConsoleKey): string {
  const bytes = new TextEncoder().encode(JSON.stringify([key.createdAt, key.id]));
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
}

function decodeCursor(text: string): ConsoleKey {
  try {
    const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
    const json = new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
    const [createdAt, id] = JSON.parse(json) as unknown[];
    if (typeof createdAt === 'string' && typeof id === 'string' && !Number.isNaN(Date.parse(createdAt)))
      return { createdAt: new Date(createdAt).toISOString(), id };
  } catch {
    // Reported below.
  }
  throw new ArgumentError('cursor is not one this console gave (use nextCursor of the previous page)');
}

/** The statuses in which a turn may wait for a person or for its sub-agents. */
const OPEN: readonly TurnStatus[] = ['running', 'waiting'];
const waitingIds = (turns: readonly TurnRecord[]) =>
  turns.filter((t) => OPEN.includes(t.status)).map((t) => t.id);

function summaryOf(turn: TurnRecord, waitingFor: ConsoleWaitReason | null = null): ConsoleTurnSummary {
  return {
    id: turn.id,
    conversationId: turn.conversationId,
    agentName: turn.agentName,
    status: turn.status,
    waitingFor: OPEN.includes(turn.status) ? waitingFor : null,
    parentTurnId: turn.parentTurnId,
    rootTurnId: turn.rootTurnId,
    principal: turn.options['principal'] ?? null,
    model: turn.model,
    tokens: turn.usage?.total_tokens ?? 0,
    cost: turn.cost,
    error: turn.error ? { class: turn.error.class, message: turn.error.message } : null,
    createdAt: turn.createdAt,
    startedAt: turn.startedAt,
    completedAt: turn.completedAt,
  };
}

/** Reads the list's filters from a query string; a bad one is an ArgumentError (400). */
export function parseTurnFilter(params: URLSearchParams): TurnListFilter {
  const filter: TurnListFilter = {};
  const text = (name: string) => {
    const value = params.get(name);
    return value === null || value.trim() === '' ? undefined : value.trim();
  };
  const agent = text('agent');
  if (agent) filter.agent = agent;
  const status = text('status');
  if (status) {
    if (!(TURN_STATUSES as readonly string[]).includes(status))
      throw new ArgumentError(`status must be one of ${TURN_STATUSES.join(', ')}, got ${status}`);
    filter.status = status as TurnStatus;
  }
  const principal = text('principal');
  if (principal) filter.principal = principal;
  const conversation = text('conversation');
  if (conversation) filter.conversation = conversation;
  for (const name of ['since', 'until'] as const) {
    const value = text(name);
    if (value === undefined) continue;
    const time = Date.parse(value);
    if (Number.isNaN(time)) throw new ArgumentError(`${name} must be a time (ISO 8601), got ${value}`);
    filter[name] = new Date(time).toISOString();
  }
  if (text('roots') === 'true' || text('roots') === '1') filter.roots = true;
  const order = text('order');
  if (order !== undefined) {
    if (order !== 'asc' && order !== 'desc')
      throw new ArgumentError(`order must be asc or desc, got ${order}`);
    filter.order = order;
  }
  const cursor = text('cursor');
  if (cursor !== undefined) filter.cursor = decodeCursor(cursor);
  const limit = text('limit');
  if (limit !== undefined) filter.limit = parseLimit(limit);
  return filter;
}

function parseLimit(limit: string): number {
  const n = Number(limit);
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIST_LIMIT)
    throw new ArgumentError(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${limit}`);
  return n;
}

/**
 * One console page of rows the scope allows: store pages are read from `after` on until the
 * page is full, the rows run out, or MAX_SCAN_PAGES were read (then the cursor marks how far).
 */
async function scopedPage<R>(
  fetch: (after: ConsoleKey | undefined, limit: number) => Promise<R[]>,
  keyOf: (row: R) => ConsoleKey,
  allowed: (row: R) => Promise<boolean>,
  after: ConsoleKey | undefined,
  limit: number,
): Promise<{ rows: R[]; next: ConsoleKey | null }> {
  const rows: R[] = [];
  let cursor = after;
  for (let scanned = 0; scanned < MAX_SCAN_PAGES; scanned += 1) {
    const batch = await fetch(cursor, limit);
    const verdicts = await Promise.all(batch.map(allowed));
    for (const [index, row] of batch.entries()) {
      cursor = keyOf(row);
      if (verdicts[index]) rows.push(row);
      if (rows.length === limit) return { rows, next: cursor };
    }
    if (batch.length < limit) return { rows, next: null };
  }
  return { rows, next: cursor ?? null };
}

/** A page of the turns the filter selects, newest first unless `order=asc`. */
export async function listTurnSummaries(
  reads: ConsoleReads,
  filter: TurnListFilter,
  scope: Scope,
): Promise<{ turns: ConsoleTurnSummary[] } & ConsolePage> {
  const { cursor, limit, ...query } = filter;
  const page = await scopedPage(
    (after, n) => reads.turns({ ...query, ...(after ? { after } : {}), limit: n }),
    (turn) => turn,
    (turn) => scope('read_control', turn),
    cursor,
    limit ?? DEFAULT_LIST_LIMIT,
  );
  const reasons = await reads.waitReasons(waitingIds(page.rows));
  return {
    turns: page.rows.map((turn) => summaryOf(turn, reasons.get(turn.id) ?? null)),
    nextCursor: page.next ? encodeCursor(page.next) : null,
  };
}

/** One conversation of the list: its agent, its newest turn, and its turns' count and spend. */
export interface ConsoleConversationSummary {
  id: string;
  agentName: string;
  turns: number;
  lastTurnId: string;
  lastStatus: TurnStatus;
  cost: number;
  tokens: number;
  createdAt: string;
  updatedAt: string;
}

/** A page of conversations, newest first, each aggregated over all its turns (in the store). */
export async function listConversations(
  reads: ConsoleReads,
  filter: TurnListFilter,
  scope: Scope,
): Promise<{ conversations: ConsoleConversationSummary[] } & ConsolePage> {
  const query = {
    ...(filter.agent ? { agent: filter.agent } : {}),
    ...(filter.principal ? { principal: filter.principal } : {}),
    ...(filter.since ? { since: filter.since } : {}),
    ...(filter.until ? { until: filter.until } : {}),
    ...(filter.roots ? { roots: true } : {}),
  };
  const page = await scopedPage(
    (after, limit) => reads.conversations({ ...query, ...(after ? { after } : {}), limit }),
    (row) => ({ createdAt: row.createdAt, id: row.id }),
    (row) => scope('read_control', row.lastTurn),
    filter.cursor,
    filter.limit ?? DEFAULT_LIST_LIMIT,
  );
  return {
    conversations: page.rows.map((row) => ({
      id: row.id,
      agentName: row.agentName,
      turns: row.turns,
      lastTurnId: row.lastTurn.id,
      lastStatus: row.lastTurn.status,
      cost: row.cost,
      tokens: row.tokens,
      createdAt: row.createdAt,
      updatedAt: row.lastTurn.completedAt ?? row.lastTurn.startedAt ?? row.lastTurn.createdAt,
    })),
    nextCursor: page.next ? encodeCursor(page.next) : null,
  };
}

/** One model call of a turn: its model, duration, tokens and cost. */
export interface ConsoleStep {
  index: number;
  model: string | null;
  startedAt: string;
  completedAt: string | null;
  durationMs: number | null;
  toolCalls: number;
  /** Tokens this call added to the turn's total. */
  tokens: number | null;
  inputTokens: number | null;
  outputTokens: number | null;
  cost: number | null;
}

/** One span of the turn's timeline: a model call, a tool call, a compaction, a wait. */
export interface ConsolePhase {
  kind: 'model' | 'tool' | 'approval' | 'compaction' | 'paused' | 'turn' | 'subagent';
  label: string;
  startedAt: string;
  completedAt: string | null;
  durationMs: number | null;
}

export interface ConsoleTurnPage {
  turn: Omit<ConsoleTurnSummary, 'error'> & {
    task: string | null;
    outputText: string | null;
    outputData: Json;
    error: JsonObject | null;
    usage: JsonObject | null;
  };
  /** The run's tree (root first, by creation; its first TREE_PAGE turns). */
  tree: ConsoleTurnSummary[];
  /** The turn's tool executions (its first EXECUTION_PAGE). */
  toolExecutions: ToolExecutionRecord[];
  steps: ConsoleStep[];
  timeline: ConsolePhase[];
  /** Whether the tree, executions or events were longer than a page (then only their start shows). */
  truncated: boolean;
  /** Pass it back as `since`: the answer is `{unchanged: true}` while nothing changed. */
  version: string;
  /** Links, when configured. */
  links: { temporal: string | null };
}

/** A page of the turn's transcript (its snapshot, then its own messages), oldest first. */
export interface ConsoleTranscriptPage {
  messages: MessageRecord[];
  /** The sequence to ask `after` for the next page; null when this page reached the end. */
  nextAfter: number | null;
}

const TREE_PAGE = 200;
const EXECUTION_PAGE = 500;
const EVENT_PAGE = 2_000;
const TRANSCRIPT_PAGE = 200;
const APPROVAL_PAGE = 50;

const ms = (from: string, to: string | null) => (to === null ? null : Date.parse(to) - Date.parse(from));
const num = (value: Json | undefined): number | null => (typeof value === 'number' ? value : null);

/** The model calls of a turn, from its `model.requested` / `model.completed` events. */
function stepsOf(events: readonly EventRecord[]): ConsoleStep[] {
  const steps: ConsoleStep[] = [];
  let open: ConsoleStep | null = null;
  let lastTotal = 0;
  for (const event of events) {
    if (event.type === 'model.requested') {
      open = {
        index: steps.length + 1,
        model: typeof event.payload['model'] === 'string' ? event.payload['model'] : null,
        startedAt: event.createdAt,
        completedAt: null,
        durationMs: null,
        toolCalls: 0,
        tokens: null,
        inputTokens: null,
        outputTokens: null,
        cost: null,
      };
      steps.push(open);
    } else if (event.type === 'model.completed' && open) {
      const usage = (event.payload['usage'] ?? {}) as JsonObject;
      // The event carries the turn's running total: the step's share is the difference.
      const total = num(usage['total_tokens']);
      open.completedAt = event.createdAt;
      open.durationMs = ms(open.startedAt, event.createdAt);
      if (typeof event.payload['model'] === 'string') open.model = event.payload['model'];
      open.toolCalls = num(event.payload['tool_call_count']) ?? 0;
      open.cost = num(event.payload['cost']);
      if (total !== null) {
        open.tokens = total - lastTotal;
        lastTotal = total;
      }
      open.inputTokens = num(usage['input_tokens']);
      open.outputTokens = num(usage['output_tokens']);
      open = null;
    }
  }
  return steps;
}

/** The turn's phases with their durations, oldest first. */
function timelineOf(
  turn: TurnRecord,
  events: readonly EventRecord[],
  executions: readonly ToolExecutionRecord[],
): ConsolePhase[] {
  const phases: ConsolePhase[] = [];
  const span = (kind: ConsolePhase['kind'], label: string, startedAt: string, completedAt: string | null) =>
    phases.push({ kind, label, startedAt, completedAt, durationMs: ms(startedAt, completedAt) });
  span('turn', `turn ${turn.status}`, turn.startedAt ?? turn.createdAt, turn.completedAt);
  for (const step of stepsOf(events))
    span(
      'model',
      `model call ${step.index}${step.model ? ` (${step.model})` : ''}`,
      step.startedAt,
      step.completedAt,
    );
  let compaction: string | null = null;
  let paused: string | null = null;
  const decided = new Map<string, string>();
  for (const event of events) {
    if (event.type === 'compaction.started') compaction = event.createdAt;
    else if ((event.type === 'compaction.completed' || event.type === 'compaction.failed') && compaction) {
      span(
        'compaction',
        event.type === 'compaction.failed' ? 'compaction (failed)' : 'compaction',
        compaction,
        event.createdAt,
      );
      compaction = null;
    } else if (event.type === 'turn.paused') paused = event.createdAt;
    else if (event.type === 'turn.resumed' && paused) {
      span('paused', 'paused', paused, event.createdAt);
      paused = null;
    } else if (event.type === 'approval.approved' || event.type === 'approval.rejected') {
      const id = event.payload['tool_call_id'];
      if (typeof id === 'string') decided.set(id, event.createdAt);
    }
  }
  if (paused) span('paused', 'paused', paused, null);
  for (const execution of executions) {
    const decision = decided.get(execution.toolCallId);
    if (execution.status === 'awaiting_approval' || decision)
      span('approval', `awaiting approval: ${execution.toolName}`, execution.createdAt, decision ?? null);
    if (execution.startedAt)
      span(
        'tool',
        `tool ${execution.toolName} ${execution.status}`,
        execution.startedAt,
        execution.completedAt ?? (execution.status === 'running' ? null : execution.updatedAt),
      );
  }
  return phases.sort((a, b) => a.startedAt.localeCompare(b.startedAt));
}

const versionOf = (turn: TurnRecord, lastEvent: number) => `${turn.updatedAt}/${lastEvent}`;

/**
 * A turn's page: the turn, its tree, tools, steps and timeline, each bounded by a page. With
 * `since` (the page's `version`), a turn where nothing happened since answers `{unchanged}`
 * after reading one turn row and at most one event (not a turn waiting on its sub-agents).
 */
export async function turnPage(
  store: Store,
  reads: ConsoleReads,
  turnId: string,
  options: { temporalLink: (turnId: string) => string | null; scope: Scope; since?: string },
): Promise<ConsoleTurnPage | { unchanged: true; version: string }> {
  const turn = await store.loadTurn(turnId);
  if (!(await options.scope('read_messages', turn))) throw new ScopeError();
  const since = options.since?.match(/^(.+)\/(\d+)$/);
  // A turn waiting on sub-agents changes through them: its page is read whole (it is bounded).
  const onChildren = async () =>
    turn.status === 'waiting' && (await store.listWaits({ turnId: turn.id })).length > 0;
  if (since && since[1] === turn.updatedAt && !(await onChildren())) {
    const seen = Number(since[2]);
    const newer = await store.listEvents(turn.id, { afterSequence: seen, limit: 1 });
    if (newer.length === 0) return { unchanged: true, version: versionOf(turn, seen) };
  }
  const [tree, toolExecutions, events, opening] = await Promise.all([
    store.listTurns({ rootTurnId: turn.rootTurnId, limit: TREE_PAGE + 1 }),
    reads.toolExecutions(turn.id, { limit: EXECUTION_PAGE + 1 }),
    store.listEvents(turn.id, { limit: EVENT_PAGE + 1 }),
    reads.transcript(turn, { afterSequence: Math.max(0, turn.contextMessageSequence - 1), limit: 8 }),
  ]);
  const truncated =
    tree.length > TREE_PAGE || toolExecutions.length > EXECUTION_PAGE || events.length > EVENT_PAGE;
  const shownTree = tree.slice(0, TREE_PAGE);
  const shownExecutions = toolExecutions.slice(0, EXECUTION_PAGE);
  const shownEvents = events.slice(0, EVENT_PAGE);
  const visibleTree = (
    await Promise.all(shownTree.map(async (t) => ((await options.scope('read_control', t)) ? t : null)))
  ).filter((t): t is TurnRecord => t !== null);
  const reasons = await reads.waitReasons([...new Set([...waitingIds([turn]), ...waitingIds(visibleTree)])]);
  const task = opening.find(
    (m) => m.role === 'user' && (m.turnId === turn.id || m.sequence === turn.contextMessageSequence),
  );
  return {
    turn: {
      ...summaryOf(turn, reasons.get(turn.id) ?? null),
      task: task ? textOf(task) : null,
      outputText: turn.outputText,
      outputData: turn.outputData,
      error: turn.error as JsonObject | null,
      usage: turn.usage as unknown as JsonObject | null,
    },
    tree: visibleTree.map((t) => summaryOf(t, reasons.get(t.id) ?? null)),
    toolExecutions: shownExecutions,
    steps: stepsOf(shownEvents),
    timeline: [
      ...timelineOf(turn, shownEvents, shownExecutions),
      // The sub-agents this turn started, each for as long as it ran.
      ...visibleTree
        .filter((child) => child.parentTurnId === turn.id)
        .map((child) => {
          const startedAt = child.startedAt ?? child.createdAt;
          return {
            kind: 'subagent' as const,
            label: `sub-agent ${child.agentName} ${child.status}`,
            startedAt,
            completedAt: child.completedAt,
            durationMs: child.completedAt ? Date.parse(child.completedAt) - Date.parse(startedAt) : null,
          };
        }),
    ].sort((a, b) => a.startedAt.localeCompare(b.startedAt)),
    truncated,
    version: versionOf(turn, shownEvents.at(-1)?.sequence ?? 0),
    links: { temporal: options.temporalLink(turn.id) },
  };
}

/** A page of a turn's transcript after sequence `after` (0: from the start). */
export async function transcriptPage(
  store: Store,
  reads: ConsoleReads,
  turnId: string,
  params: URLSearchParams,
  scope: Scope,
): Promise<ConsoleTranscriptPage> {
  const after = Number(params.get('after') ?? '0');
  if (!Number.isInteger(after) || after < 0)
    throw new ArgumentError(
      `after must be a message sequence (0 from the start), got ${params.get('after')}`,
    );
  const limitText = params.get('limit');
  const limit = limitText === null ? TRANSCRIPT_PAGE : parseLimit(limitText);
  const turn = await store.loadTurn(turnId);
  if (!(await scope('read_messages', turn))) throw new ScopeError();
  const messages = await reads.transcript(turn, { afterSequence: after, limit });
  return { messages, nextAfter: messages.length === limit ? messages.at(-1)!.sequence : null };
}

/** A page of a turn's tool executions, oldest first (`cursor`: the previous page's `nextCursor`). */
export async function executionPage(
  store: Store,
  reads: ConsoleReads,
  turnId: string,
  params: URLSearchParams,
  scope: Scope,
): Promise<{ toolExecutions: ToolExecutionRecord[] } & ConsolePage> {
  const cursor = params.get('cursor');
  const limitText = params.get('limit');
  const limit = limitText === null ? EXECUTION_PAGE : parseLimit(limitText);
  const turn = await store.loadTurn(turnId);
  if (!(await scope('read_messages', turn))) throw new ScopeError();
  const rows = await reads.toolExecutions(turn.id, {
    ...(cursor ? { after: decodeCursor(cursor) } : {}),
    limit,
  });
  return { toolExecutions: rows, nextCursor: rows.length === limit ? encodeCursor(rows.at(-1)!) : null };
}

/** A page of a turn's event log after event sequence `after` (0: from the start). */
export async function eventPage(
  store: Store,
  turnId: string,
  params: URLSearchParams,
  scope: Scope,
): Promise<{ events: EventRecord[]; nextAfter: number | null }> {
  const after = sequenceParam(params, 'after');
  const limitText = params.get('limit');
  const limit = limitText === null ? EVENT_PAGE : parseLimit(limitText);
  const turn = await store.loadTurn(turnId);
  if (!(await scope('read_messages', turn))) throw new ScopeError();
  const events = await store.listEvents(turn.id, { afterSequence: after, limit });
  return { events, nextAfter: events.length === limit ? events.at(-1)!.sequence : null };
}

function sequenceParam(params: URLSearchParams, name: string): number {
  const value = Number(params.get(name) ?? '0');
  if (!Number.isInteger(value) || value < 0)
    throw new ArgumentError(`${name} must be a sequence (0 from the start), got ${params.get(name)}`);
  return value;
}

/** A turn the scope does not let this principal read: the console answers as if it were absent. */
export class ScopeError extends Error {
  constructor() {
    super('not found');
  }
}

function textOf(message: MessageRecord): string {
  return message.content
    .map((part) => (part.type === 'text' ? part.text : ''))
    .join('')
    .slice(0, 500);
}

/** One call awaiting a decision, anywhere. */
export interface ConsoleApproval {
  turnId: string;
  rootTurnId: string;
  agentName: string;
  /** The principal the turn runs for. */
  principal: Json;
  toolCallId: string;
  toolName: string;
  arguments: JsonObject;
  requestedAt: string;
}

/** A page of the calls awaiting a person's decision across all unfinished turns, oldest first. */
export async function listApprovals(
  reads: ConsoleReads,
  params: URLSearchParams,
  scope: Scope,
): Promise<{ approvals: ConsoleApproval[] } & ConsolePage> {
  const cursor = params.get('cursor');
  const limit = params.get('limit');
  const page = await scopedPage(
    (after, n) => reads.awaitingApprovals({ ...(after ? { after } : {}), limit: n }),
    (call) => call.execution,
    (call) => scope('read_control', call.turn),
    cursor ? decodeCursor(cursor) : undefined,
    limit ? parseLimit(limit) : APPROVAL_PAGE,
  );
  return {
    approvals: page.rows.map(({ execution, turn }) => ({
      turnId: turn.id,
      rootTurnId: turn.rootTurnId,
      agentName: turn.agentName,
      principal: turn.options['principal'] ?? null,
      toolCallId: execution.toolCallId,
      toolName: execution.toolName,
      arguments: execution.arguments,
      requestedAt: execution.createdAt,
    })),
    nextCursor: page.next ? encodeCursor(page.next) : null,
  };
}
