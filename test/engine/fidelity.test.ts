/**
 * Issue 15, fidelity fixes: where the landed code differed from the spec, on the real dev
 * server with real stores; only the model is scripted.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { AuthorizationRequest } from '../../src/engine/runtime.js';
import { AuthorizationError, ModelAccessError, storedErrorClass } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelClient, ModelRequest } from '../../src/models/types.js';
import { openStore } from '../../src/store/index.js';
import type { ContentPart, MessageRecord, Store } from '../../src/store/types.js';
import { crashFixture } from '../fixtures/crash-agents.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit, temporalConnections } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';
import type { WorkerProcess } from '../helpers/worker-process.js';
import { spawnWorker } from '../helpers/worker-process.js';

const toolMessages = (request: ModelRequest) => request.messages.filter((m) => m.role === 'tool');
const userTexts = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === 'user').map((m) => String(m.content));
const resultsOf = (messages: MessageRecord[]) =>
  messages.flatMap((m) =>
    m.content.filter((p): p is Extract<ContentPart, { type: 'tool_result' }> => p.type === 'tool_result'),
  );

// --- Item 1: a model that can never work -----------------------------------------------------
const broken = { validated: 0, chats: 0 };
const brokenClient: ModelClient = {
  validate() {
    broken.validated += 1;
    throw new ModelAccessError('no API key configured for the provider');
  },
  chat() {
    broken.chats += 1;
    return Promise.reject(new ModelAccessError('no API key configured for the provider'));
  },
};

// --- Item 6: the reference application's shape -----------------------------------------------
const evidenceGate = gate();
const calls: string[] = [];
const readResearch = defineTool({
  name: 'read_research',
  description: 'Reads the research notes.',
  input: z.object({}),
  execute: () => {
    calls.push('read_research');
    return { notes: 'three findings' };
  },
});
const saved: string[] = [];
const saveReport = defineTool({
  name: 'save_report',
  description: 'Saves the final report and ends the run.',
  input: z.object({ title: z.string(), body: z.string() }),
  terminal: (result) => String((result as { report: string }).report),
  execute: ({ title, body }) => {
    calls.push('save_report');
    const report = `# ${title}\n\n${body}`;
    saved.push(report);
    return { report };
  },
});
const holdEvidence = defineTool({
  name: 'hold_evidence',
  description: 'Waits for the test.',
  input: z.object({}),
  execute: async () => {
    await evidenceGate.promise;
    return { held: true };
  },
});
const evidenceReview = defineAgent({
  name: 'evidence_review',
  description: 'Reviews the evidence.',
  tools: [holdEvidence],
});
const riskReview = defineAgent({ name: 'risk_review', description: 'Reviews the risks.' });

// --- The kit ---------------------------------------------------------------------------------
const modelGates = new Map<string, ReturnType<typeof gate>>();
const model = new ScriptedModel({
  quick: () => 'quick answer',
  // Blocks until its model call is aborted, unless it sees a buffered message.
  blocked: (request) =>
    userTexts(request).some((t) => t.startsWith('buffered:'))
      ? `continued: ${userTexts(request).at(-1)}`
      : { text: 'never', delayMs: 600_000 },
  held: async (request) => {
    const name = /hold:(\S+)/.exec(userTexts(request).at(-1) ?? '')?.[1];
    if (name) await modelGates.get(name)?.promise;
    return 'held done';
  },
  delegator: (request) =>
    toolMessages(request).length
      ? 'delegated'
      : { toolCalls: [{ name: 'risk_review', arguments: { task: 'x' } }] },
  risk_review: () => 'no risks',
  evidence_review: (request) =>
    toolMessages(request).length ? 'evidence ok' : { toolCalls: [{ name: 'hold_evidence', arguments: {} }] },
  coordinator: () => ({
    toolCalls: [
      { name: 'read_research', arguments: {} },
      { name: 'evidence_review', arguments: { task: 'check the evidence' } },
      { name: 'risk_review', arguments: { task: 'check the risks' } },
      { name: 'save_report', arguments: { title: 'Review', body: 'Evidence and risks checked.' } },
    ],
  }),
  audited: () => 'contains a forbidden word',
});

const policy = { deny: new Set<string>(), seen: [] as AuthorizationRequest[] };
const authorization = (request: AuthorizationRequest) => {
  policy.seen.push(request);
  if (request.action === 'cancel') return (request.principal as { role?: string } | null)?.role === 'owner';
  return !policy.deny.has(request.action);
};

let kit: TestKit;
/** A client with the workers' policy: it checks before writing or signalling anything. */
let guarded: TurnKitClient;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'quick' }),
      defineAgent({ name: 'blocked' }),
      defineAgent({ name: 'held' }),
      defineAgent({ name: 'unusable', client: brokenClient }),
      defineAgent({ name: 'delegator', subAgents: [riskReview] }),
      defineAgent({
        name: 'coordinator',
        tools: [readResearch, saveReport],
        subAgents: [evidenceReview, riskReview],
      }),
      defineAgent({
        name: 'audited',
        outputConstraints: [
          (output) => (String(output).includes('forbidden') ? 'no forbidden words' : undefined),
        ],
      }),
    ],
    model,
    runtime: { authorization },
  });
  guarded = new TurnKitClient({
    store: kit.store,
    agents: kit.agents,
    temporal: kit.client.temporal,
    taskQueue: kit.taskQueue,
    authorization,
  });
});
afterAll(async () => kit?.stop());

