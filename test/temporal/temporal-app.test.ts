/**
 * TurnKit inside an existing Temporal application (issue 47), on the real dev server: the
 * application's own worker, workflows and activity, with TurnKitPlugin; its workflows call
 * agents with `turnkit/workflow`. Only the model is scripted.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { historyFromJSON, historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { Client, WorkflowFailedError } from '@temporalio/client';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { AiSdkPlugin } from '@temporalio/ai-sdk';
import { SimplePlugin } from '@temporalio/plugin';
import { customProvider } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentRegistry } from '../../src/agents/registry.js';
import { agentCallIds } from '../../src/engine/agent-call.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { TurnKitPlugin } from '../../src/worker.js';
import { appAgents, appModel } from '../fixtures/apps/app-agents.js';
import {
  connectClient,
  connectNative,
  requireTemporal,
  temporalAddress,
  temporalNamespace,
  uniqueTaskQueue,
} from '../helpers/temporal.js';
import { waitUntil } from '../helpers/wait.js';
import type { WorkerProcess } from '../helpers/worker-process.js';
import { spawnWorker } from '../helpers/worker-process.js';

const execFileAsync = promisify(execFile);
const workflowsPath = fileURLToPath(new URL('../fixtures/apps/app-workflows.ts', import.meta.url));
const appWorkerScript = fileURLToPath(new URL('../fixtures/apps/app-worker.ts', import.meta.url));
const historyFile = fileURLToPath(
  new URL('../fixtures/histories/apps/research-and-write.json', import.meta.url),
);

/** Turns in the store's SQLite file, read as any other process would. */
function turnCount(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM turnkit_turns').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe.skipIf(!(await requireTemporal()))('temporal app: TurnKitPlugin in an application worker', () => {
  let dir: string;
  let dbPath: string;
  let store: Store;
  let taskQueue: string;
  let worker: Worker;
  let running: Promise<void>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'turnkit-app-'));
    dbPath = join(dir, 'turnkit.sqlite');
    store = await openStore(dbPath);
    taskQueue = uniqueTaskQueue('turnkit-app');
    worker = await Worker.create({
      connection: await connectNative(),
      namespace: 'default',
      taskQueue,
      workflowsPath,
      activities: { recordOrder: async (order: string) => `recorded ${order}` },
      plugins: [new TurnKitPlugin({ store, agents: new AgentRegistry(appAgents), model: appModel() })],
    });
    running = worker.run();
  }, 120_000);
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await store?.close();
  });

  it('temporal app: a workflow calls two agents in sequence, the second on the first output; its own workflow and activity run beside', async () => {
    const client = await connectClient();
    const workflowId = `app-research-${Date.now()}`;
    const handle = await client.workflow.start('researchAndWrite', {
      taskQueue,
      workflowId,
      args: ['the sky'],
    });
    const result = (await handle.result()) as {
      facts: { turnId: string; status: string; outputText: string; usage: { total_tokens: number } | null };
      article: { turnId: string; status: string; outputText: string; cost: number };
    };
    expect(result.facts.status).toBe('completed');
    expect(result.facts.outputText).toBe('the sky is blue');
    expect(result.article.status).toBe('completed');
    expect(result.article.outputText).toBe('article on: Write a line from these facts: the sky is blue');
    // The turns' ids derive from the calling run and the call's number.
    const runId = handle.firstExecutionRunId;
    expect(result.facts.turnId).toBe(agentCallIds(`${workflowId}/${runId}#0`).turnId);
    expect(result.article.turnId).toBe(agentCallIds(`${workflowId}/${runId}#1`).turnId);
    const facts = await store.loadTurn(result.facts.turnId);
    expect(facts.options['principal']).toEqual({ id: 'app-user' });
    expect((facts.options['budget_limits'] as { max_iterations: number }).max_iterations).toBe(4);
    // Children of the application's workflow, as Temporal users see them.
    const history = await handle.fetchHistory();
    const children = history.events!.filter((e) => e.startChildWorkflowExecutionInitiatedEventAttributes);
    expect(
      children.map((e) => e.startChildWorkflowExecutionInitiatedEventAttributes!.workflowType!.name),
    ).toEqual(['turnWorkflow', 'turnWorkflow']);
    // Digests only: the transcript's messages never enter the parent's history.
    const size = JSON.stringify(historyToJSON(history));
    expect(size).not.toContain('Task:\\n');
    if (process.env['TURNKIT_RECORD_APP_HISTORY'] || !existsSync(historyFile)) {
      mkdirSync(join(historyFile, '..'), { recursive: true });
      writeFileSync(historyFile, `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 2)}\n`);
    }
    // The application's own workflow and activity, on the same worker.
    expect(
      await client.workflow.execute('placeOrder', {
        taskQueue,
        workflowId: `app-order-${Date.now()}`,
        args: ['o-1'],
      }),
    ).toBe('recorded o-1');
  }, 120_000);

  it('temporal app: cancelling the parent cancels the running turn, and the store says so', async () => {
    const client = await connectClient();
    const workflowId = `app-slow-${Date.now()}`;
    const handle = await client.workflow.start('waitOnSlowAgent', {
      taskQueue,
      workflowId,
      args: ['take your time'],
    });
    const turnId = agentCallIds(`${workflowId}/${handle.firstExecutionRunId}#0`).turnId;
    await waitUntil(
      async () => (await store.loadTurn(turnId).catch(() => null))?.status === 'running',
      60_000,
    );
    await handle.cancel();
    const failure = await handle.result().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect((await handle.describe()).status.name).toBe('CANCELLED');
    const turn = await store.loadTurn(turnId);
    expect(turn.status).toBe('cancelled');
    const events = await store.listEvents(turnId);
    expect(events.map((e) => e.type)).toContain('turn.cancelled');
  }, 120_000);

  it("temporal app: the parent's recorded history replays", async () => {
    const history = historyFromJSON(JSON.parse(readFileSync(historyFile, 'utf8')));
    await Worker.runReplayHistory(
      {
        workflowsPath,
        plugins: [new TurnKitPlugin({ store, agents: new AgentRegistry(appAgents) })],
      },
      history,
    );
  }, 120_000);
});

