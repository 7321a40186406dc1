/**
 * Issue 45, the first hour: two applications, each with its own SQLite store, on one Temporal
 * dev server, neither naming a task queue. Each store has an identity and a default queue of
 * its own, so no worker runs the other store's turns; a turn sent to a worker of another store
 * anyway (a shared queue named by hand) is refused with a typed error naming both stores.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { createWorker } from '../../src/worker.js';
import { tempSqliteUrl, temporalConnections } from '../helpers/turnkit.js';

const agents = new AgentRegistry([defineAgent({ name: 'echo', instructions: 'Say who served you.' })]);

interface App {
  label: string;
  store: Store;
  worker: TurnKitWorker;
  running: Promise<void>;
  client: TurnKitClient;
  model: ScriptedModel;
}

const apps: App[] = [];
// This test is about the defaults: no queue from the environment either.
const savedQueue = process.env['TURNKIT_TASK_QUEUE'];

beforeAll(async () => {
  delete process.env['TURNKIT_TASK_QUEUE'];
  const { native, client: temporal } = await temporalConnections();
  for (const label of ['a', 'b']) {
    const store = await openStore(tempSqliteUrl(`store-${label}`));
    const model = new ScriptedModel({ echo: () => `served by ${label}` });
    const worker = await createWorker({ store, agents, model, connection: native });
    apps.push({
      label,
      store,
      worker,
      running: worker.run(),
      client: new TurnKitClient({ store, agents, temporal }),
      model,
    });
  }
}, 120_000);

afterAll(async () => {
  for (const app of apps) {
    app.worker.shutdown();
    await app.running;
    await app.store.close();
  }
  if (savedQueue === undefined) delete process.env['TURNKIT_TASK_QUEUE'];
  else process.env['TURNKIT_TASK_QUEUE'] = savedQueue;
});

describe('first hour: two stores on one server', () => {
  it('first hour: two workers with two SQLite stores and the default queue run 20 turns each, 0 by the wrong worker', async () => {
    const [a, b] = apps as [App, App];
    expect(a.store.identity.id).not.toBe(b.store.identity.id);
    // Each store's default queue is its own, and its worker and client both use it.
    expect(a.client.taskQueue).toBe(a.store.identity.defaultTaskQueue);
    expect(a.worker.worker.options.taskQueue).toBe(a.client.taskQueue);
    expect(b.client.taskQueue).toBe(b.store.identity.defaultTaskQueue);
    expect(a.client.taskQueue).not.toBe(b.client.taskQueue);
    const runs = await Promise.all(
      apps.flatMap((app) => Array.from({ length: 20 }, (_, i) => app.client.run('echo', `turn ${i}`))),
    );
    const turns = await Promise.all(runs.map((run) => run.result()));
    const outcomes = turns.map(
      (turn, i) => `${apps[Math.floor(i / 20)]!.label}:${turn.status}:${turn.outputText}`,
    );
    expect(outcomes.filter((o) => o.startsWith('a:'))).toEqual(Array(20).fill('a:completed:served by a'));
    expect(outcomes.filter((o) => o.startsWith('b:'))).toEqual(Array(20).fill('b:completed:served by b'));
    // Each worker's model served exactly its own store's 20 turns.
    expect([a.model.callsFor('echo').length, b.model.callsFor('echo').length]).toEqual([20, 20]);
  }, 180_000);

  it('first hour: a turn of store A sent to the queue of store B is refused with StoreMismatchError naming both stores', async () => {
    const [a, b] = apps as [App, App];
    const { client: temporal } = await temporalConnections();
    const servedByB = b.model.callsFor('echo').length;
    const misrouted = new TurnKitClient({ store: a.store, agents, temporal, taskQueue: b.client.taskQueue });
    const run = await misrouted.run('echo', 'the wrong queue');
    const failure = await temporal.workflow
      .getHandle(run.workflowId)
      .result()
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    // The workflow fails with the refusal of the activity that tried to record the turn's failure.
    let cause = (failure as WorkflowFailedError).cause as { type?: string; message: string; cause?: unknown };
    while (cause.type === undefined && cause.cause) cause = cause.cause as typeof cause;
    expect(cause.type).toBe('StoreMismatchError');
    expect(cause.message).toContain(`turn ${run.turnId} belongs to store ${a.store.identity.id}`);
    expect(cause.message).toContain(`holds store ${b.store.identity.id}`);
    expect(cause.message).not.toMatch(/not found/);
    // Worker B touched nothing of it: its model was never called, and store B has no such turn.
    expect(b.model.callsFor('echo').length).toBe(servedByB);
    await expect(b.store.loadTurn(run.turnId)).rejects.toThrow(/not found/);
  }, 120_000);
});
