/**
 * The agents module of docs/deployment.md: every worker (`turnkit worker --agents
 * ./agents.js`) and every process with a client (your API, the console) loads the same one.
 * The model is TURNKIT_MODEL; the store is TURNKIT_DATABASE_URL.
 */
import { AgentRegistry, defineAgent } from '../../src/index.js';

export const agents = new AgentRegistry([
  defineAgent({
    name: 'support',
    instructions: 'You answer customers about their orders, in one or two sentences.',
    limits: { maxIterations: 8 },
  }),
]);