describe.skipIf(!(await requireTemporal()))('temporal app: a killed application worker', () => {
  const workers: WorkerProcess[] = [];
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
  });

  it('temporal app: the parent, with its worker killed mid-turn, completes with exactly one turn per call', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'turnkit-app-kill-'));
    const dbPath = join(dir, 'turnkit.sqlite');
    const taskQueue = uniqueTaskQueue('turnkit-app-kill');
    const env = {
      TURNKIT_DATABASE_URL: dbPath,
      TURNKIT_TEST_TASK_QUEUE: taskQueue,
      TURNKIT_TEST_MODEL_DELAY_MS: '500',
    };
    const marker = join(dir, 'crashed');
    const first = spawnWorker(
      { ...env, TURNKIT_TEST_CRASH_ON: 'model.completed', TURNKIT_TEST_CRASH_MARKER: marker },
      appWorkerScript,
    );
    workers.push(first);
    await first.ready;
    const client = await connectClient();
    const workflowId = `app-kill-${Date.now()}`;
    const handle = await client.workflow.start('researchAndWrite', {
      taskQueue,
      workflowId,
      args: ['the sea'],
    });
    const exit = await first.exited;
    expect(exit.signal, first.output()).toBe('SIGKILL');
    const crashedTurn = readFileSync(marker, 'utf8');
    expect(crashedTurn).toBe(agentCallIds(`${workflowId}/${handle.firstExecutionRunId}#0`).turnId);
    const second = spawnWorker(env, appWorkerScript);
    workers.push(second);
    const result = (await handle.result()) as {
      facts: { status: string; turnId: string };
      article: { status: string };
    };
    expect(result.facts.status).toBe('completed');
    expect(result.facts.turnId).toBe(crashedTurn);
    expect(result.article.status).toBe('completed');
    expect(turnCount(dbPath)).toBe(2);
  }, 180_000);
});

