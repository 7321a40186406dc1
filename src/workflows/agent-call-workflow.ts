/**
 * One agent call as a workflow of its own (what TurnKit's Nexus operation `runTurn` starts):
 * the turn runs as its child, and the workflow returns the turn's digest. A cancel of this
 * workflow is TurnKit's cancel of the turn, as the caller's principal.
 */
import type { AgentTurnDigest } from '../contract/agent-call.js';
import type { RunTurnInput } from '../contract/nexus-service.js';
import { runAgent } from './agent-call.js';
import type { TurnSettings } from './contract.js';

export async function agentCallWorkflow(
  input: RunTurnInput & { settings?: TurnSettings },
): Promise<AgentTurnDigest> {
  const { agent, task, ...options } = input;
  return runAgent(agent, task, options);
}
