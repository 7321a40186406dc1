/**
 * The activities of a schedule's firing workflow: write the firing's turn, and cancel it
 * (overlap `cancel_other`) as the schedule's principal.
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { CancelDescendants, CancelRequest } from '../contract/cancel-request.js';
import type { Json } from '../store/types.js';
import { signedCancelParams } from '../contract/cancel-request.js';
import { asSent, signPrincipal } from '../engine/controls/principal-signature.js';
import type { Runtime } from '../engine/runtime.js';
import { prepareScheduledTurn } from '../engine/schedule/firing.js';
import type { TurnActivities } from '../workflows/contract.js';
import { cancelSignal, turnWorkflowId } from '../workflows/contract.js';

type ScheduleActivities = Pick<TurnActivities, 'prepareScheduledTurn' | 'cancelScheduledTurn'>;

export function scheduleActivities(
  runtime: Runtime,
  mappingFailures: <T>(fn: () => Promise<T>) => Promise<T>,
): ScheduleActivities {
  return {
    prepareScheduledTurn: (input) =>
      mappingFailures(() => prepareScheduledTurn(runtime, Context.current().client, input)),

    cancelScheduledTurn: (input) =>
      mappingFailures(() => sendCancel(runtime, input.turnId, input.principal ?? null, 'retain')),
  };
}

/**
 * The `cancel` signal a client would send, signed with this worker's key when it holds one:
 * the turn's own handler authorizes it with the policy, as any cancel.
 */
export async function sendCancel(
  runtime: Runtime,
  turnId: string,
  principal: Json,
  descendants: CancelDescendants,
): Promise<void> {
  const request: CancelRequest = { descendants, principal: asSent(principal) };
  if (runtime.signingKey !== undefined)
    request.signature = signPrincipal(runtime.signingKey, {
      turnId,
      action: 'cancel',
      principal: request.principal,
      params: signedCancelParams(request),
    });
  try {
    await Context.current().client.workflow.getHandle(turnWorkflowId(turnId)).signal(cancelSignal, request);
  } catch (error) {
    // Its workflow ended meanwhile: nothing to cancel.
    if (!(error instanceof WorkflowNotFoundError)) throw error;
  }
}
