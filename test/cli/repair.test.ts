/**
 * `turnkit repair [--dry-run]` as an operator runs it (a spawned process) over a store that a
 * worker of this test serves: a turn whose workflow was terminated mid-tool, and a turn whose
 * workflow start failed after `ask()` committed it. Real dev server, real SQLite file.
 */
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import type { ConversationHandle } from '../../src/client/turnkit-client.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { WorkflowStartError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import { turnWorkflowId } from '../../src/workflows/contract.js';
import type { CliResult } from '../helpers/cli.js';
import { runCli } from '../helpers/cli.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit, tempSqliteUrl } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';
import { hangTool as hang } from '../helpers/tools.js';

const databaseUrl = tempSqliteUrl('cli-repair');

let kit: TestKit;

const turnkit = (args: string[], extraEnv: Record<string, string> = {}): Promise<CliResult> =>
  runCli(args, {
    ...process.env,
    TURNKIT_DATABASE_URL: databaseUrl,
    TURNKIT_TASK_QUEUE: kit.taskQueue,
    TEMPORAL_ADDRESS: process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233',
    NO_COLOR: '1',
    ...extraEnv,
  });

beforeAll(async () => {
  kit = await startKit({
    store: await openStore(databaseUrl),
    agents: [defineAgent({ name: 'holder', tools: [hang] }), defineAgent({ name: 'echoer' })],
    model: new ScriptedModel({
      holder: () => ({ toolCalls: [{ name: 'hang', arguments: {} }] }),
      echoer: (request) => `heard ${request.messages.filter((m) => m.role === 'user').at(-1)?.content ?? ''}`,
    }),
  });
}, 60_000);

afterAll(async () => {
  await kit?.stop();
  await kit?.store.close();
});

