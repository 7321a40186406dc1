/**
 * What replaying a case's tools left out (issue 43 #11): a replayed call runs no tool code, so
 * it is neither held for a person's approval nor put to the agent's tool policy. The report
 * says so for each case whose calls would have been, by the agent's definition.
 */
import type { Agent } from '../agents/agent.js';
import type { AgentRegistry } from '../agents/registry.js';
import type { RunObservation } from './run-observation.js';

export function replayNotes(
  agents: AgentRegistry,
  agentOrName: Agent | string,
  run: RunObservation,
): string[] {
  let agent: Agent;
  try {
    agent = typeof agentOrName === 'string' ? agents.resolve(agentOrName) : agentOrName;
  } catch {
    return []; // registered in the workers only: nothing to say about its tools
  }
  const replayed = run.toolCalls.filter((call) => call.divergence === undefined);
  const gated = new Set(agent.effectiveTools.filter((tool) => tool.needsApproval).map((tool) => tool.name));
  const notes = [...new Set(replayed.filter((call) => gated.has(call.name)).map((call) => call.name))].map(
    (name) => `${name}: replayed without asking for approval`,
  );
  if (agent.toolPolicy && replayed.length > 0)
    notes.push('the tool policy was not asked for the replayed calls');
  return notes;
}