const eventTypes = async (turnId: string) => (await kit.store.listEvents(turnId)).map((e) => e.type);

describe('fidelity (issue 15)', () => {
  it('fidelity: a model whose validate and chat throw ModelAccessError fails the turn at once, before any model call, with its own class', async () => {
    const started = Date.now();
    const run = await kit.client.run('unusable', 'Try the broken model');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toEqual({
      class: 'TurnKit::ModelAccessError',
      message: 'no API key configured for the provider',
    });
    // No retries (five model attempts with backoff would take 15 s or more).
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(broken.validated).toBe(1);
    expect(broken.chats).toBe(0);
    const types = await eventTypes(run.turnId);
    expect(types).toContain('turn.failed');
    expect(types).not.toContain('model.requested');
  });

  it('fidelity: cancelling a prepared, never-started run cancels it in the store with the events of any cancel; starting it later runs nothing', async () => {
    const quickCalls = model.callsFor('quick').length;
    const run = await kit.client.prepare('quick', 'Never started');
    await run.cancel({ principal: { role: 'owner' } });
    const turn = await run.turn();
    expect(turn.status).toBe('cancelled');
    expect(turn.claimToken).toBeNull();
    expect(turn.completedAt).not.toBeNull();
    expect(turn.error).toEqual({ class: 'TurnKit::Cancelled', message: 'cancelled by application' });
    expect(await eventTypes(run.turnId)).toContain('turn.cancelled');
    await run.start();
    expect((await run.result()).status).toBe('cancelled');
    expect(model.callsFor('quick')).toHaveLength(quickCalls);
  });

  it('fidelity: cancelling a prepared run that waits for another cancels it and leaves its target alone', async () => {
    modelGates.set('prep', gate());
    const target = await kit.client.run('held', 'hold:prep');
    const waiter = await kit.client.prepare('quick', 'After the target');
    await waiter.waitFor(target);
    await waiter.cancel({ principal: { role: 'owner' } });
    expect(await waiter.status()).toBe('cancelled');
    modelGates.get('prep')!.open();
    expect((await target.result()).status).toBe('completed');
    expect(await waiter.status()).toBe('cancelled');
  });

  it('fidelity: a denied cancel throws AuthorizationError at the caller before any signal; a raw signal is still checked by the workflow', async () => {
    const run = await kit.client.run('blocked', 'Block for the intruder');
    await waitUntil(async () => (await eventTypes(run.turnId)).includes('model.requested'));
    await expect(guarded.cancel(run.turnId, { principal: { role: 'intruder' } })).rejects.toBeInstanceOf(
      AuthorizationError,
    );
    expect(await run.status()).toBe('running');
    const denials = async () => (await eventTypes(run.turnId)).filter((t) => t === 'cancel.denied').length;
    expect(await denials()).toBe(1);
    // The same denial for a signal sent from the CLI or the UI, recorded by the workflow.
    await kit.client.temporal.workflow
      .getHandle(run.workflowId)
      .signal('cancel', { principal: { role: 'intruder' } });
    await waitUntil(async () => (await denials()) === 2);
    expect(await run.status()).toBe('running');
    await guarded.cancel(run.turnId, { principal: { role: 'owner' } });
    expect((await run.result()).status).toBe('cancelled');
  });

  it('fidelity: cancelling a finished turn is a no-op: no error, no event, the turn unchanged', async () => {
    const run = await kit.client.run('quick', 'Answer');
    expect((await run.result()).status).toBe('completed');
    const before = await eventTypes(run.turnId);
    await run.cancel({ principal: { role: 'owner' } });
    await guarded.cancel(run.turnId, { principal: { role: 'intruder' } });
    const turn = await run.turn();
    expect(turn.status).toBe('completed');
    expect(turn.error).toBeNull();
    expect(await eventTypes(run.turnId)).toEqual(before);
  });

  it('fidelity: authorization requests carry real turn ids: the sub-agent join names the child, the run callback names the run', async () => {
    policy.seen.length = 0;
    const run = await guarded.run('delegator', 'Delegate once');
    expect((await run.result()).status).toBe('completed');
    const child = (await run.turns()).find((t) => t.parentTurnId === run.turnId)!;
    expect(policy.seen.find((r) => r.action === 'wait')).toMatchObject({
      turn: run.turnId,
      targets: [child.id],
    });

    const recipient = await kit.client.conversation('quick');
    policy.seen.length = 0;
    const called = await guarded.run('quick', 'Call me back', { callback: recipient.id });
    const callback = policy.seen.find((r) => r.action === 'callback')!;
    expect(callback).toMatchObject({ turn: called.turnId, destination_conversation: recipient.id });
    expect((await called.result()).status).toBe('completed');
  });

  it('fidelity: E2E-01 ordinary tools before and after a sub-agent group: save_report never runs ahead of the unresolved group; results in call order; one report, the final output', async () => {
    const run = await kit.client.run('coordinator', 'Review the research and save a report');
    // The fast reviewer finished; the slow one holds the group open.
    await waitUntil(async () =>
      (await run.turns()).some((t) => t.agentName === 'risk_review' && t.status === 'completed'),
    );
    await waitUntil(async () =>
      (await run.turns()).some((t) => t.agentName === 'evidence_review' && t.status === 'running'),
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await run.status()).toBe('waiting');
    expect(calls).toEqual(['read_research']);
    const open = await kit.store.listToolExecutions({ turnId: run.turnId });
    expect(open.find((e) => e.toolName === 'save_report')).toBeUndefined();
    // Only the call before the group has its result; nothing after the group overtakes it.
    const early = resultsOf(await kit.store.listMessages((await run.turn()).conversationId));
    expect(early).toHaveLength(1);

    evidenceGate.open();
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(calls).toEqual(['read_research', 'save_report']);
    const messages = await kit.store.listMessages(turn.conversationId);
    const names = messages.filter((m) => m.kind === 'tool_result').map((m) => m.metadata['tool_name']);
    expect(names).toEqual(['read_research', 'evidence_review', 'risk_review', 'save_report']);
    expect(saved).toHaveLength(1);
    expect(turn.outputText).toBe(saved[0]);
    expect(model.callsFor('coordinator')).toHaveLength(1);
  });

  it('fidelity: BG-30 cancel during a blocked model call; a message buffered during the call produces a continuation turn whose principal is the owner’s', async () => {
    const owner = { role: 'owner', user: 'ada' };
    const run = await kit.client.run('blocked', 'Block until cancelled', { principal: owner });
    await waitUntil(async () => (await eventTypes(run.turnId)).includes('model.requested'));
    const delivery = await kit.client.sendMessage(run.conversationId, 'buffered: new data', {
      key: `bg30-${run.turnId}`,
      principal: { role: 'sender', user: 'mallory' },
    });
    await waitUntil(async () => (await kit.store.loadDelivery(delivery.id)).deliveredAt !== null);
    expect(await run.status()).toBe('running');
    await run.cancel({ principal: owner });
    const turn = await run.result();
    expect(turn.status).toBe('cancelled');
    expect(turn.outputText).toBeNull();
    await waitUntil(
      async () => (await kit.store.listTurns({ conversationId: run.conversationId })).length === 2,
    );
    const next = (await kit.store.listTurns({ conversationId: run.conversationId })).find(
      (t) => t.id !== run.turnId,
    )!;
    const message = (await kit.store.loadDelivery(delivery.id)).messageId!;
    expect(next.options['trigger_message_id']).toBe(message);
    expect(next.options['principal']).toEqual(owner);
    expect(next.submittedAt).not.toBeNull();
    expect(next.parentTurnId).toBeNull();
    // Built pending by the lane, which then starts its workflow.
    await waitUntil(async () => (await kit.store.loadTurn(next.id)).status === 'completed');
    const continued = await kit.store.loadTurn(next.id);
    expect(continued.outputText).toBe('continued: buffered: new data');
  });

  it('fidelity: stored error classes are TurnKit::<Class> on every write path', async () => {
    const run = await kit.client.run('audited', 'Say something');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ class: 'TurnKit::OutputAudit' });
    expect(storedErrorClass('Cancelled')).toBe('TurnKit::Cancelled');
    expect(storedErrorClass('TurnKit::ModelError')).toBe('TurnKit::ModelError');
    expect(storedErrorClass('TypeError')).toBe('TypeError');
  });
});