describe('turnkit repair', () => {
  it('repair: --dry-run lists the terminated turn and the never-started one and changes nothing; repair fails the one and starts the other', async () => {
    const { client, store } = kit;
    const stuck = await (await client.conversation('holder')).ask('hold');
    await waitUntil(async () => (await stuck.toolExecutions()).some((e) => e.status === 'running'));
    await client.temporal.workflow.getHandle(turnWorkflowId(stuck.turnId)).terminate('operator (test)');

    const conversation = await client.conversation('echoer');
    const orphanId = await orphanedAsk(conversation);

    const dry = await turnkit(['repair', '--dry-run']);
    expect(dry.code).toBe(0);
    const lines = dry.stdout.trim().split('\n').sort();
    expect(lines).toHaveLength(2);
    expect(lines).toContain(
      `${stuck.turnId} running in ${stuck.conversationId}: workflow terminated; would fail (WorkflowClosed)`,
    );
    expect(lines).toContain(
      `${orphanId} pending in ${conversation.id}: workflow not found; would start its workflow`,
    );
    expect(dry.stderr).toContain('2 turns to repair');
    expect((await store.loadTurn(stuck.turnId)).status).toBe('running');
    expect((await store.loadTurn(orphanId)).status).toBe('pending');

    const repaired = await turnkit(['--json', 'repair']);
    expect(repaired.code).toBe(0);
    const findings = JSON.parse(repaired.stdout) as { turnId: string; action: string; done: boolean }[];
    expect(
      findings
        .map(({ turnId, action, done }) => ({ turnId, action, done }))
        .sort((a, b) => (a.action < b.action ? -1 : 1)),
    ).toEqual([
      { turnId: stuck.turnId, action: 'fail', done: true },
      { turnId: orphanId, action: 'start', done: true },
    ]);
    const failed = await store.loadTurn(stuck.turnId);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ class: 'TurnKit::WorkflowClosed', message: 'terminated' });
    expect((await store.listToolExecutions({ turnId: stuck.turnId })).map((e) => e.status)).toEqual([
      'interrupted',
    ]);
    const orphan = await (await client.handle(orphanId)).result();
    expect(orphan.status).toBe('completed');
    expect(orphan.outputText).toBe('heard orphaned');

    const again = await turnkit(['repair', '--dry-run']);
    expect(again.stdout.trim()).toBe('');
    expect(again.stderr).toContain('0 turns to repair');
  });

  it('repair: pointed at another namespace, --dry-run and repair touch no live turn, start nothing there and say why', async () => {
    const { client, store } = kit;
    const other = await emptyNamespace(client.temporal, 'turnkit-repair-other');
    const live = await (await client.conversation('holder')).ask('hold');
    await waitUntil(async () => (await live.toolExecutions()).some((e) => e.status === 'running'));
    const orphanId = await orphanedAsk(await client.conversation('echoer'));
    const before = await Promise.all([live.turnId, orphanId].map((id) => store.loadTurn(id)));

    for (const args of [['repair', '--dry-run'], ['repair']]) {
      const result = await turnkit(args, { TEMPORAL_NAMESPACE: other });
      expect(result.code).toBe(1);
      const lines = result.stdout.trim().split('\n').sort();
      const why = `held: no workflow of this store is found in namespace ${other} (wrong namespace or cluster?)`;
      expect(lines).toEqual(
        [
          `${live.turnId} running in ${live.conversationId}: workflow not found; ${why}; --fail-missing fails it anyway`,
          `${orphanId} pending in ${before[1]!.conversationId}: workflow not found; ${why}; start(turnId) starts it where its workers run`,
        ].sort(),
      );
      expect(result.stderr).toContain(`0 turns ${args.length === 2 ? 'to repair' : 'repaired'}; 2 held`);
      // Nothing written: the rows are exactly as they were, the live tool still runs.
      expect(await Promise.all([live.turnId, orphanId].map((id) => store.loadTurn(id)))).toEqual(before);
      expect((await live.toolExecutions()).map((e) => e.status)).toEqual(['running']);
    }
    // The explicit override: --fail-missing would fail the turn that ran; the orphan stays held.
    const forced = await turnkit(['repair', '--dry-run', '--fail-missing'], { TEMPORAL_NAMESPACE: other });
    expect(forced.stdout).toContain(
      `${live.turnId} running in ${live.conversationId}: workflow not found; would fail`,
    );
    expect(forced.stdout).toContain(
      `${orphanId} pending in ${before[1]!.conversationId}: workflow not found; held:`,
    );
    expect(forced.stderr).toContain('1 turn to repair; 1 held');
    expect((await store.loadTurn(live.turnId)).status).toBe('running');

    // No duplicate workflow was started in the wrong namespace.
    const wrong = new Client({ connection: client.temporal.connection, namespace: other });
    const started = await wrong.workflow
      .getHandle(turnWorkflowId(orphanId))
      .describe()
      .catch((error: unknown) => error);
    expect(started).toBeInstanceOf(WorkflowNotFoundError);

    // In the workers' namespace the live turn is found running, which confirms it: the orphan
    // would be started and the live turn is left alone.
    const right = await turnkit(['repair', '--dry-run']);
    expect(right.code).toBe(0);
    expect(right.stdout.trim()).toBe(
      `${orphanId} pending in ${before[1]!.conversationId}: workflow not found; would start its workflow`,
    );
    await client.temporal.workflow.getHandle(turnWorkflowId(live.turnId)).terminate('test over');
  });
});

/** A namespace of the dev server where none of this store's workflows runs, ready for use. */
async function emptyNamespace(temporal: Client, namespace: string): Promise<string> {
  await temporal.connection.workflowService
    .registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') })
    .catch((error: unknown) => {
      if ((error as { code?: number }).code !== 6) throw error; // ALREADY_EXISTS
    });
  const there = new Client({ connection: temporal.connection, namespace });
  // The frontend knows a new namespace once its cache refreshes: until a describe says "no
  // such workflow" rather than "no such namespace".
  await waitUntil(
    async () =>
      (await there.workflow
        .getHandle('turnkit-probe')
        .describe()
        .catch((error: unknown) => error)) instanceof WorkflowNotFoundError,
    30_000,
  );
  return namespace;
}

/** An `ask()` whose workflow start fails (an unreachable frontend): the orphan's turn id. */
async function orphanedAsk(conversation: ConversationHandle): Promise<string> {
  const unreachable = new Client({
    connection: Connection.lazy({ address: '127.0.0.1:1', interceptors: [] }),
    namespace: kit.client.temporal.options.namespace,
  });
  const broken = new TurnKitClient({
    store: kit.store,
    agents: kit.agents,
    temporal: unreachable,
    taskQueue: kit.taskQueue,
  });
  const error: unknown = await (
    await broken.loadConversation(conversation.id)
  )
    .ask('orphaned')
    .catch((thrown: unknown) => thrown);
  await unreachable.connection.close();
  expect(error).toBeInstanceOf(WorkflowStartError);
  return (error as WorkflowStartError).details?.['turnId'] as string;
}
