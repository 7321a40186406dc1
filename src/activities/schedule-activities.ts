/**
 * The activities of a schedule's firing workflow: write the firing's turn, and cancel it
 * (overlap `cancel_other`) as the schedule's principal.
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { CancelRequest } from '../contract/cancel-request.js';
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

    // The `cancel` signal a client would send, signed with this worker's key when it holds
    // one: the turn's own handler authorizes it with the policy, as any cancel.
    cancelScheduledTurn: (input) =>
      mappingFailures(async () => {
        const request: CancelRequest = { descendants: 'retain', principal: asSent(input.principal ?? null) };
        if (runtime.signingKey !== undefined)
          request.signature = signPrincipal(runtime.signingKey, {
            turnId: input.turnId,
            action: 'cancel',
            principal: request.principal,
            params: signedCancelParams(request),
          });
        try {
          await Context.current()
            .client.workflow.getHandle(turnWorkflowId(input.turnId))
            .signal(cancelSignal, request);
        } catch (error) {
          // Its workflow ended meanwhile: nothing to cancel.
          if (!(error instanceof WorkflowNotFoundError)) throw error;
        }
      }),
  };
}
