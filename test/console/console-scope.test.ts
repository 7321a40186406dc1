/**
 * Audit #2 (issue 43): the console's reads and controls scoped to the turn's owner. The
 * authorization request of approve, reject, steer, pause and cancel names the turn's owner
 * principal; the console's reads ask `read_control` / `read_messages` as the client's read APIs
 * do. With docs/console.md's tenant policy, an operator of tenant A neither sees nor approves
 * tenant B's turn, and sees and approves tenant A's. Real Temporal, SQLite and HTTP handler;
 * only the model is scripted.
 */
import type { Server } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { ConsoleApproval, ConsoleTurnSummary } from '../../src/console.js';
import { createConsoleHandler } from '../../src/console.js';
import type { AuthorizationRequest } from '../../src/engine/runtime.js';
import { AuthorizationError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { Json } from '../../src/store/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const OPERATOR_ACTIONS = [
  'approve',
  'reject',
  'pause',
  'resume',
  'steer',
  'cancel',
  'read_control',
  'read_messages',
];
const tenantOf = (principal: unknown): unknown =>
  typeof principal === 'object' && principal !== null && !Array.isArray(principal)
    ? (principal as { tenant?: unknown }).tenant
    : undefined;

const asked: AuthorizationRequest[] = [];
/** docs/console.md's policy: a person acts on, and reads, only turns of their own tenant. */
function tenantPolicy(request: AuthorizationRequest): boolean {
  asked.push(request);
  if (!OPERATOR_ACTIONS.includes(request.action) || !('owner' in request)) return true;
  const tenant = tenantOf(request.principal);
  return tenant !== undefined && tenant === tenantOf(request.owner);
}

let charged = 0;
const transfer = defineTool({
  name: 'scope_transfer',
  description: 'Moves money.',
  input: z.object({ amount: z.number() }),
  needsApproval: true,
  execute: ({ amount }) => {
    charged += 1;
    return { moved: amount };
  },
});
const model = new ScriptedModel({
  scope_banker: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? { text: 'Done.' }
      : { toolCalls: [{ name: 'scope_transfer', arguments: { amount: 5 } }] },
});
const agents = [defineAgent({ name: 'scope_banker', tools: [transfer] })];