/** The Temporal CLI this checkout's dev server uses (temporal-dev.sh records where). */
function temporalCli(): string {
  const recorded = join(process.cwd(), '.temporal', 'venv', 'turnkit-cli-path');
  return existsSync(recorded) ? readFileSync(recorded, 'utf8').trim() : 'temporal';
}

async function cli(...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(temporalCli(), [...args, '--address', temporalAddress()]);
  return stdout;
}

const CALLER_NAMESPACE = 'turnkit-app-callers';

describe.skipIf(!(await requireTemporal()))(
  'temporal app: agents offered to another namespace through Nexus',
  () => {
    let store: Store;
    let dbPath: string;
    let endpoint: string;
    let handler: Worker;
    let caller: Worker;
    let callerClient: Client;
    let callerQueue: string;
    const running: Promise<void>[] = [];
    const asked: { action: string; principal: unknown }[] = [];

    beforeAll(async () => {
      dbPath = join(mkdtempSync(join(tmpdir(), 'turnkit-app-nexus-')), 'turnkit.sqlite');
      store = await openStore(dbPath);
      const handlerQueue = uniqueTaskQueue('turnkit-nexus-handler');
      callerQueue = uniqueTaskQueue('turnkit-nexus-caller');
      // The other team's namespace, and the endpoint that routes its calls to TurnKit's queue.
      await cli('operator', 'namespace', 'create', '--namespace', CALLER_NAMESPACE).catch((error: Error) => {
        if (!/already/i.test(error.message)) throw error;
      });
      endpoint = `turnkit-${handlerQueue.replace(/[^a-zA-Z0-9]/g, '-')}`;
      await cli(
        'operator',
        'nexus',
        'endpoint',
        'create',
        '--name',
        endpoint,
        '--target-namespace',
        temporalNamespace(),
        '--target-task-queue',
        handlerQueue,
      );
      const connection = await connectNative();
      handler = await Worker.create({
        connection,
        namespace: temporalNamespace(),
        taskQueue: handlerQueue,
        plugins: [
          new TurnKitPlugin({
            store,
            agents: new AgentRegistry(appAgents),
            model: appModel(),
            nexus: true,
            // What the policy is asked, and as whom: every request allowed.
            authorization: (request) => (
              asked.push({ action: request.action, principal: request.principal }),
              true
            ),
          }),
        ],
      });
      // A namespace just created takes a moment to be served everywhere: the worker retries.
      await waitUntil(async () => {
        caller = await Worker.create({
          connection,
          namespace: CALLER_NAMESPACE,
          taskQueue: callerQueue,
          workflowsPath: fileURLToPath(new URL('../fixtures/apps/caller-workflows.ts', import.meta.url)),
        }).catch(() => undefined as unknown as Worker);
        return caller !== undefined;
      }, 60_000);
      running.push(handler.run(), caller.run());
      const base = await connectClient();
      callerClient = new Client({ connection: base.connection, namespace: CALLER_NAMESPACE });
    }, 180_000);
    afterAll(async () => {
      handler?.shutdown();
      caller?.shutdown();
      await Promise.all(running);
      if (endpoint) {
        const listed = await cli(
          'operator',
          'nexus',
          'endpoint',
          'get',
          '--name',
          endpoint,
          '--output',
          'json',
        ).catch(() => '');
        if (listed) await cli('operator', 'nexus', 'endpoint', 'delete', '--name', endpoint).catch(() => '');
      }
      await store?.close();
    });

    it('temporal app: a caller workflow in a second namespace runs an agent through a Nexus endpoint made with the CLI, and gets the digest', async () => {
      const digest = (await callerClient.workflow.execute('askThroughNexus', {
        taskQueue: callerQueue,
        workflowId: `nexus-ask-${Date.now()}`,
        args: [
          endpoint,
          { agent: 'researcher', task: 'Find facts about the sea', principal: { id: 'team-b' } },
        ],
      })) as { status: string; outputText: string; turnId: string };
      expect(digest.status).toBe('completed');
      expect(digest.outputText).toBe('the sky is blue');
      const turn = await store.loadTurn(digest.turnId);
      expect(turn.options['principal']).toEqual({ id: 'team-b' });
    }, 180_000);

    it("temporal app: a cancel from the Nexus caller ends the turn, authorized as the caller's principal", async () => {
      const handle = await callerClient.workflow.start('askThroughNexus', {
        taskQueue: callerQueue,
        workflowId: `nexus-cancel-${Date.now()}`,
        args: [endpoint, { agent: 'slow', task: 'Take your time', principal: { id: 'team-b' } }],
      });
      const slowTurn = () => {
        const db = new Database(dbPath, { readonly: true });
        try {
          return db.prepare("SELECT id, status FROM turnkit_turns WHERE agent_name = 'slow'").get() as
            { id: string; status: string } | undefined;
        } finally {
          db.close();
        }
      };
      await waitUntil(async () => slowTurn()?.status === 'running', 90_000);
      await handle.cancel();
      await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError);
      await waitUntil(async () => slowTurn()?.status === 'cancelled', 60_000);
      // The cancel reached the policy as the caller's principal.
      expect(asked).toContainEqual({ action: 'cancel', principal: { id: 'team-b' } });
      const events = await store.listEvents(slowTurn()!.id);
      expect(events.map((e) => e.type)).toContain('turn.cancelled');
    }, 180_000);
  },
);

