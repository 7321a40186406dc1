import type { Agent } from '../../agents/agent.js';
import { offeredTools } from '../../agents/agent.js';
import { LOAD_SKILL, loadedSkillKeys } from '../../agents/skill.js';
import type { ToolDefinition } from '../../agents/tool.js';
import type { Store, TurnRecord } from '../../store/types.js';

/**
 * The skills this turn loaded, from its completed `load_skill` executions in the store; none,
 * without a read, for an agent with no skill to load.
 */
export async function loadedSkillsOf(store: Store, agent: Agent, turnId: string): Promise<Set<string>> {
  if (agent.availableSkills.length === 0) return new Set();
  return loadedSkillKeys(await store.listToolExecutions({ turnId, toolName: LOAD_SKILL }));
}

/**
 * The tool a call names, if the turn may call it: a tool owned by an available skill is
 * unknown until this turn loaded that skill (spec §4.6, SC-02).
 */
export async function toolForTurn(
  store: Store,
  agent: Agent,
  turn: TurnRecord,
  name: string,
): Promise<ToolDefinition | undefined> {
  const tool = agent.effectiveTools.find((candidate) => candidate.name === name);
  if (!tool || !agent.skillTools.has(name)) return tool;
  return offeredTools(agent, await loadedSkillsOf(store, agent, turn.id)).find(
    (candidate) => candidate.name === name,
  );
}
