/**
 * Cancellation of turn trees (spec §5.9) on the real Temporal dev server: cascade and retain
 * over sub-agent workflows, untrusted cancel payloads, and late work after a cancel.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { TurnRecord } from '../../src/store/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';
import type { TurnWorkflowResult } from '../../src/workflows/contract.js';

const toolMessages = (request: ModelRequest) => request.messages.filter((m) => m.role === 'tool');

/** Promises the test opens by name; models and tools awaiting them ignore their AbortSignal. */
const gates = new Map<string, { promise: Promise<void>; open: () => void }>();
function gate(name: string) {
  let entry = gates.get(name);
  if (!entry) {
    let open!: () => void;
    const promise = new Promise<void>((resolve) => (open = resolve));
    entry = { promise, open };
    gates.set(name, entry);
  }
  return entry;
}
const open = (name: string) => gate(name).open();

let stubbornFinished = 0;
const stubborn = defineTool({
  name: 'stubborn',
  description: 'Ignores its abort signal.',
  input: z.object({}),
  execute: async () => {
    await gate('stubborn').promise;
    stubbornFinished += 1;
    return { late: true };
  },
});
let neverCalled = 0;
const neverTool = defineTool({
  name: 'never_tool',
  description: 'Must not run after a cancel.',
  input: z.object({}),
  execute: () => {
    neverCalled += 1;
    return {};
  },
});

let lateModelAnswered = 0;
const model = new ScriptedModel({
  tenant_root: (request) =>
    toolMessages(request).length
      ? 'root done'
      : { toolCalls: [{ name: 'blocker', arguments: { task: 'block' } }] },
  blocker: () => ({ text: 'never', delayMs: 600_000 }),
  root31: (request) =>
    toolMessages(request).length
      ? 'root31 done'
      : {
          toolCalls: [
            { name: 'mid', arguments: { task: 'delegate further' } },
            { name: 'sibling', arguments: { task: 'wait for the test' } },
          ],
        },
  mid: () => ({ toolCalls: [{ name: 'leaf', arguments: { task: 'block' } }] }),
  leaf: () => ({ text: 'never', delayMs: 600_000 }),
  sibling: async () => {
    await gate('sibling').promise;
    return 'sibling done';
  },
  retainer: (request) =>
    toolMessages(request).length
      ? 'never reached'
      : { toolCalls: [{ name: 'slow_child', arguments: { task: 'finish later' } }] },
  slow_child: async () => {
    await gate('slow_child').promise;
    return 'child finished';
  },
  gated: async () => {
    await gate('gated').promise;
    return 'gated done';
  },
  quick: () => 'quick answer',
  stubborn_user: (request) =>
    toolMessages(request).length ? 'never reached' : { toolCalls: [{ name: 'stubborn', arguments: {} }] },
  late_model: async () => {
    await gate('late_model').promise;
    lateModelAnswered += 1;
    return { toolCalls: [{ name: 'never_tool', arguments: {} }] };
  },
});

const blocker = defineAgent({ name: 'blocker', description: 'Blocks.' });
const leaf = defineAgent({ name: 'leaf', description: 'Blocks.' });
const mid = defineAgent({ name: 'mid', description: 'Delegates to leaf.', subAgents: [leaf] });
const sibling = defineAgent({ name: 'sibling', description: 'Waits for the test.' });
const slowChild = defineAgent({ name: 'slow_child', description: 'Finishes when told.' });

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'tenant_root', subAgents: [blocker] }),
      defineAgent({ name: 'root31', subAgents: [mid, sibling] }),
      defineAgent({ name: 'retainer', subAgents: [slowChild] }),
      defineAgent({ name: 'gated' }),
      defineAgent({ name: 'quick' }),
      defineAgent({ name: 'stubborn_user', tools: [stubborn] }),
      defineAgent({ name: 'late_model', tools: [neverTool] }),
    ],
    model,
  });
});
afterAll(async () => {
  for (const entry of gates.values()) entry.open();
  await kit?.stop();
});

const modelRequested = async (turnId: string) =>
  (await kit.store.listEvents(turnId)).some((e) => e.type === 'model.requested');

async function turnOf(rootTurnId: string, agentName: string): Promise<TurnRecord | undefined> {
  return (await kit.store.listTurns({ rootTurnId })).find((t) => t.agentName === agentName);
}

/** Waits until the tree has a turn of `agentName` that is calling its model. */
async function whenCalling(rootTurnId: string, agentName: string): Promise<TurnRecord> {
  let found: TurnRecord | undefined;
  await waitUntil(async () => {
    found = await turnOf(rootTurnId, agentName);
    return !!found && (await modelRequested(found.id));
  });
  return found!;
}

