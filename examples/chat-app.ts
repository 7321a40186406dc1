/**
 * How an application wires examples/chat-route.ts (docs/chat-route.md). In a Next.js app this
 * is app/api/chat/route.ts (`export const { POST } = route`) plus app/api/chats/route.ts
 * (`export const POST = route.create`), importing from 'turnkit'; the workers run elsewhere
 * (`turnkit worker`, or docs/deployment.md), with the same agents.
 */
import { AgentRegistry, TurnKitClient, defineAgent } from '../src/index.js';
import { openStore } from '../src/store/index.js';
import { chatRoute } from './chat-route.js';

/** Your session check (next-auth's `auth()`, iron-session, a verified JWT). This one admits nobody. */
async function sessionUser(_request: Request): Promise<{ user: string } | undefined> {
  return undefined;
}

// One client per server process, at module scope: TURNKIT_DATABASE_URL, TEMPORAL_* as the workers'.
const agents = new AgentRegistry([defineAgent({ name: 'support', instructions: 'Help with orders.' })]);
const client = await TurnKitClient.connect({ store: await openStore(), agents });

const route = chatRoute({ client, agent: 'support', principalOf: sessionUser });
export const { POST } = route;
export const createChat = route.create;
