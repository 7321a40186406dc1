/**
 * The protocol doors' test bench: a TestKit on the real Temporal dev server and a SQLite store,
 * a client with an authorization policy, and one HTTP server mounting the MCP, A2A and AG-UI
 * handlers with a bearer-token auth hook (`Bearer alice` is principal `{ user: 'alice' }`).
 * Only the model is scripted.
 */
import type { IncomingMessage, RequestListener, Server } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { AuthorizationRequest } from '../../src/engine/runtime.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { TestKit } from './turnkit.js';
import { startKit } from './turnkit.js';

export const charges: number[] = [];
const charge = defineTool({
  name: 'charge_card',
  description: 'Charges a card.',
  input: z.object({ amount: z.number() }),
  needsApproval: true,
  execute: ({ amount }) => {
    charges.push(amount);
    return { charged: amount };
  },
});
const lookup = defineTool({
  name: 'lookup_fact',
  description: 'Looks a fact up.',
  input: z.object({ topic: z.string() }),
  execute: ({ topic }) => ({ topic, fact: 'workflows are durable' }),
});

const hasToolResult = (request: { messages: { role: string }[] }) =>
  request.messages.some((m) => m.role === 'tool');
const lastUser = (request: { messages: { role: string; content: unknown }[] }) =>
  JSON.stringify(request.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '');

export const model = new ScriptedModel({
  pr_echo: (request) =>
    hasToolResult(request)
      ? { text: 'Durable execution keeps agents alive.' }
      : { toolCalls: [{ name: 'lookup_fact', arguments: { topic: 'durability' } }] },
  pr_gate: (request) =>
    hasToolResult(request)
      ? { text: 'The card was charged.' }
      : {
          toolCalls: [
            { name: 'charge_card', arguments: { amount: /refund/.test(lastUser(request)) ? 7 : 42 } },
          ],
        },
  pr_slow: () => ({ text: 'word by word, '.repeat(30), chunkDelayMs: 2_000 }),
  pr_typed: () => ({ text: 'Typed input read.' }),
});

export const agents = [
  defineAgent({ name: 'pr_echo', description: 'Answers from a looked-up fact.', tools: [lookup] }),
  defineAgent({ name: 'pr_gate', description: 'Charges a card, with a person approving.', tools: [charge] }),
  defineAgent({ name: 'pr_slow', description: 'Answers slowly.' }),
  defineAgent({
    name: 'pr_typed',
    description: 'Takes a typed input.',
    inputSchema: z.object({ city: z.string() }),
  }),
];

/** The policy the workers and the doors' client share: anyone but `mallory` may do anything. */
export const decisions: AuthorizationRequest[] = [];
export function policy(request: AuthorizationRequest): boolean {
  decisions.push(request);
  const user = (request.principal as { user?: string } | null)?.user;
  return user !== undefined && user !== 'mallory';
}

/** `Authorization: Bearer <user>` is principal `{ user }`; no header is no principal (refused). */
export function bearer(request: IncomingMessage): { user: string } | undefined {
  const match = /^Bearer ([a-z]+)$/.exec(request.headers.authorization ?? '');
  return match ? { user: match[1]! } : undefined;
}

export interface ProtocolBench {
  kit: TestKit;
  client: TurnKitClient;
  base: string;
  /** Serves `routes` (path prefix → handler) on a fresh port; returns its base URL and a stop. */
  serve(routes: Record<string, RequestListener>): Promise<{ base: string; stop: () => Promise<void> }>;
  turnCount(): Promise<number>;
  stop(): Promise<void>;
}

export async function startProtocolBench(): Promise<Omit<ProtocolBench, 'base'>> {
  const kit = await startKit({ agents, model, runtime: { authorization: policy } });
  const client = new TurnKitClient({
    store: kit.store,
    agents: kit.agents,
    temporal: kit.client.temporal,
    taskQueue: kit.taskQueue,
    authorization: policy,
  });
  const servers: Server[] = [];
  return {
    kit,
    client,
    async serve(routes) {
      const server = createServer((request, response) => {
        const path = new URL(request.url ?? '/', 'http://bench.invalid').pathname;
        const prefix = Object.keys(routes).find((p) => path === p || path.startsWith(`${p}/`));
        if (prefix === undefined) return void response.writeHead(404).end();
        void routes[prefix]!(request, response);
      });
      servers.push(server);
      await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
      const { port } = server.address() as AddressInfo;
      return {
        base: `http://127.0.0.1:${port}`,
        stop: () =>
          new Promise<void>((closed) => {
            server.close(() => closed());
            server.closeAllConnections();
          }),
      };
    },
    async turnCount() {
      return (await kit.store.listTurns({})).length;
    },
    async stop() {
      for (const server of servers) {
        server.closeAllConnections();
        server.close();
      }
      await kit.stop();
    },
  };
}
