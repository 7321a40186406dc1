/**
 * Audit finding 24: `turnkit repair` (the client's `repair()`) reads the store's unfinished
 * turns a page at a time, asks Temporal about them concurrently under a bound, and confirms the
 * namespace by one visibility query rather than by loading every finished turn of each
 * conversation. Real dev server (a client only: nothing here runs), real SQLite.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { repairStore } from '../../src/engine/end/repair.js';
import { Runtime } from '../../src/engine/runtime.js';
import { openStore } from '../../src/store/index.js';
import type { ListTurnsFilter, Store } from '../../src/store/types.js';
import { TURNKIT_CONVERSATION_ID } from '../../src/workflows/contract.js';
import { connectClient, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

const agents = new AgentRegistry([defineAgent({ name: 'worker' })]);

/** A submitted turn that ran (running, a claim held) and whose workflow never existed here. */
async function ranWithoutWorkflow(store: Store, conversationId: string): Promise<string> {
  const message = await store.appendMessage({ conversationId, role: 'user', content: 'task' });
  const turn = await store.createTurn({
    conversationId,
    agentName: 'worker',
    contextMessageSequence: message.sequence,
    submittedAt: new Date().toISOString(),
  });
  await store.claimTurn(turn.id, { claimToken: `token-${turn.id}`, startedAt: new Date().toISOString() });
  return turn.id;
}

/** The client with its describes counted: how many were in flight at most. */
function countingDescribes(temporal: Client) {
  const seen = { inFlight: 0, max: 0, calls: 0 };
  const workflow = new Proxy(temporal.workflow, {
    get(target, key, receiver) {
      if (key !== 'getHandle') return Reflect.get(target, key, receiver) as unknown;
      return (...args: Parameters<typeof target.getHandle>) => {
        const handle = target.getHandle(...args);
        return new Proxy(handle, {
          get(h, k, r) {
            if (k !== 'describe') return Reflect.get(h, k, r) as unknown;
            return async () => {
              seen.calls += 1;
              seen.inFlight += 1;
              seen.max = Math.max(seen.max, seen.inFlight);
              try {
                return await h.describe();
              } finally {
                seen.inFlight -= 1;
              }
            };
          },
        });
      };
    },
  });
  const client = new Proxy(temporal, {
    get: (target, key, receiver) =>
      key === 'workflow' ? workflow : (Reflect.get(target, key, receiver) as unknown),
  });
  return { client, seen };
}

/** The store with each `listTurns` filter recorded. */
function recordingListTurns(store: Store) {
  const filters: ListTurnsFilter[] = [];
  const recorded = new Proxy(store, {
    get(target, key, receiver) {
      if (key !== 'listTurns') {
        const value = Reflect.get(target, key, receiver) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      }
      return (filter: ListTurnsFilter = {}) => {
        filters.push(filter);
        return target.listTurns(filter);
      };
    },
  });
  return { store: recorded, filters };
}

describe.skipIf(!(await requireTemporal()))('audit: turnkit repair at scale (finding 24)', () => {
  let temporal: Client;
  let store: Store;
  beforeAll(async () => {
    temporal = await connectClient();
    store = await openStore(tempSqliteUrl('repair'));
  });
  afterAll(async () => store?.close());

  it('audit: repair reads the unfinished turns a page at a time, describes at most `concurrency` at once, never loads the finished turns, and holds every turn no workflow of the store confirms', async () => {
    const conversation = await store.createConversation({ agentName: 'worker' });
    // Finished turns of the same conversation: the old evidence loaded every one of them.
    for (let i = 0; i < 6; i += 1) {
      const id = await ranWithoutWorkflow(store, conversation.id);
      await store.claimTurn(id, { from: 'running', to: 'completed', claimToken: null });
    }
    const unfinished: string[] = [];
    for (let i = 0; i < 12; i += 1) unfinished.push(await ranWithoutWorkflow(store, conversation.id));
    const { client, seen } = countingDescribes(temporal);
    const { store: recorded, filters } = recordingListTurns(store);
    const context = {
      runtime: new Runtime({ store: recorded, agents }),
      temporal: client,
      taskQueue: 'unused',
    };
    const findings = await repairStore(context, { dryRun: true, pageSize: 5, concurrency: 3 });
    expect(findings.map((f) => f.turnId)).toEqual(unfinished);
    expect(findings.every((f) => f.action === 'hold' && f.workflow === 'not found' && !f.done)).toBe(true);
    expect(seen.calls).toBe(12);
    expect(seen.max).toBe(3);
    // Three pages (5, 5, 2), each read with its limit; no read of a conversation's turns.
    expect(filters).toHaveLength(3);
    expect(filters.every((f) => f.limit === 5 && f.conversationId === undefined)).toBe(true);
    expect(filters.map((f) => f.after?.id ?? null)).toEqual([null, unfinished[4], unfinished[9]]);
  });

  it('audit: a turn held on an early page is repaired once a later page finds a workflow of the store in this namespace', async () => {
    // A store of its own: the first case's held turns are not this case's.
    const store = await openStore(tempSqliteUrl('repair-confirmed'));
    const first = await store.createConversation({ agentName: 'worker' });
    const second = await store.createConversation({ agentName: 'worker' });
    // Only the second conversation has a workflow here (closed; nothing ever ran it).
    const evidence = await temporal.workflow.start('turnWorkflow', {
      taskQueue: uniqueTaskQueue('repair-evidence'),
      workflowId: `turnkit-turn-evidence-${second.id}`,
      args: [{ turnId: 'evidence' }],
      typedSearchAttributes: [{ key: TURNKIT_CONVERSATION_ID, value: second.id }],
    });
    await evidence.terminate('evidence only (test)');
    await waitUntil(async () => {
      for await (const _ of temporal.workflow.list({ query: `TurnKitConversationId = '${second.id}'` }))
        return true;
      return false;
    });
    // Page 1: five of the first conversation's; page 2: the rest, then the second's.
    const turns: string[] = [];
    for (let i = 0; i < 7; i += 1) turns.push(await ranWithoutWorkflow(store, first.id));
    for (let i = 0; i < 2; i += 1) turns.push(await ranWithoutWorkflow(store, second.id));
    const context = { runtime: new Runtime({ store, agents }), temporal, taskQueue: 'unused' };
    const findings = await repairStore(context, { dryRun: true, pageSize: 5 });
    await store.close();
    expect(findings.map((f) => f.turnId)).toEqual(turns);
    expect(findings.every((f) => f.action === 'fail' && f.workflow === 'not found')).toBe(true);
  });
});