describe('audit: #2 console controls and reads scoped to the turn owner', () => {
  let kit: TestKit;
  let client: TurnKitClient;
  let server: Server;
  let base: string;
  const alice = { id: 'alice', tenant: 'A' };
  const bob = { id: 'bob', tenant: 'B' };
  const operatorA = { id: 'op-a', tenant: 'A' };

  beforeAll(async () => {
    kit = await startKit({ agents, model, runtime: { authorization: tenantPolicy } });
    client = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal: kit.client.temporal,
      taskQueue: kit.taskQueue,
      authorization: tenantPolicy,
    });
    // The operator's tenant comes from a header here; a real hook checks a session.
    const handler = createConsoleHandler({
      client,
      authenticate: (request) => {
        const tenant = request.headers['x-tenant'];
        return typeof tenant === 'string'
          ? ({ id: `op-${tenant.toLowerCase()}`, tenant } as Json)
          : undefined;
      },
    });
    server = createServer((request, response) => void handler(request, response));
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/`;
  });
  afterAll(async () => {
    await new Promise((closed) => server?.close(closed));
    await kit?.stop();
  });

  const asTenant = (tenant: string, path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, { ...init, headers: { ...init.headers, 'x-tenant': tenant } });
  const approve = (tenant: string, turnId: string, toolCallId: string) =>
    asTenant(tenant, `turns/${turnId}/approve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-turnkit-console': '1' },
      body: JSON.stringify({ toolCallId }),
    });

  it("audit: #2 an operator of tenant A cannot read or approve tenant B's turn, and can read and approve tenant A's", async () => {
    const runA = await client.run('scope_banker', 'Move 5 for alice', { principal: alice });
    const runB = await client.run('scope_banker', 'Move 5 for bob', { principal: bob });
    for (const run of [runA, runB])
      await expect.poll(async () => (await run.pendingApprovals()).length, { timeout: 30_000 }).toBe(1);
    const [callA] = await runA.pendingApprovals();
    const [callB] = await runB.pendingApprovals();

    // Reads: the lists show tenant A's turn only; B's page, transcript and stream are absent.
    const turns = (await (await asTenant('A', 'turns?agent=scope_banker')).json()) as {
      turns: ConsoleTurnSummary[];
    };
    expect(turns.turns.map((t) => t.id)).toEqual([runA.turnId]);
    expect(turns.turns[0]!.waitingFor).toBe('approval');
    const approvals = (await (await asTenant('A', 'approvals')).json()) as { approvals: ConsoleApproval[] };
    expect(approvals.approvals.map((a) => [a.turnId, a.toolCallId])).toEqual([
      [runA.turnId, callA!.toolCallId],
    ]);
    const conversations = (await (await asTenant('A', 'conversations?agent=scope_banker')).json()) as {
      conversations: { lastTurnId: string }[];
    };
    expect(conversations.conversations.map((c) => c.lastTurnId)).toEqual([runA.turnId]);
    for (const path of [
      `turns/${runB.turnId}`,
      `turns/${runB.turnId}/messages`,
      `turns/${runB.turnId}/stream`,
    ])
      expect((await asTenant('A', path)).status, path).toBe(404);
    // The turn settles into its wait (its last events land just after the approval shows):
    // read its page until two reads in a row have the same version.
    const versionOf = async () =>
      ((await (await asTenant('A', `turns/${runA.turnId}`)).json()) as { version: string }).version;
    let settled = await versionOf();
    await expect
      .poll(async () => settled === (settled = await versionOf()), { timeout: 10_000, interval: 200 })
      .toBe(true);
    const pageA = { version: settled };
    // While nothing happens, a poll with the page's version reads one turn row and one event.
    expect(
      await (await asTenant('A', `turns/${runA.turnId}?since=${encodeURIComponent(pageA.version)}`)).json(),
    ).toEqual({ unchanged: true, version: pageA.version });
    const transcript = (await (await asTenant('A', `turns/${runA.turnId}/messages`)).json()) as {
      messages: { role: string }[];
    };
    expect(transcript.messages.map((m) => m.role)).toContain('user');
    // Tenant B's operator sees B's call.
    const forB = (await (await asTenant('B', 'approvals')).json()) as { approvals: ConsoleApproval[] };
    expect(forB.approvals.map((a) => a.turnId)).toEqual([runB.turnId]);

    // Controls: the console refuses B's turn to A; the workers' policy, which now names the
    // owner, refuses it too when asked directly.
    expect((await approve('A', runB.turnId, callB!.toolCallId)).status).toBe(404);
    await expect(
      (await client.handle(runB.turnId)).approve(callB!.toolCallId, { principal: operatorA }),
    ).rejects.toBeInstanceOf(AuthorizationError);
    const denied = asked.find((r) => r.action === 'approve' && r['turn'] === runB.turnId);
    expect(denied?.['owner']).toEqual(bob);
    expect(denied?.['conversation']).toBe((await kit.store.loadTurn(runB.turnId)).conversationId);
    expect((await runB.pendingApprovals()).length).toBe(1);

    // Tenant A's own call: approved from the console, the tool runs once, the turn completes.
    const response = await approve('A', runA.turnId, callA!.toolCallId);
    expect(response.status).toBe(200);
    expect((await runA.result()).status).toBe('completed');
    expect(charged).toBe(1);
    // A turn's executions and events come in pages too; B's are absent for A.
    const executions = (await (await asTenant('A', `turns/${runA.turnId}/executions?limit=1`)).json()) as {
      toolExecutions: { toolName: string; status: string }[];
      nextCursor: string;
    };
    expect(executions.toolExecutions.map((e) => [e.toolName, e.status])).toEqual([
      ['scope_transfer', 'completed'],
    ]);
    const rest = (await (
      await asTenant('A', `turns/${runA.turnId}/executions?limit=1&cursor=${executions.nextCursor}`)
    ).json()) as { toolExecutions: unknown[]; nextCursor: string | null };
    expect(rest).toEqual({ toolExecutions: [], nextCursor: null });
    const events: number[] = [];
    for (let after: number | null = 0; after !== null;) {
      const page = (await (
        await asTenant('A', `turns/${runA.turnId}/events?limit=3&after=${after}`)
      ).json()) as {
        events: { sequence: number }[];
        nextAfter: number | null;
      };
      events.push(...page.events.map((e) => e.sequence));
      after = page.nextAfter;
    }
    expect(events).toEqual((await kit.store.listEvents(runA.turnId)).map((e) => e.sequence));
    expect(events.length).toBeGreaterThan(3);
    expect((await asTenant('A', `turns/${runB.turnId}/events`)).status).toBe(404);
    expect((await asTenant('A', `turns/${runB.turnId}/executions`)).status).toBe(404);
    const allowed = asked.find((r) => r.action === 'approve' && r['turn'] === runA.turnId);
    expect(allowed).toMatchObject({ principal: operatorA, owner: alice });

    // Cancel names the owner too: B's operator cancels B's turn; A's could not.
    await expect((await client.handle(runB.turnId)).cancel({ principal: operatorA })).rejects.toBeInstanceOf(
      AuthorizationError,
    );
    await (await client.handle(runB.turnId)).cancel({ principal: { id: 'op-b', tenant: 'B' } });
    expect(asked.find((r) => r.action === 'cancel' && r['turn'] === runB.turnId)?.['owner']).toEqual(bob);
  });
});