const workflowResult = (turnId: string) =>
  kit.client.temporal.workflow.getHandle(`turnkit-turn-${turnId}`).result() as Promise<TurnWorkflowResult>;

const CANCELLED = { class: 'TurnKit::Cancelled', message: 'cancelled by application' };

describe('cascading and retained cancellation', () => {
  it('BG-28 cancel with descendants cascade cancels a child built under the run; the run context {tenant: acme} is persisted and readable', async () => {
    const run = await kit.client.run('tenant_root', 'Work for a tenant', {
      context: { tenant: 'acme' },
      principal: { user: 'ada' },
    });
    const child = await whenCalling(run.turnId, 'blocker');
    expect(child.parentTurnId).toBe(run.turnId);
    await run.cancel({ descendants: 'cascade', principal: { user: 'ada' } });

    const turn = await run.result();
    expect(turn.status).toBe('cancelled');
    expect(turn.error).toEqual(CANCELLED);
    expect((await workflowResult(child.id)).status).toBe('cancelled');
    const cancelledChild = await kit.store.loadTurn(child.id);
    expect(cancelledChild.status).toBe('cancelled');
    expect(cancelledChild.error).toEqual(CANCELLED);
    expect(cancelledChild.claimToken).toBeNull();
    expect(cancelledChild.completedAt).not.toBeNull();
    expect((await kit.store.listEvents(child.id)).map((e) => e.type)).toContain('turn.cancelled');

    // The run context, as persisted and as the turn's prompt renders it.
    expect(turn.options['context']).toEqual({ tenant: 'acme' });
    expect((await kit.store.loadConversation(turn.conversationId)).metadata['turnkit_context']).toEqual({
      tenant: 'acme',
    });
    const preview = await run.preview();
    expect(preview.request.dynamicInstructions).toContain('"tenant": "acme"');
  });

  it('BG-31 cascading cancel of a CHILD cancels that child and its grandchild only; the root (waiting, on Temporal) and the sibling are not cancelled', async () => {
    const run = await kit.client.run('root31', 'Build a tree');
    const leafTurn = await whenCalling(run.turnId, 'leaf');
    const siblingTurn = await whenCalling(run.turnId, 'sibling');
    const midTurn = (await turnOf(run.turnId, 'mid'))!;
    expect(leafTurn.parentTurnId).toBe(midTurn.id);
    expect(siblingTurn.parentTurnId).toBe(run.turnId);

    await kit.client.cancel(midTurn.id, { descendants: 'cascade' });
    expect((await workflowResult(midTurn.id)).status).toBe('cancelled');
    expect((await workflowResult(leafTurn.id)).status).toBe('cancelled');
    expect((await kit.store.loadTurn(midTurn.id)).error).toEqual(CANCELLED);
    expect((await kit.store.loadTurn(leafTurn.id)).error).toEqual(CANCELLED);

    // TurnKit's rows stay `pending` (background jobs not yet run). Here every turn is a live
    // workflow: the root has suspended on its children (`waiting`, no claim) and the sibling
    // is mid model call (`running`). What matters is that neither was touched by the cancel.
    const root = await run.turn();
    expect(root.status).toBe('waiting');
    expect(root.error).toBeNull();
    const siblingNow = await kit.store.loadTurn(siblingTurn.id);
    expect(siblingNow.status).toBe('running');
    expect(siblingNow.error).toBeNull();
    for (const id of [run.turnId, siblingTurn.id]) {
      expect((await kit.store.listEvents(id)).map((e) => e.type)).not.toContain('turn.cancelled');
    }

    // The root goes on: once the sibling answers, it reads both results and completes.
    open('sibling');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('root31 done');
    const executions = await kit.store.listToolExecutions({ turnId: run.turnId });
    expect(executions.map((e) => (e.result as { status?: string } | null)?.status)).toEqual([
      'cancelled',
      'completed',
    ]);
  });

  it("§5.9 descendants 'retain' cancels the parent and leaves its child running to completion", async () => {
    const run = await kit.client.run('retainer', 'Start a child and get cancelled');
    const child = await whenCalling(run.turnId, 'slow_child');
    await run.cancel({ descendants: 'retain' });
    const turn = await run.result();
    expect(turn.status).toBe('cancelled');
    expect((await kit.store.loadTurn(child.id)).status).toBe('running');

    open('slow_child');
    expect((await workflowResult(child.id)).status).toBe('completed');
    const finished = await kit.store.loadTurn(child.id);
    expect(finished.status).toBe('completed');
    expect(finished.outputText).toBe('child finished');
    // The parent's sub-agent call still has exactly one result (the repair's).
    const [execution] = await kit.store.listToolExecutions({ turnId: run.turnId });
    expect(execution!.status).toBe('interrupted');
    const results = (await kit.store.listMessages(run.conversationId)).filter(
      (m) => m.kind === 'tool_result',
    );
    expect(results).toHaveLength(1);
  });
});

