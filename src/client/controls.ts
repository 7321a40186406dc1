/**
 * Sending a person's controls to a turn's workflow as Temporal Updates, signing the principal
 * when the client holds the key, and turning a refusal into the TurnKit error it names.
 */
import type { Client } from '@temporalio/client';
import {
  isGrpcServiceError,
  ServiceError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { ControlAction } from '../contract/control-request.js';
import { parseControlRequest, signedParams } from '../contract/control-request.js';
import { asSent, signPrincipal } from '../engine/controls/principal-signature.js';
import { ArgumentError, AuthorizationError, ControlError } from '../errors.js';
import type { Json, JsonObject, Store, TurnRecord } from '../store/types.js';
import { subtreeOf } from '../store/tree.js';
import { TERMINAL_TURN_STATUSES } from '../store/types.js';
import type { ApprovalResult } from '../workflows/contract.js';
import { turnWorkflowId, UPDATES } from '../workflows/contract.js';

/** One call awaiting a person's decision, as `run.pendingApprovals()` lists it. */
export interface PendingApproval {
  toolCallId: string;
  toolName: string;
  arguments: JsonObject;
  requestedAt: string;
  /** The turn the call belongs to: the run's own, or a sub-agent's (a child turn) below it. */
  turnId: string;
  agentName: string;
}

/** What `approve` and `reject` answer: the workflow's result and the turn that decided. */
export type ApprovalAnswer = ApprovalResult & { turnId: string };

/** The calls awaiting approval in `turn` and every turn below it, oldest first. */
export async function pendingApprovals(store: Store, turn: TurnRecord): Promise<PendingApproval[]> {
  const tree = subtreeOf(await store.listTurns({ rootTurnId: turn.rootTurnId }), turn.id);
  const agents = new Map(tree.map((row) => [row.id, row.agentName]));
  const rows = await store.listToolExecutions({ turnIds: [...agents.keys()] });
  return rows
    .filter((row) => row.status === 'awaiting_approval')
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
    .map((row) => ({
      toolCallId: row.toolCallId,
      toolName: row.toolName,
      arguments: row.arguments,
      requestedAt: row.createdAt,
      turnId: row.turnId,
      agentName: agents.get(row.turnId) ?? '',
    }));
}

/**
 * Which turn a decision on `toolCallId` goes to, from a handle on `turn`: the one turn of its
 * subtree where the call awaits approval (or, when it awaits nowhere, the one turn that has
 * the call, whose workflow then says why: decided, not awaiting, finished). A call id that
 * two turns share needs `turnId`; an unknown one goes to `turn` itself (refused `unknown_call`).
 */
export async function decisionTarget(
  store: Store,
  turn: TurnRecord,
  toolCallId: string,
  turnId?: string,
): Promise<string> {
  const tree = subtreeOf(await store.listTurns({ rootTurnId: turn.rootTurnId }), turn.id);
  if (turnId !== undefined) {
    if (!tree.some((row) => row.id === turnId))
      throw new ArgumentError(`turn ${turnId} is not ${turn.id} or a turn below it`);
    return turnId;
  }
  const rows = (await store.listToolExecutions({ turnIds: tree.map((row) => row.id) })).filter(
    (row) => row.toolCallId === toolCallId,
  );
  const awaiting = rows.filter((row) => row.status === 'awaiting_approval');
  const candidates = new Set((awaiting.length > 0 ? awaiting : rows).map((row) => row.turnId));
  if (candidates.size > 1)
    throw new ControlError(
      `tool call ${toolCallId} is in several turns (${[...candidates].join(', ')}): say which with turnId`,
      { code: 'ambiguous_call' },
    );
  return [...candidates][0] ?? turn.id;
}

export interface ControlSender {
  store: Store;
  temporal: Client;
  signingKey: string | Buffer | undefined;
}

/** Sends one control as its Update and returns the Update's result; refusals are typed errors. */
export async function sendControl(
  sender: ControlSender,
  turnId: string,
  action: ControlAction,
  fields: JsonObject & { principal?: Json },
): Promise<unknown> {
  const turn = await sender.store.loadTurn(turnId);
  if (TERMINAL_TURN_STATUSES.includes(turn.status))
    throw new ControlError(`turn ${turnId} is finished (${turn.status})`, { code: 'finished' });
  // The JSON copy the workflow will read: what is authorized and signed here is exactly that.
  const payload = asSent<JsonObject>({ ...fields, principal: fields.principal ?? null });
  const principal = payload['principal'] ?? null;
  // Checked here as the workflow's validator will, so that what is signed is what it reads.
  const parsed = parseControlRequest(action, payload);
  if (!parsed.ok) throw new ArgumentError(parsed.reason);
  if (sender.signingKey !== undefined) {
    const request = { turnId, action, principal, params: signedParams(parsed.value) };
    payload['signature'] = signPrincipal(sender.signingKey, request) as unknown as Json;
  }
  const handle = sender.temporal.workflow.getHandle(turnWorkflowId(turnId));
  for (let wait = 100, since = Date.now(); ; wait = Math.min(wait * 2, 2_000)) {
    try {
      return await handle.executeUpdate(UPDATES[action], { args: [payload] });
    } catch (error) {
      // The server refuses Updates while the workflow task is being retried (its worker was
      // lost): the replacement takes it within seconds, then the Update goes through.
      if (!workflowTaskFailing(error) || Date.now() - since > UPDATE_RETRY_MS)
        throw controlError(turnId, action, error);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/** How long a control is retried while the workflow task is being retried (worker lost). */
const UPDATE_RETRY_MS = 60_000;
const GRPC_FAILED_PRECONDITION = 9;

function workflowTaskFailing(error: unknown): boolean {
  const cause = error instanceof ServiceError ? error.cause : error;
  return (
    isGrpcServiceError(cause) &&
    cause.code === GRPC_FAILED_PRECONDITION &&
    /workflow task in failed state/i.test(cause.details ?? cause.message)
  );
}

/** The TurnKit error behind an Update's failure: the type the workflow gave its ApplicationFailure. */
function controlError(turnId: string, action: ControlAction, error: unknown): unknown {
  if (
    error instanceof WorkflowNotFoundError ||
    /already completed|not found/i.test(String((error as Error)?.message))
  )
    return new ControlError(`turn ${turnId} has no running workflow to ${action}`, {
      code: 'finished',
      cause: error,
    });
  if (!(error instanceof WorkflowUpdateFailedError)) return error;
  const cause = error.cause;
  if (!(cause instanceof ApplicationFailure)) return error;
  const code = (cause.details?.[0] as { code?: string } | undefined)?.code;
  if (cause.type === 'ArgumentError') return new ArgumentError(cause.message, { cause: error });
  if (cause.type === 'AuthorizationError') return new AuthorizationError(cause.message, { cause: error });
  return new ControlError(cause.message, { ...(code ? { code } : {}), cause: error });
}
