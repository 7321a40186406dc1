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

  /** Registers the agent and, recursively, its sub-agents. Re-registering replaces. */
  register(agent: Agent): Agent {
    if (!agent || typeof agent.name !== 'string')
      throw new ArgumentError('register expects an agent (defineAgent)');
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
