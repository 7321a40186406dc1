/**
 * Each tool call of a response gets exactly one result message (spec §4.4, architecture
 * §4.2): the one place that knows which result a row reports and how a call that never ran
 * is closed. The tool runner, the tools phase, steering, the transcript repair and cancel
 * all go through it, so a new execution status touches this file only.
 */
import { nowIso } from '../../store/records.js';
import { isOpenToolExecution } from '../../store/types.js';
import { outcomeUnknown } from './result-texts.js';
import type {
  Json,
  JsonObject,
  MessageRecord,
  Store,
  ToolExecutionRecord,
  ToolExecutionStatus,
  TurnRecord,
} from '../../store/types.js';

interface Call {
  id: string;
  name: string;
  arguments: JsonObject;
}

/** Appends a tool-result message unless one already reports this execution (idempotent). */
export async function appendToolResultOnce(
  store: Store,
  turn: TurnRecord,
  call: Pick<Call, 'id' | 'name'>,
  executionId: string | null,
  payload: Json,
  error: boolean,
  metadata: JsonObject = {},
): Promise<MessageRecord | null> {
  if (executionId) {
    const existing = await store.listMessages(turn.conversationId, { toolExecutionId: executionId });
    if (existing.length > 0) return null;
  }
  return appendToolResult(store, turn, call, executionId, payload, error, metadata);
}

/**
 * Appends a tool-result message with no check: for the block whose compare-and-set just
 * closed the execution from an open status. No result can report it yet: every other writer
 * of one appends it for a row that is closed already (or closes it first, under the root
 * lock), and a terminal write, which repairs the transcript, clears the claim the block
 * checked.
 */
export function appendToolResult(
  store: Store,
  turn: TurnRecord,
  call: Pick<Call, 'id' | 'name'>,
  executionId: string | null,
  payload: Json,
  error: boolean,
  metadata: JsonObject = {},
): Promise<MessageRecord> {
  return store.appendMessage({
    conversationId: turn.conversationId,
    turnId: turn.id,
    role: 'tool',
    kind: 'tool_result',
    content: [{ type: 'tool_result', tool_call_id: call.id, text: JSON.stringify(payload), error }],
    toolExecutionId: executionId,
    metadata: { tool_name: call.name, ...metadata },
  });
}

/** What a finished row reports: its result (a skipped call's is not an error) or its error. */
export function resultOf(row: ToolExecutionRecord): { payload: Json; error: boolean } {
  return {
    payload: (row.result ?? row.error) as Json,
    error: row.status !== 'completed' && row.status !== 'cancelled',
  };
}

/** The one result of a finished row, appended unless it exists already. */
export function appendResultOf(
  store: Store,
  turn: TurnRecord,
  call: Pick<Call, 'id' | 'name'>,
  row: ToolExecutionRecord,
): Promise<MessageRecord | null> {
  const { payload, error } = resultOf(row);
  return appendToolResultOnce(store, turn, call, row.id, payload, error);
}

/** A call that never ran is `cancelled`, with `{skipped: true, message}` as its result. */
function cancelUnrun(
  store: Store,
  row: ToolExecutionRecord,
  from: ToolExecutionStatus[],
  payload: JsonObject,
): Promise<ToolExecutionRecord | null> {
  return store.claimToolExecution(row.id, { from, to: 'cancelled', result: payload, completedAt: nowIso() });
}

/**
 * Closes a call that has not run (no row yet, or one still pending or awaiting its approval)
 * with `message` as its skipped result, and appends that result (unless `deferred`: a later
 * dispatch in call order appends it). Null when the row was no longer unrun (a running one
 * stays open for whoever runs it).
 */
export async function closeUnrun(
  store: Store,
  turn: TurnRecord,
  call: Call,
  row: ToolExecutionRecord | undefined,
  message: string,
  deferred = false,
): Promise<{ row: ToolExecutionRecord; message: MessageRecord | null } | null> {
  const open =
    row ??
    (await store.createToolExecution({
      turnId: turn.id,
      toolCallId: call.id,
      toolName: call.name,
      arguments: call.arguments,
      status: 'pending',
    }));
  const payload = { skipped: true, message };
  const closed = await cancelUnrun(store, open, ['pending', 'awaiting_approval'], payload);
  if (!closed) return null;
  if (deferred) return { row: closed, message: null };
  return { row: closed, message: await appendToolResultOnce(store, turn, call, closed.id, payload, false) };
}

/**
 * CAS every open execution of the turn (spec §5.9): a pending or running one becomes
 * `interrupted` (its outcome unknown), one still awaiting its approval never ran and is
 * `cancelled`, "not executed: <reason>". Returns the interrupted rows; their results are
 * the transcript repair's to append.
 */
export async function interruptOpen(
  store: Store,
  turn: TurnRecord,
  reason = 'turn was cancelled',
): Promise<ToolExecutionRecord[]> {
  const executions = await store.listToolExecutions({ turnId: turn.id });
  const interrupted: ToolExecutionRecord[] = [];
  for (const execution of executions) {
    if (!isOpenToolExecution(execution)) continue;
    if (execution.status === 'awaiting_approval') {
      await cancelUnrun(store, execution, ['awaiting_approval'], {
        skipped: true,
        message: `not executed: ${reason}`,
      });
      continue;
    }
    const row = await store.claimToolExecution(execution.id, {
      from: ['pending', 'running'],
      to: 'interrupted',
      error: { message: outcomeUnknown(reason) },
      completedAt: nowIso(),
    });
    if (row) interrupted.push(row);
  }
  return interrupted;
}
