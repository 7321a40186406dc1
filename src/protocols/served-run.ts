/**
 * A run as a protocol door starts and reports it: the task text and structured input a caller
 * sends, checked before anything is written, and the turn's state as the three protocols'
 * task states (working, input required, and the terminal ones) with its output.
 */
import type { PendingApproval } from '../client/controls.js';
import type { RunHandle } from '../client/run-handle.js';
import type { TurnKitClient } from '../client/turnkit-client.js';
import { ArgumentError, ConversationBusyError } from '../errors.js';
import type { Json, JsonObject, TurnRecord } from '../store/types.js';
import { TERMINAL_TURN_STATUSES } from '../store/types.js';

/** The protocols' common task states. */
export type ServedState = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** Where a served run stands: its state, the approvals it waits on, and once ended its output. */
export interface ServedRun {
  turn: TurnRecord;
  state: ServedState;
  approvals: PendingApproval[];
}

const MAX_TASK_CHARS = 100_000;

/** The task text of a call: a non-empty string up to 100,000 characters, else an ArgumentError. */
export function taskTextOf(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '')
    throw new ArgumentError('the call needs a task: a non-empty string');
  if (value.length > MAX_TASK_CHARS)
    throw new ArgumentError(`the task is longer than ${MAX_TASK_CHARS} characters`);
  return value;
}

/** Starts `agent` on `task` for `principal` through the client, as any application would. */
export function startServedRun(
  client: TurnKitClient,
  agent: string,
  task: string,
  principal: Json,
  door: string,
  input?: Json,
): Promise<RunHandle> {
  return client.run(agent, task, {
    principal,
    metadata: { protocol: door },
    ...(input !== undefined ? { input } : {}),
  });
}

/**
 * Posts `text` to one of the caller's conversations (`post`, authorized as such) and returns
 * the turn it started; a busy conversation is refused before anything is written.
 */
export async function postServedRun(
  client: TurnKitClient,
  conversationId: string,
  text: string,
  principal: Json,
  requestId: string,
): Promise<RunHandle> {
  const receipt = await client.post(conversationId, text, {
    principal,
    requestId: requestId.slice(0, 200),
    policy: 'reject',
  });
  if (receipt.turnId === null) throw new ConversationBusyError(`conversation ${conversationId} is busy`);
  return client.handle(receipt.turnId);
}

/** The state of a root turn: `input_required` while a call of its tree awaits approval. */
export async function servedRun(client: TurnKitClient, turn: TurnRecord): Promise<ServedRun> {
  if (TERMINAL_TURN_STATUSES.includes(turn.status))
    return { turn, approvals: [], state: terminalState(turn) };
  const approvals = await (await client.handle(turn)).pendingApprovals();
  return { turn, approvals, state: approvals.length > 0 ? 'input_required' : 'working' };
}

function terminalState(turn: TurnRecord): ServedState {
  if (turn.status === 'completed') return 'completed';
  if (turn.status === 'cancelled') return 'cancelled';
  return 'failed';
}

/** What a person reads of a run's state: the calls awaiting approval, or why it failed. */
export function stateMessage(run: ServedRun): string | undefined {
  if (run.state === 'input_required')
    return `awaiting approval: ${run.approvals.map((a) => `${a.toolName} (call ${a.toolCallId})`).join(', ')}`;
  if (run.state === 'failed') return errorText(run.turn);
  if (run.state === 'cancelled') return 'the run was cancelled';
  return undefined;
}

/** The turn's error as one line. */
export function errorText(turn: TurnRecord): string {
  return turn.error ? `${turn.error.class}: ${turn.error.message}` : `the run ended ${turn.status}`;
}

/** The structured output of a completed turn, when it is an object. */
export function outputObject(turn: TurnRecord): JsonObject | undefined {
  const data = turn.outputData;
  return data !== null && typeof data === 'object' && !Array.isArray(data) ? data : undefined;
}
