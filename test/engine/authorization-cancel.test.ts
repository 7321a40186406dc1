/**
 * Layer: Temporal dev server. A cancel reaches a running turn as its workflow's signal, whose
 * handler asks the policy (spec §5.9, §6). The rest of authorization runs on the engine
 * driver: authorization.test.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import type { AuthorizationRequest } from '../../src/engine/runtime.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const blockedChild = defineAgent({ name: 'blocked_child', description: 'Blocks until cancelled.' });

const model = new ScriptedModel({
  blocking_parent: () => ({ toolCalls: [{ name: 'blocked_child', arguments: { task: 'block' } }] }),
  blocked_child: () => ({ text: 'never', delayMs: 600_000 }),
});

type Policy = (request: AuthorizationRequest) => unknown;
const allowAll: Policy = () => true;
let policy: Policy = allowAll;
const seen: AuthorizationRequest[] = [];

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [defineAgent({ name: 'blocking_parent', subAgents: [blockedChild] })],
    model,
    runtime: {
      authorization: (request) => {
        seen.push(JSON.parse(JSON.stringify(request)) as AuthorizationRequest);
        return policy(request);
      },
    },
  });
});
afterAll(async () => kit?.stop());
beforeEach(() => {
  policy = allowAll;
  seen.length = 0;
});

async function waitUntil(predicate: () => Promise<boolean>, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('authorization policy (spec §6)', () => {
  it('§5.9 §6 a cancel from a principal without permission is rejected, recorded as `cancel.denied`, and nothing is cancelled', async () => {
    policy = (request) =>
      request.action !== 'cancel' || (request.principal as { role?: string } | null)?.role === 'owner';
    const run = await kit.client.run('blocking_parent', 'Block in a child');
    await waitUntil(async () => {
      const child = (await run.turns()).find((t) => t.parentTurnId === run.turnId);
      return !!child && (await kit.store.listEvents(child.id)).some((e) => e.type === 'model.requested');
    });
    await run.cancel({ principal: { role: 'intruder' }, descendants: 'cascade' });
    await waitUntil(async () => (await run.events()).some((e) => e.type === 'cancel.denied'));

    const denied = (await run.events()).find((e) => e.type === 'cancel.denied')!;
    expect(denied.payload).toMatchObject({ descendants: 'cascade', error: 'not authorized to cancel' });
    expect(seen.find((r) => r.action === 'cancel')).toMatchObject({
      principal: { role: 'intruder' },
      turn: run.turnId,
      descendants: 'cascade',
    });
    const turns = await run.turns();
    expect(turns).toHaveLength(2);
    expect(turns.find((t) => t.id === run.turnId)!.status).toBe('waiting');
    const child = turns.find((t) => t.id !== run.turnId)!;
    expect(child.status).toBe('running');
    expect(child.claimToken).not.toBeNull();
    for (const t of turns) {
      expect(t.error).toBeNull();
      expect((await kit.store.listEvents(t.id)).map((e) => e.type)).not.toContain('turn.cancelled');
    }
    expect((await run.toolExecutions()).map((e) => e.status)).not.toContain('interrupted');

    // The owner may: the whole tree is then cancelled.
    await run.cancel({ principal: { role: 'owner' }, descendants: 'cascade' });
    expect((await run.result()).status).toBe('cancelled');
    await waitUntil(async () => (await kit.store.loadTurn(child.id)).status === 'cancelled');
  });
});
