/**
 * What the web console shows, read from the store (decision 46): turn summaries for the lists,
 * a turn's page (transcript, tree, tool executions, per-step usage, phase timeline) and the
 * calls awaiting approval across all runs. Plain JSON for the browser; nothing of Temporal.
 */
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

/** The list's filters, from the query string. */
export interface TurnListFilter {
  agent?: string;
  status?: TurnStatus;
  /** A substring of the principal's canonical JSON (an id, a tenant). */
  principal?: string;
  conversation?: string;
  /** ISO times: created at or after `since`, before `until`. */
  since?: string;
  until?: string;
  /** Only turns no other turn started (default false: all). */
  roots?: boolean;
  limit?: number;
}

const DEFAULT_LIST_LIMIT = 200;
const MAX_LIST_LIMIT = 1_000;

function summaryOf(turn: TurnRecord): ConsoleTurnSummary {
  return {
    id: turn.id,
    conversationId: turn.conversationId,
    agentName: turn.agentName,
    status: turn.status,
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
  const limit = text('limit');
  if (limit !== undefined) {
    const n = Number(limit);
    if (!Number.isInteger(n) || n < 1 || n > MAX_LIST_LIMIT)
      throw new ArgumentError(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${limit}`);
    filter.limit = n;
  }
  return filter;
}

/** The turns the filter selects, newest first. */
export async function listTurnSummaries(store: Store, filter: TurnListFilter): Promise<ConsoleTurnSummary[]> {
  const rows = await store.listTurns({
    ...(filter.agent ? { agentName: filter.agent } : {}),
    ...(filter.status ? { status: filter.status } : {}),
    ...(filter.conversation ? { conversationId: filter.conversation } : {}),
  });
  const needle = filter.principal?.toLowerCase();
  return rows
    .filter(
      (turn) =>
        (!filter.roots || turn.parentTurnId === null) &&
        (!filter.since || turn.createdAt >= filter.since) &&
        (!filter.until || turn.createdAt < filter.until) &&
        (!needle ||
          JSON.stringify(turn.options['principal'] ?? null)
            .toLowerCase()
            .includes(needle)),
    )
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id))
    .slice(0, filter.limit ?? DEFAULT_LIST_LIMIT)
    .map(summaryOf);
}

/** One conversation of the list: its turns' agent, count, last status and spend. */
export interface ConsoleConversationSummary {
  id: string;
  agentName: string;
  turns: number;
  lastTurnId: string;
  lastStatus: TurnStatus;
  cost: number;
  tokens: number;
  updatedAt: string;
}

/** The conversations of the selected turns, most recently active first. */
export function conversationsOf(turns: readonly ConsoleTurnSummary[]): ConsoleConversationSummary[] {
  const byId = new Map<string, ConsoleConversationSummary>();
  // Newest turn first: the first one seen is the conversation's last.
  for (const turn of turns) {
    const seen = byId.get(turn.conversationId);
    if (seen) {
      seen.turns += 1;
      seen.cost += turn.cost;
      seen.tokens += turn.tokens;
      continue;
    }
    byId.set(turn.conversationId, {
      id: turn.conversationId,
      agentName: turn.agentName,
      turns: 1,
      lastTurnId: turn.id,
      lastStatus: turn.status,
      cost: turn.cost,
      tokens: turn.tokens,
      updatedAt: turn.completedAt ?? turn.startedAt ?? turn.createdAt,
    });
  }
  return [...byId.values()];
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
  /** Every turn of the run's tree (root first, by creation). */
  tree: ConsoleTurnSummary[];
  /** The turn's view of its conversation: what it read and what it wrote. */
  messages: MessageRecord[];
  toolExecutions: ToolExecutionRecord[];
  steps: ConsoleStep[];
  timeline: ConsolePhase[];
  /** Links, when configured. */
  links: { temporal: string | null };
}

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

/** A turn's page: the turn, its tree, its transcript, tools, steps and timeline. */
export async function turnPage(
  store: Store,
  turnId: string,
  temporalLink: (turnId: string) => string | null,
): Promise<ConsoleTurnPage> {
  const turn = await store.loadTurn(turnId);
  const [tree, messages, toolExecutions, events] = await Promise.all([
    store.listTurns({ rootTurnId: turn.rootTurnId }),
    store.listMessages(turn.conversationId, {
      throughSequence: turn.contextMessageSequence,
      turnId: turn.id,
    }),
    store.listToolExecutions({ turnId: turn.id }),
    store.listEvents(turn.id),
  ]);
  const task = messages.find((m) => m.turnId === turn.id && m.role === 'user') ?? null;
  return {
    turn: {
      ...summaryOf(turn),
      task: task ? textOf(task) : null,
      outputText: turn.outputText,
      outputData: turn.outputData,
      error: turn.error as JsonObject | null,
      usage: turn.usage as unknown as JsonObject | null,
    },
    tree: tree.map(summaryOf),
    messages,
    toolExecutions,
    steps: stepsOf(events),
    timeline: [
      ...timelineOf(turn, events, toolExecutions),
      // The sub-agents this turn started, each for as long as it ran.
      ...tree
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
    links: { temporal: temporalLink(turn.id) },
  };
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
  toolCallId: string;
  toolName: string;
  arguments: JsonObject;
  requestedAt: string;
}

/** The calls awaiting a person's decision across all unfinished turns, oldest first. */
export async function listApprovals(store: Store): Promise<ConsoleApproval[]> {
  const turns = await store.listTurns({ status: ['running', 'waiting', 'paused', 'pending'] });
  if (turns.length === 0) return [];
  const byId = new Map(turns.map((turn) => [turn.id, turn]));
  const rows = await store.listToolExecutions({ turnIds: [...byId.keys()] });
  return rows
    .filter((row) => row.status === 'awaiting_approval')
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
    .map((row) => ({
      turnId: row.turnId,
      rootTurnId: byId.get(row.turnId)!.rootTurnId,
      agentName: byId.get(row.turnId)!.agentName,
      toolCallId: row.toolCallId,
      toolName: row.toolName,
      arguments: row.arguments,
      requestedAt: row.createdAt,
    }));
}