describe('fidelity: worker processes', () => {
  let dir: string;
  let store: Store;
  const workers: WorkerProcess[] = [];
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'turnkit-fidelity-'));
    store = await openStore(join(dir, 'turnkit.sqlite'));
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await store?.close();
  });

  it('fidelity: BG-14 a worker that exits in a turn.completed listener leaves one pending delivery, delivered after recovery', async () => {
    const log = join(dir, 'bg14.log');
    const marker = join(dir, 'bg14.crashed');
    const taskQueue = `turnkit-fidelity-bg14-${Date.now()}`;
    const client = new TurnKitClient({
      store,
      agents: new AgentRegistry(crashFixture(log, 'client').agents),
      temporal: (await temporalConnections()).client,
      taskQueue,
      turnSettings: { model: { heartbeatTimeout: '3 seconds' }, tool: { heartbeatTimeout: '3 seconds' } },
    });
    const env = {
      TURNKIT_DATABASE_URL: join(dir, 'turnkit.sqlite'),
      TURNKIT_TEST_LOG: log,
      TURNKIT_TEST_TASK_QUEUE: taskQueue,
    };
    const first = spawnWorker({
      ...env,
      TURNKIT_TEST_CRASH_ON: 'turn.completed',
      TURNKIT_TEST_CRASH_MARKER: marker,
    });
    workers.push(first);
    await first.ready;
    const recipient = await client.conversation('replayer');
    const run = await client.run('reporter', 'Write and save the report', { callback: recipient.id });
    const exit = await first.exited;
    expect(exit.signal, first.output()).toBe('SIGKILL');
    expect(existsSync(marker)).toBe(true);
    expect((await run.turn()).status).toBe('completed');
    const pending = await store.listDeliveries({ destinationConversationId: recipient.id });
    expect(pending).toHaveLength(1);
    expect(pending[0]!.key).toBe(`completion:${run.turnId}`);
    expect(pending[0]!.deliveredAt).toBeNull();

    const second = spawnWorker({ ...env, TURNKIT_TEST_FLAVOR: 'replacement' });
    workers.push(second);
    await run.result();
    await waitUntil(
      async () =>
        (await store.listDeliveries({ destinationConversationId: recipient.id }))[0]!.deliveredAt !== null,
      60_000,
    );
    const [delivery, ...others] = await store.listDeliveries({ destinationConversationId: recipient.id });
    expect(others).toHaveLength(0);
    const message = await store.loadMessage(delivery!.messageId!);
    expect(JSON.parse((message.content[0] as { text: string }).text)).toMatchObject({
      turn_id: run.turnId,
      status: 'completed',
    });
  }, 120_000);
});
