/**
 * Nothing left behind (issue 27, decision 33): a turn whose workflow is gone without its
 * terminal write is repaired when its lane needs it; a failed start after `ask()` does not
 * wedge the conversation; the lane keeps the wakes that arrive during its continue-as-new
 * and those of a step that failed. Real dev server, real SQLite, a scripted model.
 */
import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { applyFinding, diagnoseTurn } from '../../src/engine/end/repair.js';
import { Runtime } from '../../src/engine/runtime.js';
import { outcomeUnknown } from '../../src/engine/step/result-texts.js';
import { WorkflowStartError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import { openStore } from '../../src/store/index.js';
import type { ContentPart, Store } from '../../src/store/types.js';
import {
  laneStartOptions,
  laneWorkflowId,
  turnWorkflowId,
  wakeSignal,
} from '../../src/workflows/contract.js';
import type { laneWorkflow } from '../../src/workflows/lane-workflow.js';
import { createWorker } from '../../src/worker.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import { temporalConnections, tempSqliteUrl } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';
import { hangTool as hang } from '../helpers/tools.js';

/** The text of the newest user message: what the model answers to. */
const lastUserText = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
const model = new ScriptedModel({
  // The first message makes it call `hang`; any later one is answered.
  holder: (request) =>
    lastUserText(request) === 'hold'
      ? { toolCalls: [{ name: 'hang', arguments: {} }] }
      : `heard ${lastUserText(request)}`,
  echoer: (request) => `heard ${lastUserText(request)}`,
});

// The lane steps as the worker runs them: a step can be held after it did its work (to land a
// wake in it), or made to fail once before it does anything (its activity attempts used up).
// A conversation in `failing` has every lane step fail; `attempts` counts its steps.
const laneSteps = {
  holdNext: false,
  entered: gate(),
  release: gate(),
  failNext: false,
  failed: 0,
  failing: new Set<string>(),
  attempts: new Map<string, number>(),
};

const agents = new AgentRegistry([
  defineAgent({ name: 'holder', tools: [hang] }),
  defineAgent({ name: 'echoer' }),
]);

/** A worker (its lane steps observable, see `laneSteps`) and a client over `store`. */
interface Served {
  store: Store;
  client: TurnKitClient;
  temporal: Client;
  taskQueue: string;
  stop(): Promise<void>;
}

async function serve(store: Store): Promise<Served> {
  const connections = await temporalConnections();
  const temporal = connections.client;
  const taskQueue = `turnkit-vanished-${process.pid}-${Date.now()}-${store.backend}`;
  const worker: TurnKitWorker = await createWorker({
    store,
    agents,
    model,
    connection: connections.native,
    taskQueue,
    worker: {
      interceptors: {
        activity: [
          (context) => ({
            inbound: {
              async execute(input, next) {
                if (context.info.activityType !== 'laneStep') return next(input);
                const { conversationId } = input.args[0] as { conversationId: string };
                laneSteps.attempts.set(conversationId, (laneSteps.attempts.get(conversationId) ?? 0) + 1);
                if (laneSteps.failing.has(conversationId)) {
                  throw ApplicationFailure.nonRetryable('the store is down for good (test)', 'StoreError');
                }
                if (laneSteps.failNext) {
                  laneSteps.failNext = false;
                  laneSteps.failed += 1;
                  throw ApplicationFailure.nonRetryable('the store is down (test)', 'StoreError');
                }
                const result = await next(input);
                if (laneSteps.holdNext) {
                  laneSteps.holdNext = false;
                  laneSteps.entered.open();
                  await laneSteps.release.promise;
                }
                return result;
              },
            },
          }),
        ],
      },
    },
  });
  const running = worker.run();
  const client = new TurnKitClient({ store, agents, temporal, taskQueue });
  return {
    store,
    client,
    temporal,
    taskQueue,
    async stop() {
      worker.shutdown();
      await running;
    },
  };
}

const textOf = (content: ContentPart[] | string) =>
  typeof content === 'string'
    ? content
    : content.map((p) => ('text' in p && typeof p.text === 'string' ? p.text : '')).join('');

async function terminatedMidTool({ store, client, temporal }: Served): Promise<void> {
  const conversation = await client.conversation('holder');
  const first = await conversation.ask('hold');
  await waitUntil(async () => (await first.toolExecutions()).some((e) => e.status === 'running'));
  await temporal.workflow.getHandle(turnWorkflowId(first.turnId)).terminate('operator (test)');
  // Nothing wrote the turn's end: the row still holds the lane.
  expect((await store.loadTurn(first.turnId)).status).toBe('running');

  // The next message's claim is refused by the lane; the refusal asks Temporal about the
  // turn that holds it, which is repaired, and the lane runs the next turn.
  const second = await conversation.ask('next');
  const result = await second.result();
  expect(result.status).toBe('completed');
  expect(result.outputText).toBe('heard next');

  const failed = await store.loadTurn(first.turnId);
  expect(failed.status).toBe('failed');
  expect(failed.error).toMatchObject({ class: 'TurnKit::WorkflowClosed', message: 'terminated' });
  expect(failed.claimToken).toBeNull();
  const executions = await store.listToolExecutions({ turnId: first.turnId });
  expect(executions.map((e) => e.status)).toEqual(['interrupted']);
  const results = await store.listMessages(conversation.id, { toolExecutionId: executions[0]!.id });
  expect(results).toHaveLength(1);
  expect(textOf(results[0]!.content)).toContain(outcomeUnknown('turn failed: its workflow terminated'));
  const events = await store.listEvents(first.turnId);
  expect(events.filter((e) => e.type === 'turn.failed')).toHaveLength(1);
  expect(events.filter((e) => e.type === 'tool_call.interrupted').map((e) => e.payload)).toEqual([
    { id: executions[0]!.toolCallId, name: 'hang', tool_execution_id: executions[0]!.id },
  ]);
}

async function terminatedInQueue({ store, client, temporal }: Served): Promise<void> {
  const conversation = await client.conversation('holder');
  const first = await conversation.ask('hold');
  await waitUntil(async () => (await first.toolExecutions()).some((e) => e.status === 'running'));
  const queued = await conversation.ask('queued');
  await temporal.workflow.getHandle(turnWorkflowId(queued.turnId)).terminate('operator (test)');
  expect((await store.loadTurn(queued.turnId)).status).toBe('pending');
  // The queued turn at the lane's head is found closed and failed (by the next turn's
  // refused claim, or by the lane when it would start it); once the running turn ends
  // (cancelled), the lane runs the next one.
  const third = await conversation.ask('third');
  await first.cancel();
  expect((await third.result()).outputText).toBe('heard third');
  const failed = await store.loadTurn(queued.turnId);
  expect(failed.status).toBe('failed');
  expect(failed.error).toMatchObject({ class: 'TurnKit::WorkflowClosed', message: 'terminated' });
}

async function failedStart({ store, client, temporal, taskQueue }: Served): Promise<void> {
  // A client whose Temporal frontend is unreachable: the rows commit, the start fails for real.
  const unreachable = new Client({
    connection: Connection.lazy({ address: '127.0.0.1:1', interceptors: [] }),
    namespace: temporal.options.namespace,
  });
  const broken = new TurnKitClient({ store, agents, temporal: unreachable, taskQueue });
  const conversation = await client.conversation('echoer');
  const error = await (await broken.loadConversation(conversation.id)).ask('first').then(
    () => null,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(WorkflowStartError);
  const orphanId = (error as WorkflowStartError).details?.['turnId'] as string;
  const orphan = await store.loadTurn(orphanId);
  expect(orphan.status).toBe('pending');
  expect(orphan.submittedAt).not.toBeNull();

  const second = await conversation.ask('second');
  expect((await second.result()).outputText).toBe('heard second');
  const first = await store.loadTurn(orphanId);
  expect(first.status).toBe('completed');
  expect(first.outputText).toBe('heard first');
  const after = await store.loadTurn(second.turnId);
  expect(first.completedAt! <= after.startedAt!).toBe(true);
  await unreachable.connection.close();
}

async function wakeDuringContinueAsNew({ store, client, temporal, taskQueue }: Served): Promise<void> {
  const conversation = await client.conversation('echoer');
  laneSteps.holdNext = true;
  // A lane that continues as new after every step; its first step is held once done.
  const opened = await temporal.workflow.signalWithStart<typeof laneWorkflow, []>('laneWorkflow', {
    ...laneStartOptions(conversation.id),
    args: [{ conversationId: conversation.id, stepsPerRun: 1 }],
    taskQueue,
  });
  await laneSteps.entered.promise;
  // The message and its wake land while that step is held: the step did not see the message.
  const delivery = await client.sendMessage(conversation.id, 'during the step', {
    key: `can-${conversation.id}`,
  });
  laneSteps.release.open();

  await waitUntil(async () => {
    const turns = await store.listTurns({ conversationId: conversation.id, status: ['completed'] });
    return turns.some((turn) => turn.outputText === 'heard during the step');
  }, 25_000);
  expect((await store.loadDelivery(delivery.id)).deliveredAt).not.toBeNull();
  const firstRun = await temporal.workflow
    .getHandle(laneWorkflowId(conversation.id), opened.signaledRunId)
    .describe();
  expect(firstRun.status.name).toBe('CONTINUED_AS_NEW');
}

async function failedLaneStep({ store, client }: Served): Promise<void> {
  const conversation = await client.conversation('echoer');
  laneSteps.failNext = true;
  const failedBefore = laneSteps.failed;
  await client.sendMessage(conversation.id, 'after a failed step', { key: `failed-${conversation.id}` });
  await waitUntil(async () => {
    const turns = await store.listTurns({ conversationId: conversation.id, status: ['completed'] });
    return turns.some((turn) => turn.outputText === 'heard after a failed step');
  }, 25_000);
  expect(laneSteps.failed).toBe(failedBefore + 1);
}

async function failingLaneGoesIdle({ store, client, temporal, taskQueue }: Served): Promise<void> {
  const conversation = await client.conversation('echoer');
  const id = conversation.id;
  laneSteps.failing.add(id);
  // A lane that gives up after 2 failed steps in a row, and continues as new after every step
  // (so the count is carried from run to run).
  await temporal.workflow.signalWithStart<typeof laneWorkflow, []>('laneWorkflow', {
    ...laneStartOptions(id),
    args: [{ conversationId: id, stepsPerRun: 1, failureLimit: 2 }],
    taskQueue,
  });
  const lane = temporal.workflow.getHandle(laneWorkflowId(id));
  const details = async () =>
    (await lane.query<{ currentDetails?: string }>('__temporal_workflow_metadata')).currentDetails ?? '';
  await waitUntil(async () => (await details()).includes('**lane step failing**: 2 in a row'), 25_000);
  expect(laneSteps.attempts.get(id)).toBe(2);
  // The open run waits for a wake: its idle timer started, no step scheduled.
  const runEvents = async () => (await lane.fetchHistory()).events ?? [];
  await waitUntil(async () => (await runEvents()).some((e) => e.timerStartedEventAttributes), 25_000);
  const events = await runEvents();
  expect(events.filter((e) => e.activityTaskScheduledEventAttributes)).toHaveLength(0);
  expect(events.filter((e) => e.timerStartedEventAttributes)).toHaveLength(1);
  expect(laneSteps.attempts.get(id)).toBe(2);
  expect((await lane.describe()).status.name).toBe('RUNNING');

  // A real wake tries once more, and the lane goes idle again at once.
  await lane.signal(wakeSignal);
  await waitUntil(async () => (await details()).includes('**lane step failing**: 3 in a row'), 25_000);
  expect(laneSteps.attempts.get(id)).toBe(3);

  // Once the store is back, the next wake (a message) runs the step and the message is answered.
  laneSteps.failing.delete(id);
  await client.sendMessage(id, 'after the outage', { key: `outage-${id}` });
  await waitUntil(async () => {
    const turns = await store.listTurns({ conversationId: id, status: ['completed'] });
    return turns.some((turn) => turn.outputText === 'heard after the outage');
  }, 25_000);
  expect(await details()).not.toContain('lane step failing');
}

async function fencedWrite({ store, client, temporal, taskQueue }: Served): Promise<void> {
  const conversation = await client.conversation('holder');
  const run = await conversation.ask('hold');
  await waitUntil(async () => (await run.toolExecutions()).some((e) => e.status === 'running'));
  // Its workflow runs: repair leaves it alone.
  expect((await client.repair({ dryRun: true })).map((f) => f.turnId)).not.toContain(run.turnId);
  expect((await client.repair()).map((f) => f.turnId)).not.toContain(run.turnId);
  expect((await store.loadTurn(run.turnId)).status).toBe('running');

  await temporal.workflow.getHandle(turnWorkflowId(run.turnId)).terminate('operator (test)');
  const seen = await store.loadTurn(run.turnId);
  const finding = await diagnoseTurn(temporal, seen);
  expect(finding).toMatchObject({ turnId: run.turnId, action: 'fail', workflow: 'terminated', done: false });
  // After Temporal answered, a new run takes the turn (as a reset's run does, decision 1).
  const taken = await store.atomic(conversation.id, () =>
    store.claimTurn(run.turnId, {
      from: 'running',
      to: 'running',
      claimToken: 'a-newer-run',
      heartbeatAt: new Date().toISOString(),
    }),
  );
  expect(taken?.claimToken).toBe('a-newer-run');
  const context = { runtime: new Runtime({ store, agents }), temporal, taskQueue };
  expect(await applyFinding(context, seen, finding!)).toMatchObject({ action: 'fail', done: false });
  const after = await store.loadTurn(run.turnId);
  expect(after.status).toBe('running');
  expect(after.claimToken).toBe('a-newer-run');
  expect((await store.listToolExecutions({ turnId: run.turnId })).map((e) => e.status)).toEqual(['running']);
}

describe('vanished workflows and lost wake-ups (SQLite)', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serve(await openStore(tempSqliteUrl('vanished')));
  }, 60_000);
  afterAll(async () => {
    await served?.stop();
    await served?.store.close();
  });
  it('repair: a terminated turn (its tool running) fails with WorkflowClosed, its call gets one "outcome unknown" result, and its conversation takes the next message', () =>
    terminatedMidTool(served));
  it('repair: a turn whose workflow is terminated while it waits for its lane fails, and the lane still runs the turns after it', () =>
    terminatedInQueue(served));
  it('repair: an ask() whose workflow start fails throws WorkflowStartError; the next ask() on the conversation runs it first, then itself', () =>
    failedStart(served));
  it('repair: a wake that arrives during the lane step before its continue-as-new is carried into the next run', () =>
    wakeDuringContinueAsNew(served));
  it('repair: the repair write is fenced: a turn whose workflow runs is left alone, and a row a newer run took after Temporal answered is not failed', () =>
    fencedWrite(served));
  it('repair: a lane step that fails keeps its wake and is tried again, so the message is delivered', () =>
    failedLaneStep(served));
  it('repair: a lane whose steps keep failing stops retrying after its failure limit (carried across continue-as-new), says so in its details, and the next wake tries again', () =>
    failingLaneGoesIdle(served));
});

describePostgres('vanished workflows on PostgreSQL', () => {
  let served: Served;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const pg = await openPgTestStore();
    drop = pg.drop;
    served = await serve(pg.store);
  }, 60_000);
  afterAll(async () => {
    await served?.stop();
    await drop?.();
  });
  it('repair: (PostgreSQL) a terminated turn (its tool running) fails with WorkflowClosed, its call gets one "outcome unknown" result, and its conversation takes the next message', () =>
    terminatedMidTool(served));
  it('repair: (PostgreSQL) a turn whose workflow is terminated while it waits for its lane fails, and the lane still runs the turns after it', () =>
    terminatedInQueue(served));
  it('repair: (PostgreSQL) an ask() whose workflow start fails throws WorkflowStartError; the next ask() on the conversation runs it first, then itself', () =>
    failedStart(served));
});
