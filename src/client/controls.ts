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
import type { ControlAction } from '../engine/control-request.js';
import { signPrincipal } from '../engine/principal-signature.js';
import { ArgumentError, AuthorizationError, ControlError } from '../errors.js';
import type { Json, JsonObject, Store, ToolExecutionRecord } from '../store/types.js';
import { TERMINAL_TURN_STATUSES } from '../store/types.js';
import { turnWorkflowId, UPDATES } from '../workflows/contract.js';

/** One call awaiting a person's decision, as `run.pendingApprovals()` lists it. */
export interface PendingApproval {
  toolCallId: string;
  toolName: string;
  arguments: JsonObject;
  requestedAt: string;
}

export function pendingApproval(row: ToolExecutionRecord): PendingApproval {
  return {
    toolCallId: row.toolCallId,
    toolName: row.toolName,
    arguments: row.arguments,
    requestedAt: row.createdAt,
  };
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
  const principal = fields.principal ?? null;
  const payload: JsonObject = { ...fields, principal };
  if (sender.signingKey !== undefined)
    payload['signature'] = signPrincipal(sender.signingKey, { turnId, action, principal }) as unknown as Json;
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
export function controlError(turnId: string, action: ControlAction, error: unknown): unknown {
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
