/**
 * Issue 27, worker churn and roll-outs: Worker Versioning (createWorker's `deployment`) on
 * the real dev server with a real SQLite store, and the prebuilt workflow bundles. Only the
 * model is scripted: one ScriptedModel per build, so each model call shows which build ran it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ArgumentError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { createWorker } from '../../src/worker.js';
import {
  turnWorkflowBundle,
  WORKFLOW_BUNDLE_FILES,
  writeTurnWorkflowBundles,
} from '../../src/worker-bundles.js';
import { deploymentWorkerOptions } from '../../src/worker-deployment.js';
import { requireTemporal, temporalAddress, temporalNamespace, uniqueTaskQueue } from '../helpers/temporal.js';
import { temporalConnections, tempSqliteUrl } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';
import { agents as cliAgents } from '../fixtures/cli-agents.js';

const bin = fileURLToPath(new URL('../../src/cli/bin.ts', import.meta.url));
const cliAgentsModule = fileURLToPath(new URL('../fixtures/cli-agents.ts', import.meta.url));

/** `turnkit worker …` as a process; `output()` is what it printed so far. */
function turnkitWorker(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), bin, 'worker', ...args], {
    env: {
      ...process.env,
      TURNKIT_AGENTS: cliAgentsModule,
      TEMPORAL_ADDRESS: temporalAddress(),
      NO_COLOR: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, output: () => output };
}

const temporalUp = await requireTemporal();

const wire = defineTool({
  name: 'wire',
  description: 'Sends money; a person approves each call.',
  input: z.object({ amount: z.number() }),
  needsApproval: true,
  execute: ({ amount }) => ({ wired: amount }),
});
const agents = [
  defineAgent({ name: 'payer', tools: [wire] }),
  defineAgent({ name: 'slow' }),
  defineAgent({ name: 'assistant' }),
];

/** The `slow` agent's first model call holds here until the test opens it. */
const slowGate = gate();
let slowEntered = 0;

/** A build's model: every call is recorded on this instance (so by build). */
function modelOf(build: string): ScriptedModel {
  const toolAnswered = (messages: { role: string }[]) => messages.some((m) => m.role === 'tool');
  return new ScriptedModel({
    payer: (request) =>
      toolAnswered(request.messages)
        ? `paid on ${build}`
        : { toolCalls: [{ name: 'wire', arguments: { amount: 5 } }] },
    slow: async () => {
      slowEntered += 1;
      await slowGate.promise;
      return `slow done on ${build}`;
    },
    assistant: () => `hello from ${build}`,
  });
}

