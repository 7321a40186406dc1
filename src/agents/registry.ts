import { ArgumentError, ConfigError } from '../errors.js';
import type { Agent } from './agent.js';

/**
 * Agents by name. Every worker and every client builds the same registry at boot: only
 * names travel through the store and Temporal, never code.
 */
export class AgentRegistry {
  readonly #agents = new Map<string, Agent>();

  constructor(agents: readonly Agent[] = []) {
    agents.forEach((agent) => this.register(agent));
  }

  /**
   * Registers the agent and, recursively, its sub-agents. Registering the same agent again is a
   * no-op; another agent under a taken name is a ConfigError (delegation resolves sub-agents by
   * name, so a shadowing agent would run with other tools and approvals).
   */
  register(agent: Agent): Agent {
    if (!agent || typeof agent.name !== 'string')
      throw new ArgumentError('register expects an agent (defineAgent)');
    const existing = this.#agents.get(agent.name);
    if (existing === agent) return agent;
    if (existing)
      throw new ConfigError(
        `two different agents are named ${JSON.stringify(agent.name)}: agent names must be unique across agents and sub-agents`,
      );
    this.#agents.set(agent.name, agent);
    agent.subAgents.forEach((sub) => this.register(sub));
    return agent;
  }

  resolve(name: string): Agent {
    const agent = this.#agents.get(name);
    if (!agent) {
      throw new ConfigError(
        `agent ${JSON.stringify(name)} is not registered: register it in every worker and client at boot`,
      );
    }
    return agent;
  }

  has(name: string): boolean {
    return this.#agents.has(name);
  }

  get names(): string[] {
    return [...this.#agents.keys()];
  }
}
