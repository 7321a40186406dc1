/**
 * The events the engine appends to a turn's durable log (`turnkit_events`), typed, and the
 * live-stream parts they report. Events are appended with the write they report, in its
 * transaction, and handed to listeners after the commit (decisions 5, 86).
 */
import type {
  EventRecord,
  Json,
  JsonObject,
  MessageRecord,
  NewStreamPart,
  Store,
  StreamPartRecord,
  ToolExecutionRecord,
  TurnRecord,
} from '../../store/types.js';

/** Every event type the engine itself emits (tools may emit their own through `ToolContext.emit`). */
export type TurnEventType =
  | 'turn.started'
  | 'turn.reclaimed'
  | 'turn.completed'
  | 'turn.failed'
  | 'turn.cancelled'
  | 'turn.paused'
  | 'turn.resumed'
  | 'turn.steered'
  | 'turn.pause_requested'
  | 'turn.resume_requested'
  | 'turn.steer_requested'
  | 'message.created'
  | 'model.requested'
  | 'model.completed'
  | 'model.fallback'
  | 'tool_call.created'
  | 'tool_call.completed'
  | 'tool_call.failed'
  | 'tool_call.interrupted'
  | 'tool_call.skipped'
  | 'tool_call.superseded'
  | 'tool_call.approved'
  | 'tool_call.rejected'
  | 'tool_policy_blocked'
  | 'budget_completion.started'
  | 'approval.approved'
  | 'approval.rejected'
  | 'callback.created'
  | 'callback.denied'
  | 'cancel.denied'
  | 'cancel.rejected'
  | 'control.denied'
  | 'compaction.started'
  | 'compaction.completed'
  | 'compaction.failed'
  | 'output_policy.revision'
  | 'output_policy.completed'
  | 'output_policy.model.requested'
  | 'output_policy.model.completed';

export interface TurnEvent {
  readonly type: TurnEventType;
  readonly payload: JsonObject;
}

/** An event of the engine, or one a tool emitted (its type is the tool's own). */
export interface AnyTurnEvent {
  readonly type: string;
  readonly payload: JsonObject;
}

export function turnEvent(type: TurnEventType, payload: JsonObject = {}): TurnEvent {
  return { type, payload };
}

/** `message.created`: one payload shape for every message the engine writes. */
export function messageCreated(message: Pick<MessageRecord, 'id' | 'role' | 'kind'>): TurnEvent {
  return turnEvent('message.created', { message_id: message.id, role: message.role, kind: message.kind });
}

/** A tool result's output is cut to this many characters in its stream part (the store keeps it all). */
const TOOL_OUTPUT_CHARS = 16_000;

const STATUS_EVENTS: Partial<Record<string, string>> = {
  'turn.started': 'running',
  'turn.completed': 'completed',
  'turn.failed': 'failed',
  'turn.cancelled': 'cancelled',
};
const TOOL_RESULT_EVENTS: Partial<Record<string, string>> = {
  'tool_call.completed': 'completed',
  'tool_call.failed': 'failed',
  'tool_call.interrupted': 'interrupted',
  'tool_call.skipped': 'skipped',
};

type StreamTurn = Pick<TurnRecord, 'id' | 'rootTurnId'>;

/**
 * The stream parts that events report: a turn's status changes (and the run's `finish` with
 * the root's terminal status; a sub-agent's `running` with where it comes from), and each tool
 * call's result. Appended with the events, in their transaction.
 */
async function streamPartsForEvents(
  store: Store,
  turn: StreamTurn,
  events: readonly AnyTurnEvent[],
  known: readonly ToolExecutionRecord[],
): Promise<NewStreamPart[]> {
  const base = { rootTurnId: turn.rootTurnId, turnId: turn.id };
  const callIdOf = (payload: JsonObject) => (typeof payload['id'] === 'string' ? payload['id'] : null);
  // Only the executions these events report on and the caller does not hold, read once (a
  // long turn has thousands).
  const held = known.filter((row) => row.turnId === turn.id);
  const reported = events.flatMap(({ type, payload }) => {
    const id = TOOL_RESULT_EVENTS[type] ? callIdOf(payload) : null;
    return id === null || held.some((row) => row.toolCallId === id) ? [] : [id];
  });
  const executions = reported.length
    ? [...held, ...(await store.listToolExecutions({ turnId: turn.id, toolCallIds: reported }))]
    : held;
  const parts: NewStreamPart[] = [];
  for (const { type, payload } of events) {
    const status = STATUS_EVENTS[type];
    if (status) {
      const origin =
        status === 'running' && turn.id !== turn.rootTurnId ? await subAgentOrigin(store, turn.id) : {};
      parts.push({ ...base, type: 'status', payload: { status, ...origin } });
      if (turn.id === turn.rootTurnId && status !== 'running')
        parts.push({ ...base, type: 'finish', payload: { status } });
      continue;
    }
    const outcome = TOOL_RESULT_EVENTS[type];
    if (!outcome) continue;
    const id = callIdOf(payload);
    // The last row held for a call is its latest (a block may move one twice).
    const execution = executions.findLast((row) => row.toolCallId === id);
    parts.push({
      ...base,
      type: 'tool.result',
      payload: {
        tool_call_id: id,
        name: typeof payload['name'] === 'string' ? payload['name'] : (execution?.toolName ?? null),
        status: outcome,
        output: outcome === 'completed' ? bounded(execution?.result ?? null) : null,
        error: execution?.error?.message ?? (outcome === 'completed' ? null : outcome),
      },
    });
  }
  return parts;
}

/** A sub-agent's `running` part names the agent and the parent's turn and tool call that started it. */
async function subAgentOrigin(store: Store, turnId: string): Promise<JsonObject> {
  const child = await store.loadTurn(turnId);
  const execution = child.parentToolExecutionId
    ? await store.loadToolExecution(child.parentToolExecutionId).catch(() => null)
    : null;
  return {
    agent: child.agentName,
    parent_turn_id: child.parentTurnId,
    tool_call_id: execution?.toolCallId ?? null,
  };
}

function bounded(output: Json): Json {
  const text = JSON.stringify(output);
  return text.length <= TOOL_OUTPUT_CHARS
    ? output
    : { truncated: true, preview: text.slice(0, TOOL_OUTPUT_CHARS), chars: text.length };
}

/**
 * Appends events in one store transaction, in order, with the stream parts they report and
 * `parts`. `known`: executions the caller holds as they now stand (no read for their results).
 * Returns the events and the stream parts stored.
 */
export async function appendEvents(
  store: Store,
  turn: Pick<TurnRecord, 'id' | 'conversationId'> & { rootTurnId?: string },
  events: readonly AnyTurnEvent[],
  parts: readonly NewStreamPart[] = [],
  known: readonly ToolExecutionRecord[] = [],
  /** `parts` after those the events report (a claim's status before the step it opens). */
  partsLast = false,
): Promise<{ records: EventRecord[]; stored: StreamPartRecord[] }> {
  return store.atomic(null, async () => {
    const rootTurnId = turn.rootTurnId ?? (await store.loadTurn(turn.id)).rootTurnId;
    const reported = await streamPartsForEvents(store, { id: turn.id, rootTurnId }, events, known);
    const stored = await store.appendStreamParts(
      partsLast ? [...reported, ...parts] : [...parts, ...reported],
    );
    const records = await store.appendEvents({
      turnId: turn.id,
      conversationId: turn.conversationId,
      events,
    });
    return { records, stored };
  });
}