describe.skipIf(!temporalUp)('roll-out', () => {
  let native: NativeConnection;
  let temporal: Client;
  let store: Store;
  let client: TurnKitClient;
  const taskQueue = uniqueTaskQueue('turnkit-roll-out');
  const deploymentName = `turnkit-roll-out-${process.pid}-${Date.now()}`;
  const running: { worker: TurnKitWorker; done: Promise<void> }[] = [];

  const startBuild = async (buildId: string, model: ScriptedModel) => {
    const worker = await createWorker({
      store,
      agents: new AgentRegistry(agents),
      model,
      connection: native,
      taskQueue,
      deployment: { name: deploymentName, buildId },
    });
    running.push({ worker, done: worker.run() });
  };

  /** `temporal worker deployment set-current-version`: accepted once the build's workers poll. */
  const makeCurrent = async (buildId: string, deployment = deploymentName) => {
    await waitUntil(async () => {
      try {
        await temporal.workflowService.setWorkerDeploymentCurrentVersion({
          namespace: temporalNamespace(),
          deploymentName: deployment,
          buildId,
          identity: 'roll-out test',
        });
        return true;
      } catch {
        return false;
      }
    }, 30_000);
    // The new routing reaches the task queues asynchronously: until the server says it has,
    // a workflow started now may still be given to the previous build.
    await waitUntil(async () => {
      const { workerDeploymentInfo: info } = await temporal.workflowService.describeWorkerDeployment({
        namespace: temporalNamespace(),
        deploymentName: deployment,
      });
      return (
        info?.routingConfig?.currentDeploymentVersion?.buildId === buildId &&
        info.routingConfigUpdateState ===
          proto.temporal.api.enums.v1.RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED
      );
    }, 30_000);
  };

  /** The build that ran the workflow's tasks, and its versioning behaviour, as Temporal reports them. */
  const versioning = async (run: RunHandle) => {
    const described = await temporal.workflow.getHandle(run.workflowId).describe();
    const info = described.raw.workflowExecutionInfo?.versioningInfo;
    return { buildId: info?.deploymentVersion?.buildId, behavior: info?.behavior };
  };

  beforeAll(async () => {
    ({ native, client: temporal } = await temporalConnections());
    store = await openStore(tempSqliteUrl('roll-out'));
    client = new TurnKitClient({ store, agents: new AgentRegistry(agents), temporal, taskQueue });
  });
  afterAll(async () => {
    slowGate.open();
    for (const { worker } of running) worker.shutdown();
    await Promise.all(running.map((r) => r.done));
    await store?.close();
  });

  it('roll-out: from build 1 to build 2 with turns in flight (two awaiting approval, one in a model call): every one completes on build 1, new turns and the conversations next turns run on build 2', async () => {
    const one = modelOf('b1');
    const two = modelOf('b2');
    await startBuild('b1', one);
    await makeCurrent('b1');

    // In flight on build 1: two turns awaiting approval, one inside its model call.
    const approvals = [await client.run('payer', 'pay alice'), await client.run('payer', 'pay bob')];
    const slow = await client.run('slow', 'take your time');
    for (const run of approvals) await waitUntil(async () => (await run.pendingApprovals()).length === 1);
    await waitUntil(async () => slowEntered === 1);

    // The roll-out: build 2 starts and becomes current while build 1 keeps serving.
    await startBuild('b2', two);
    await makeCurrent('b2');

    // New turns start on build 2.
    const fresh = [await client.run('assistant', 'hi'), await client.run('payer', 'pay carol')];
    expect((await fresh[0]!.result()).outputText).toBe('hello from b2');
    await waitUntil(async () => (await fresh[1]!.pendingApprovals()).length === 1);
    await fresh[1]!.approve((await fresh[1]!.pendingApprovals())[0]!.toolCallId, { principal: 'ops' });
    expect((await fresh[1]!.result()).outputText).toBe('paid on b2');
    for (const run of fresh) expect(await versioning(run)).toEqual({ buildId: 'b2', behavior: 1 });

    // The turns in flight finish on the build they started on (pinned), approvals included.
    for (const run of approvals) {
      const [pending] = await run.pendingApprovals();
      await run.approve(pending!.toolCallId, { principal: 'ops' });
    }
    slowGate.open();
    expect((await slow.result()).outputText).toBe('slow done on b1');
    for (const run of approvals) {
      const turn = await run.result();
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('paid on b1');
    }
    for (const run of [...approvals, slow])
      expect(await versioning(run)).toEqual({ buildId: 'b1', behavior: 1 });
    // Build 1's model ran only the turns started before the switch, build 2's only the later ones.
    const turnsOf = (model: ScriptedModel) => new Set(model.calls.map((c) => c.request.metadata.turnId));
    expect(turnsOf(one)).toEqual(new Set([...approvals, slow].map((r) => r.turnId)));
    expect(turnsOf(two)).toEqual(new Set(fresh.map((r) => r.turnId)));

    // The conversation of a turn that finished on build 1 goes on on build 2 (its model reads
    // the earlier tool result there and answers).
    const next = await (await client.loadConversation(approvals[0]!.conversationId)).ask('and now dave');
    expect((await next.result()).outputText).toBe('paid on b2');
    expect(await versioning(next)).toEqual({ buildId: 'b2', behavior: 1 });
    expect(turnsOf(two).has(next.turnId)).toBe(true);
  }, 240_000);

  it('roll-out: a deployment name or build id that is empty or has spaces is an ArgumentError; deployment and workerDeploymentOptions together too', async () => {
    expect(() => deploymentWorkerOptions({ name: '', buildId: 'b1' })).toThrow(ArgumentError);
    expect(() => deploymentWorkerOptions({ name: 'app', buildId: 'build 1' })).toThrow(
      /deployment.buildId must be/,
    );
    expect(deploymentWorkerOptions({ name: 'app', buildId: 'v1.2.3+abc' }).workerDeploymentOptions).toEqual({
      version: { deploymentName: 'app', buildId: 'v1.2.3+abc' },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'AUTO_UPGRADE',
    });
    await expect(
      createWorker({
        store,
        agents: new AgentRegistry(agents),
        connection: native,
        taskQueue,
        deployment: { name: 'app', buildId: 'b1' },
        worker: {
          workerDeploymentOptions: {
            version: { deploymentName: 'app', buildId: 'b1' },
            useWorkerVersioning: true,
            defaultVersioningBehavior: 'PINNED',
          },
        },
      }),
    ).rejects.toThrow(ArgumentError);
  });

  it('roll-out: turnkit worker --deployment without --build-id is refused before it connects', async () => {
    const worker = turnkitWorker(['--deployment', 'app'], {
      TURNKIT_DATABASE_URL: tempSqliteUrl('cli-refused'),
    });
    expect(await worker.exited).not.toBe(0);
    expect(worker.output()).toContain('--deployment and --build-id go together');
  }, 60_000);

  it('roll-out: turnkit worker --deployment --build-id serves that build: it can be made current and runs the turns', async () => {
    const cliDeployment = `${deploymentName}-cli`;
    const queue = uniqueTaskQueue('turnkit-roll-out-cli');
    const url = tempSqliteUrl('cli-worker');
    const worker = turnkitWorker(['--deployment', cliDeployment, '--build-id', 'b3'], {
      TURNKIT_DATABASE_URL: url,
      TURNKIT_TASK_QUEUE: queue,
    });
    const cliStore = await openStore(url);
    try {
      await waitUntil(async () => worker.output().includes(`deployment ${cliDeployment} build b3`), 60_000);
      await makeCurrent('b3', cliDeployment);
      const cliClient = new TurnKitClient({
        store: cliStore,
        agents: new AgentRegistry(cliAgents),
        temporal,
        taskQueue: queue,
      });
      const run = await cliClient.run('helper', 'Define durable');
      expect((await run.result()).status).toBe('completed');
      expect(await versioning(run)).toEqual({ buildId: 'b3', behavior: 1 });
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await cliStore.close();
    }
  }, 120_000);

  it('roll-out: a worker runs turns from a prebuilt workflow bundle; a named directory without one is an ArgumentError', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'turnkit-bundles-'));
    const written = await writeTurnWorkflowBundles(dir);
    expect(written).toEqual({
      plain: join(dir, WORKFLOW_BUNDLE_FILES.plain),
      traced: join(dir, WORKFLOW_BUNDLE_FILES.traced),
    });
    expect(await turnWorkflowBundle({ dir })).toEqual({ codePath: written.plain });
    expect(await turnWorkflowBundle({ dir, traced: true })).toEqual({ codePath: written.traced });
    // From source (tests run by tsx) with nothing named: bundled now.
    expect(await turnWorkflowBundle({})).toHaveProperty('code');
    const empty = mkdtempSync(join(tmpdir(), 'turnkit-no-bundles-'));
    await expect(turnWorkflowBundle({ dir: empty })).rejects.toThrow(ArgumentError);

    const prebuiltStore = await openStore(tempSqliteUrl('prebuilt'));
    const queue = uniqueTaskQueue('turnkit-prebuilt');
    const model = modelOf('prebuilt');
    const worker = await createWorker({
      store: prebuiltStore,
      agents: new AgentRegistry(agents),
      model,
      connection: native,
      taskQueue: queue,
      workflowBundles: dir,
    });
    // Worker churn (decision 51): workflow-task pollers scale with the backlog by default.
    expect(worker.worker.options.workflowTaskPollerBehavior).toMatchObject({ type: 'autoscaling' });
    const done = worker.run();
    try {
      const prebuiltClient = new TurnKitClient({
        store: prebuiltStore,
        agents: new AgentRegistry(agents),
        temporal,
        taskQueue: queue,
      });
      const run = await prebuiltClient.run('assistant', 'hi');
      expect((await run.result()).outputText).toBe('hello from prebuilt');
    } finally {
      worker.shutdown();
      await done;
      await prebuiltStore.close();
    }
  }, 120_000);
  it('roll-out: an app that sets its own workflow-task pollers keeps them (no autoscaling forced on it)', async () => {
    const own = await openStore('memory:');
    const worker = await createWorker({
      store: own,
      agents: new AgentRegistry(agents),
      model: modelOf('own'),
      connection: native,
      taskQueue: uniqueTaskQueue('turnkit-own-pollers'),
      worker: { workflowTaskPollerBehavior: { type: 'simple-maximum', maximum: 4 } },
    });
    expect(worker.worker.options.workflowTaskPollerBehavior).toEqual({ type: 'simple-maximum', maximum: 4 });
    const done = worker.run();
    worker.shutdown();
    await done;
    await own.close();
  });
});
