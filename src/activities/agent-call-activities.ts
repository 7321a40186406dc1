/**
 * The activities of agents called from an application's workflow (`turnkit/workflow`) and
 * through Nexus: write the call's turn, digest its end, cancel it as the caller's principal.
 */
import { Context } from '@temporalio/activity';
import { sendControl } from '../client/controls.js';
import type { Json } from '../store/types.js';
import type { AgentCallActivities } from '../contract/agent-call.js';
import { agentTurnDigest, prepareAgentTurn } from '../engine/agent-call.js';
import type { Runtime } from '../engine/runtime.js';
import { sendCancel } from './schedule-activities.js';
import { mappingFailures } from './turn-activities.js';

export function createAgentCallActivities(runtime: Runtime): AgentCallActivities {
  return {
    prepareAgentTurn: (input) => mappingFailures(() => prepareAgentTurn(runtime, input)),
    agentTurnDigest: (input) => mappingFailures(() => agentTurnDigest(runtime, input.turnId)),
    cancelAgentTurn: (input) =>
      mappingFailures(() =>
        sendCancel(runtime, input.turnId, input.principal ?? null, input.descendants ?? 'cascade'),
      ),
    controlAgentTurn: (input) =>
      mappingFailures(async () => {
        const sender = {
          store: runtime.store,
          temporal: Context.current().client,
          signingKey: runtime.signingKey,
        };
        return (await sendControl(sender, input.turnId, input.action, input.fields)) as Json;
      }),
  };
}
