/**
 * The handler of TurnKit's Nexus service: `runTurn` starts `agentCallWorkflow` on the handling
 * worker's task queue (its id derived from the Nexus request, so a retried start finds the
 * same workflow); a cancel from the caller cancels that workflow, which cancels the turn.
 */
import * as nexus from 'nexus-rpc';
import { WorkflowRunOperationHandler, startWorkflow } from '@temporalio/nexus';
import type { AgentTurnDigest } from './contract/agent-call.js';
import type { RunTurnInput } from './contract/nexus-service.js';
import { turnkitNexusService } from './contract/nexus-service.js';
import type { TurnSettings } from './workflows/contract.js';

/** The workflow id of the agent call a Nexus request starts. */
export function nexusCallWorkflowId(requestId: string): string {
  return `turnkit-call-${requestId}`;
}

export interface TurnKitNexusOptions {
  /** Where the call's workflow runs; default the task queue the endpoint targets. */
  taskQueue?: string;
  /** Activity timeouts and retries of the turns it runs. */
  settings?: TurnSettings;
}

/** The `turnkit` Nexus service's handler, for a worker's `nexusServices` (TurnKitPlugin's `nexus`). */
export function turnkitNexusHandler(options: TurnKitNexusOptions = {}) {
  return nexus.serviceHandler(turnkitNexusService, {
    runTurn: new WorkflowRunOperationHandler<RunTurnInput, AgentTurnDigest>(async (ctx, input) => {
      if (!input || typeof input.agent !== 'string' || typeof input.task !== 'string')
        throw new nexus.HandlerError('BAD_REQUEST', 'runTurn needs { agent, task } strings');
      return startWorkflow(ctx, 'agentCallWorkflow', {
        workflowId: nexusCallWorkflowId(ctx.requestId),
        ...(options.taskQueue ? { taskQueue: options.taskQueue } : {}),
        args: [options.settings ? { ...input, settings: options.settings } : input],
      });
    }),
  });
}