describe('untrusted and late cancel input', () => {
  it('§5.9 a malformed cancel payload and an unknown descendants value sent as raw Temporal signals are rejected and recorded; the turn completes normally', async () => {
    const run = await kit.client.run('gated', 'Finish when told');
    await waitUntil(() => modelRequested(run.turnId));
    const handle = kit.client.temporal.workflow.getHandle(run.workflowId);
    const payloads: unknown[] = [
      'now',
      [1, 2],
      { descendants: 'retain', force: true },
      { descendants: 'everything' },
    ];
    for (const payload of payloads) await handle.signal('cancel', payload);
    await waitUntil(
      async () => (await run.events()).filter((e) => e.type === 'cancel.rejected').length === payloads.length,
    );
    const reasons = (await run.events())
      .filter((e) => e.type === 'cancel.rejected')
      .map((e) => String(e.payload['reason']));
    expect(reasons[0]).toMatch(/must be an object/);
    expect(reasons[1]).toMatch(/must be an object/);
    expect(reasons[2]).toMatch(/unknown cancel field\(s\): force/);
    expect(reasons[3]).toMatch(/descendants must be "retain" or "cascade", got "everything"/);
    expect(await run.status()).toBe('running');

    open('gated');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('gated done');
    expect((await run.events()).map((e) => e.type)).not.toContain('turn.cancelled');
  });

  it('§5.9 cancelling a finished turn through TurnKitClient.cancel is a no-op and changes nothing', async () => {
    const run = await kit.client.run('quick', 'Answer');
    expect((await run.result()).status).toBe('completed');
    const snapshot = async () => ({
      turn: await run.turn(),
      events: await run.events(),
      messages: await run.transcript(),
      history: (await kit.client.temporal.workflow.getHandle(run.workflowId).fetchHistory()).events?.length,
    });
    const before = await snapshot();
    for (const descendants of ['retain', 'cascade'] as const) {
      await kit.client.cancel(run.turnId, { descendants });
    }
    expect(await snapshot()).toEqual(before);
  });

  it('BG-42 a tool that ignores its AbortSignal: the turn is cancelled while the tool still runs, its late result is dropped (execution interrupted, one tool-result message)', async () => {
    const run = await kit.client.run('stubborn_user', 'Use the stubborn tool');
    await waitUntil(async () => (await run.toolExecutions()).some((e) => e.status === 'running'));
    await run.cancel();
    const turn = await run.result();
    expect(turn.status).toBe('cancelled');
    // Cancelled without waiting for the tool: it has not returned yet.
    expect(stubbornFinished).toBe(0);

    open('stubborn');
    await waitUntil(async () => stubbornFinished === 1);
    await new Promise((r) => setTimeout(r, 1_000));
    const [execution] = await run.toolExecutions();
    expect(execution!.status).toBe('interrupted');
    expect(execution!.result).toBeNull();
    const results = (await run.transcript()).filter((m) => m.kind === 'tool_result');
    expect(results).toHaveLength(1);
    expect(results[0]!.metadata['interrupted']).toBe(true);
    expect(results[0]!.toolExecutionId).toBe(execution!.id);
    const types = (await run.events()).map((e) => e.type);
    expect(types).not.toContain('tool_call.completed');
    expect(types).toContain('tool_call.interrupted');
    expect((await run.turn()).status).toBe('cancelled');
  });

  it('§5.9 a model that asks for a tool after the turn was cancelled creates no execution', async () => {
    const run = await kit.client.run('late_model', 'Answer late');
    await waitUntil(() => modelRequested(run.turnId));
    await run.cancel();
    expect((await run.result()).status).toBe('cancelled');

    open('late_model');
    await waitUntil(async () => lateModelAnswered === 1);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await run.toolExecutions()).toHaveLength(0);
    expect(neverCalled).toBe(0);
    const transcript = await run.transcript();
    expect(transcript.map((m) => m.role)).toEqual(['user']);
    const types = (await run.events()).map((e) => e.type);
    expect(types).not.toContain('model.completed');
    expect(types).not.toContain('tool_call.created');
    const turn = await run.turn();
    expect(turn.status).toBe('cancelled');
    expect(turn.usage).toBeNull();
  });
});
