/**
 * TurnKit's Nexus service (`turnkit`): `runTurn` runs an agent's turn for a workflow in another
 * namespace and returns the same digest `runAgent` does. Workflow-safe: a caller's workflow
 * imports this definition (through `turnkit/workflow`) to call the operation.
 */
import * as nexus from 'nexus-rpc';
import type { AgentCallBudget, AgentTurnDigest } from './agent-call.js';
import type { Json, JsonObject } from '../store/types.js';

/** What a caller sends `runTurn`: the agent, the task, and as whom. */
export interface RunTurnInput {
  agent: string;
  task: string;
  /** The caller's identity: the turn's principal, which the policy sees (cancel included). */
  principal?: Json;
  budget?: AgentCallBudget;
  conversationId?: string;
  context?: JsonObject;
}

export const turnkitNexusService = nexus.service('turnkit', {
  runTurn: nexus.operation<RunTurnInput, AgentTurnDigest>(),
});
