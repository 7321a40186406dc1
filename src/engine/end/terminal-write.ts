import { LostClaim, storedErrorClass } from '../../errors.js';
import { nowIso } from '../../store/records.js';
import { TERMINAL_TURN_STATUSES } from '../../store/types.js';
import type {
  DeliveryRecord,
  Json,
  JsonObject,
  MessageRecord,
  Store,
  ToolExecutionRecord,
  TurnRecord,
  TurnUpdate,
} from '../../store/types.js';
import { appendAfterResults } from '../tools/after-results.js';
import { retakeClaim } from '../claim/claim.js';
import type { CallbackVerdict } from '../lane/lane-step.js';
import { callbackVerdict, completionCallback, laneHasWork, openWaiters } from '../lane/lane-step.js';
import type { Runtime } from '../runtime.js';
import { toolCallParts } from '../step/turn-state.js';
import type { OwnerInput, TerminalNotice, TurnErrorDigest } from '../../contract/digests.js';

export const OUTCOME_UNKNOWN =
  'interrupted: the worker stopped while this tool was running; its outcome is unknown, do not assume either way';

/** Appends a tool-result message unless one already reports this execution (idempotent). */
export async function appendToolResultOnce(
  store: Store,
  turn: TurnRecord,
  call: { id: string; name: string },
  executionId: string | null,
  payload: Json,
  error: boolean,
  metadata: JsonObject = {},
): Promise<MessageRecord | null> {
  if (executionId) {
    const existing = await store.listMessages(turn.conversationId, { toolExecutionId: executionId });
    if (existing.length > 0) return null;
  }
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

/**
 * CAS every pending/running execution of the turn to `interrupted` (spec §5.9). A call still
 * awaiting its approval never ran: it is `cancelled`, "not executed: <reason>".
 */
export async function interruptToolExecutions(
  store: Store,
  turn: TurnRecord,
  reason = 'turn was cancelled',
): Promise<ToolExecutionRecord[]> {
  const executions = await store.listToolExecutions({ turnId: turn.id });
  const interrupted: ToolExecutionRecord[] = [];
  for (const execution of executions) {
    if (execution.status === 'awaiting_approval') {
      await store.claimToolExecution(execution.id, {
        from: 'awaiting_approval',
        to: 'cancelled',
        result: { skipped: true, message: `not executed: ${reason}` },
        completedAt: nowIso(),
      });
      continue;
    }
    if (execution.status !== 'pending' && execution.status !== 'running') continue;
    const row = await store.claimToolExecution(execution.id, {
      from: ['pending', 'running'],
      to: 'interrupted',
      error: { message: OUTCOME_UNKNOWN },
      completedAt: nowIso(),
    });
    if (row) interrupted.push(row);
  }
  return interrupted;
}

/**
 * Gives every tool call of the turn exactly one result message (architecture §4.2): a
 * finished execution's real result, an interrupted one's "outcome unknown", and a call that
 * never ran a "not executed" error naming why.
 */
export async function repairTranscript(
  store: Store,
  turn: TurnRecord,
  reason: string,
): Promise<MessageRecord[]> {
  const messages = await store.listMessages(turn.conversationId, { throughSequence: 0, turnId: turn.id });
  const answered = new Set(
    messages.flatMap((message) =>
      message.kind === 'tool_result'
        ? message.content.flatMap((p) => (p.type === 'tool_result' ? [p.tool_call_id] : []))
        : [],
    ),
  );
  const executions = await store.listToolExecutions({ turnId: turn.id });
  const appended: MessageRecord[] = [];
  for (const message of messages) {
    if (message.kind !== 'tool_call') continue;
    for (const call of toolCallParts(message.content)) {
      if (answered.has(call.id)) continue;
      const execution = executions.find((row) => row.toolCallId === call.id);
      let payload: Json;
      let error = true;
      let interrupted = false;
      if (execution && (execution.status === 'completed' || execution.status === 'cancelled')) {
        payload = execution.result;
        error = false;
      } else if (execution && execution.status === 'failed') {
        payload = execution.error as unknown as Json;
      } else if (execution) {
        payload = { message: OUTCOME_UNKNOWN };
        interrupted = true;
      } else {
        payload = { message: `not executed: ${reason}` };
      }
      const row = await appendToolResultOnce(store, turn, call, execution?.id ?? null, payload, error, {
        interrupted,
      });
      if (row) appended.push(row);
      answered.add(call.id);
    }
  }
  // Every call has its result now: an image or analysis a finished call produced goes after them.
  return [...appended, ...(await appendAfterResults(store, turn))];
}

/** The rows of a terminal write, and what it must announce once they commit. */
export interface TerminalWrite {
  turn: TurnRecord;
  repaired: MessageRecord[];
  /** The executions this write interrupted (open when it ran). */
  interrupted: ToolExecutionRecord[];
  callback: { delivery: DeliveryRecord | null; denied: JsonObject | null };
}

/**
 * The one terminal write of a turn: interrupts what is still open, repairs the transcript,
 * creates the completion callback, clears the claim token (so this execution can never
 * write again) and sets the status — all in one transaction. Returns who must hear of it.
 */
export async function writeTerminal(
  runtime: Runtime,
  store: Store,
  turnId: string,
  attrs: TurnUpdate & { status: 'completed' | 'failed' | 'cancelled' },
  reason: string,
  decided?: CallbackVerdict,
): Promise<{ turn: TurnRecord; repaired: MessageRecord[]; callback: DeliveryRecord | null }> {
  // The policy's word on the callback comes before the transaction (or from the caller's, before its own).
  const verdict = decided ?? (await callbackVerdict(runtime, await store.loadTurn(turnId)));
  const result = await store.atomic(null, () => writeTerminalRows(store, turnId, attrs, reason, verdict));
  await announceTerminalWrite(runtime, result);
  return { turn: result.turn, repaired: result.repaired, callback: result.callback.delivery };
}

/**
 * The rows of `writeTerminal`, inside the caller's transaction (which may check the row
 * first, as the repair of a vanished workflow does); `announceTerminalWrite` after the commit.
 * `verdict` is the policy's word on the callback, asked before the transaction.
 */
export async function writeTerminalRows(
  store: Store,
  turnId: string,
  attrs: TurnUpdate & { status: 'completed' | 'failed' | 'cancelled' },
  reason: string,
  verdict: CallbackVerdict,
): Promise<TerminalWrite> {
  return store.atomic(null, async () => {
    const turn = await store.loadTurn(turnId);
    let repaired: MessageRecord[] = [];
    let interrupted: ToolExecutionRecord[] = [];
    if (attrs.status !== 'completed') {
      interrupted = await interruptToolExecutions(store, turn, reason);
      repaired = await repairTranscript(store, turn, reason);
    }
    const completedAt = nowIso();
    // The callback is written while the claim is still ours, from the row as it will be stored.
    const callback = await completionCallback(
      store,
      { ...turn, ...attrs, completedAt } as TurnRecord,
      verdict,
    );
    const options = callback.denied ? { ...turn.options, callback_denied: callback.denied } : undefined;
    const updated = await store.updateTurn(turnId, {
      ...attrs,
      ...(options ? { options } : {}),
      claimToken: null,
      completedAt,
    });
    return { turn: updated, repaired, interrupted, callback };
  });
}

/** The events of a committed terminal write: its repaired transcript, its callback. */
export async function announceTerminalWrite(runtime: Runtime, write: TerminalWrite): Promise<void> {
  for (const message of write.repaired) {
    await runtime.emit(write.turn, 'message.created', {
      message_id: message.id,
      role: message.role,
      kind: message.kind,
    });
  }
  await emitCallback(runtime, write.turn, write.callback);
}

export async function emitCallback(
  runtime: Runtime,
  turn: TurnRecord,
  callback: { delivery: DeliveryRecord | null; denied: JsonObject | null },
): Promise<void> {
  if (callback.delivery) {
    await runtime.emit(turn, 'callback.created', {
      delivery_id: callback.delivery.id,
      destination_conversation_id: callback.delivery.destinationConversationId,
    });
  }
  if (callback.denied) await runtime.emit(turn, 'callback.denied', callback.denied);
}

/**
 * After a terminal write has committed: the turns waiting on it, and the lanes with
 * something to do (the callback's destination; its own conversation when work queued up).
 */
export async function terminalNotice(
  store: Store,
  turn: TurnRecord,
  callback: DeliveryRecord | null,
): Promise<TerminalNotice> {
  const lanes: string[] = [];
  if (callback) lanes.push(callback.destinationConversationId);
  if (turn.submittedAt !== null && (await laneHasWork(store, turn.conversationId, turn.id)))
    lanes.push(turn.conversationId);
  return { waiters: await openWaiters(store, turn.id), lanes: [...new Set(lanes)] };
}

/**
 * The notice of a terminal write that already committed, for a step that runs again after
 * its worker died between the commit and the step's result (a `turn.completed` listener that
 * exits the process, BG-14): the waiters and lanes, with the completion callback's
 * destination while that delivery is still undelivered. Null while the turn is not terminal.
 */
export async function repeatedNotice(runtime: Runtime, turnId: string): Promise<TerminalNotice | null> {
  const store = runtime.store;
  const turn = await store.loadTurn(turnId);
  if (!TERMINAL_TURN_STATUSES.includes(turn.status)) return null;
  const callback = (await store.listDeliveries({ sourceConversationId: turn.conversationId })).find(
    (delivery) => delivery.key === `completion:${turn.id}` && delivery.deliveredAt === null,
  );
  return terminalNotice(store, turn, callback ?? null);
}

/**
 * Fails the turn durably with a typed error (no-op when the claim is gone). A turn that is
 * suspended waiting (claim released) is taken back by its own run first, so a root timeout
 * during a join fails it instead of leaving it waiting.
 */
export async function failTurn(
  runtime: Runtime,
  input: OwnerInput & { error: TurnErrorDigest },
): Promise<{ status: string; notice?: TerminalNotice }> {
  try {
    const retaken = await retakeClaim(runtime, input, ['waiting', 'pending', 'paused']);
    const { store } = await runtime.ownTurn(input, retaken ?? undefined);
    const error = { class: storedErrorClass(input.error.class), message: input.error.message };
    const { turn, callback } = await writeTerminal(
      runtime,
      store,
      input.turnId,
      { status: 'failed', error },
      `turn failed: ${error.message}`,
    );
    await runtime.emit(turn, 'turn.failed', { error });
    return { status: turn.status, notice: await terminalNotice(runtime.store, turn, callback) };
  } catch (error) {
    if (!(error instanceof LostClaim)) throw error;
    // Terminal already (this step's commit, or a cancel): tell whoever must hear of it again.
    const notice = await repeatedNotice(runtime, input.turnId);
    const status = (await runtime.store.loadTurn(input.turnId)).status;
    return notice ? { status, notice } : { status };
  }
}