const XOR_ENCODING = 'binary/app-xor';

/**
 * The encodings of every payload in a history's JSON, but those the SDK writes for itself and
 * never encodes: search attributes, and a marker's bookkeeping (its patch id, a local
 * activity's identity) beside its `result`.
 */
function payloadEncodings(node: unknown): string[] {
  if (!node || typeof node !== 'object') return [];
  if (Array.isArray(node)) return node.flatMap(payloadEncodings);
  const object = node as Record<string, unknown>;
  if ('markerName' in object)
    return payloadEncodings((object['details'] as Record<string, unknown> | undefined)?.['result']);
  const metadata = object['metadata'] as Record<string, string> | undefined;
  const own =
    metadata?.['encoding'] && 'data' in object
      ? [Buffer.from(metadata['encoding'], 'base64').toString()]
      : [];
  return [
    ...own,
    ...Object.entries(object)
      .filter(([key]) => key !== 'searchAttributes' && key !== 'metadata')
      .flatMap(([, value]) => payloadEncodings(value)),
  ];
}

/** An application's own payload codec (a stand-in for its encryption): every payload scrambled. */
class AppCodec implements PayloadCodec {
  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => ({
      metadata: { encoding: new TextEncoder().encode(XOR_ENCODING) },
      data: proto.temporal.api.common.v1.Payload.encode(payload)
        .finish()
        .map((byte) => byte ^ 0x5a),
    }));
  }
  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) =>
      new TextDecoder().decode(payload.metadata?.['encoding'] ?? new Uint8Array()) === XOR_ENCODING
        ? (proto.temporal.api.common.v1.Payload.decode(payload.data!.map((byte) => byte ^ 0x5a)) as Payload)
        : payload,
    );
  }
}

describe.skipIf(!(await requireTemporal()))(
  'temporal app: TurnKitPlugin beside other plugins and a codec',
  () => {
    it('temporal app: one worker with an application codec, another SimplePlugin and TurnKitPlugin runs the parent; every payload in history is encoded', async () => {
      const store = await openStore(
        join(mkdtempSync(join(tmpdir(), 'turnkit-app-codec-')), 'turnkit.sqlite'),
      );
      const taskQueue = uniqueTaskQueue('turnkit-app-codec');
      const dataConverter = { payloadCodecs: [new AppCodec()] };
      const audited: string[] = [];
      // Another team's plugin: an activity of its own, merged by SimplePlugin's rules.
      const audit = new SimplePlugin({
        name: 'app-audit',
        activities: { recordOrder: async (order: string) => (audited.push(order), `audited ${order}`) },
      });
      const worker = await Worker.create({
        connection: await connectNative(),
        namespace: temporalNamespace(),
        taskQueue,
        workflowsPath,
        dataConverter,
        plugins: [
          audit,
          new TurnKitPlugin({ store, agents: new AgentRegistry(appAgents), model: appModel() }),
        ],
      });
      const running = worker.run();
      try {
        const base = await connectClient();
        const client = new Client({
          connection: base.connection,
          namespace: temporalNamespace(),
          dataConverter,
        });
        const workflowId = `app-codec-${Date.now()}`;
        const result = (await client.workflow.execute('researchAndWrite', {
          taskQueue,
          workflowId,
          args: ['the moon'],
        })) as { facts: { status: string; turnId: string }; article: { status: string; outputText: string } };
        expect(result.facts.status).toBe('completed');
        expect(result.article.outputText).toBe('article on: Write a line from these facts: the sky is blue');
        expect(
          await client.workflow.execute('placeOrder', {
            taskQueue,
            workflowId: `${workflowId}-order`,
            args: ['o-2'],
          }),
        ).toBe('audited o-2');
        expect(audited).toEqual(['o-2']);
        // The parent's and the turn's histories, as the server holds them: only encoded payloads.
        for (const id of [workflowId, `turnkit-turn-${result.facts.turnId}`]) {
          const events = JSON.parse(
            historyToJSON(await base.workflow.getHandle(id).fetchHistory()),
          ) as unknown;
          const encodings = payloadEncodings(events);
          expect(encodings.length, id).toBeGreaterThan(0);
          expect(new Set(encodings), id).toEqual(new Set([XOR_ENCODING]));
        }
      } finally {
        worker.shutdown();
        await running;
        await store.close();
      }
    }, 180_000);
  },
);

describe.skipIf(!(await requireTemporal()))('temporal app: TurnKitPlugin beside @temporalio/ai-sdk', () => {
  it("temporal app: one worker with @temporalio/ai-sdk's plugin, TurnKitPlugin and an application codec runs a workflow that uses both", async () => {
    const store = await openStore(join(mkdtempSync(join(tmpdir(), 'turnkit-app-ai-')), 'turnkit.sqlite'));
    const taskQueue = uniqueTaskQueue('turnkit-app-ai');
    const dataConverter = { payloadCodecs: [new AppCodec()] };
    const prompts: string[] = [];
    const mock = new MockLanguageModelV4({
      doGenerate: async (options) => {
        prompts.push(JSON.stringify(options.prompt));
        return {
          content: [{ type: 'text', text: 'summary: blue' }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage: {
            inputTokens: { total: 5, noCache: 5, cacheRead: 0, cacheWrite: 0 },
            outputTokens: { total: 2, text: 2, reasoning: 0 },
          },
          warnings: [],
        };
      },
    });
    const worker = await Worker.create({
      connection: await connectNative(),
      namespace: temporalNamespace(),
      taskQueue,
      workflowsPath: fileURLToPath(new URL('../fixtures/apps/ai-workflows.ts', import.meta.url)),
      dataConverter,
      plugins: [
        new AiSdkPlugin({ modelProvider: customProvider({ languageModels: { mock } }) }),
        new TurnKitPlugin({ store, agents: new AgentRegistry(appAgents), model: appModel() }),
      ],
    });
    const running = worker.run();
    try {
      const base = await connectClient();
      const client = new Client({
        connection: base.connection,
        namespace: temporalNamespace(),
        dataConverter,
      });
      const workflowId = `app-ai-${Date.now()}`;
      const result = await client.workflow.execute('researchThenSummarize', {
        taskQueue,
        workflowId,
        args: ['the sky'],
      });
      expect(result).toEqual({ facts: 'the sky is blue', status: 'completed', summary: 'summary: blue' });
      expect(prompts).toHaveLength(1);
      expect(prompts[0]).toContain('Summarize: the sky is blue');
      const history = JSON.parse(
        historyToJSON(await base.workflow.getHandle(workflowId).fetchHistory()),
      ) as unknown;
      expect(new Set(payloadEncodings(history))).toEqual(new Set([XOR_ENCODING]));
    } finally {
      worker.shutdown();
      await running;
      await store.close();
    }
  }, 180_000);
});
