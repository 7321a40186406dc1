/**
 * Issue 49, part 1: erasure on the real dev server, on SQLite and on PostgreSQL (the scripted
 * model). A principal with runs, an approval, a post, a schedule and forks is erased; then a
 * planted secret is nowhere: not in any column of any store table, not in any Temporal history
 * of a workflow TurnKit started, not in visibility. Another principal's data is untouched. The
 * erasure runs with a worker whose erasure steps fail once after doing their work (every third
 * step), and completes with the report its dry run predicted; a second erasure finds nothing.
 *
 * On a private dev server of its own: Temporal deletes a closed execution from its queues once
 * every earlier task of the shard is done, and on the shared server other test files' workloads
 * (tasks the server keeps retrying) held such deletions back for more than ten minutes.
 */
import { randomBytes } from 'node:crypto';
import type { WorkflowExecutionInfo } from '@temporalio/client';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import proto from '@temporalio/proto';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import type { ErasureReport } from '../../src/client/erase.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { AuthorizationError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { SqlStore } from '../../src/store/sql/sql-store.js';
import type { Store } from '../../src/store/types.js';
import { createErasure } from '../../src/erasure/erasure-steps.js';
import { createWorker } from '../../src/worker.js';
import type { erasureWorkflow } from '../../src/workflows/erasure-workflow.js';
import { TURNKIT_CONVERSATION_ID } from '../../src/workflows/contract.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import { uniqueTaskQueue } from '../helpers/temporal.js';
import { PrivateTemporalServer, temporalCliProblem } from '../helpers/temporal-server.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

const SECRET = `erase-me-${randomBytes(6).toString('hex')}`;
const KEPT = `keep-me-${randomBytes(6).toString('hex')}`;
const ALICE = { user: 'alice', email: `${SECRET}@example.com` };
const BOB = { user: 'bob' };
const YEARLY = '0 0 1 1 *';

const lookup = defineTool({
  name: 'lookup_account',
  description: 'Looks an account up.',
  input: z.object({ account: z.string() }),
  needsApproval: true,
  execute: ({ account }) => ({ account, balance: 12 }),
});
const child = defineAgent({ name: 'erase_child', description: 'Looks into things.' });
const agents = new AgentRegistry([
  defineAgent({ name: 'erase_agent', tools: [lookup], limits: { maxIterations: 5 } }),
  defineAgent({ name: 'erase_plain' }),
  defineAgent({ name: 'erase_parent', subAgents: [child] }),
]);
const usage = { inputTokens: 10, outputTokens: 3 };
const model = new ScriptedModel({
  erase_agent: (request) =>
    request.messages.some((message) => message.role === 'tool')
      ? { text: 'The balance is 12.', usage }
      : { toolCalls: [{ name: 'lookup_account', arguments: { account: `acct ${SECRET}` } }], usage },
  erase_plain: () => ({ text: 'Noted.', usage }),
  erase_parent: (request) =>
    request.messages.some((message) => message.role === 'tool')
      ? { text: 'Delegated.', usage }
      : { toolCalls: [{ name: 'erase_child', arguments: { task: `Find out about ${SECRET}` } }], usage },
  erase_child: () => ({ text: `Found ${SECRET}.`, usage }),
});

/** Every third erasure step fails once, after it did its work (deleted its batches, say). */
function failingSteps(counter: { calls: number; failed: number }): ActivityInterceptorsFactory {
  return (context) => ({
    inbound: {
      async execute(input, next) {
        const result = await next(input);
        if (
          context.info.activityType === 'eraseStep' &&
          context.info.attempt === 1 &&
          ++counter.calls % 3 === 0
        ) {
          counter.failed++;
          throw new Error('injected: the erasure step failed after its work');
        }
        return result;
      },
    },
  });
}

/** Every column of every table (cast to text) that holds `needle`, as `table.column`. */
async function storeHits(store: Store, needle: string): Promise<string[]> {
  const sql = (store as SqlStore).statements();
  const sqlite = sql.dialect.name === 'sqlite';
  const columns = sqlite
    ? (
        await Promise.all(
          (await sql.read(`SELECT name FROM sqlite_master WHERE type = 'table'`)).map(async (table) =>
            (await sql.read(`SELECT name FROM pragma_table_info(?)`, [table['name']])).map((column) => [
              String(table['name']),
              String(column['name']),
            ]),
          ),
        )
      ).flat()
    : (
        await sql.read(
          `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`,
        )
      ).map((row) => [String(row['table_name']), String(row['column_name'])]);
  expect(columns.length).toBeGreaterThan(40);
  const hits: string[] = [];
  for (const [table, column] of columns) {
    const cast = sqlite ? `CAST("${column}" AS TEXT)` : `"${column}"::text`;
    const [row] = await sql.read(`SELECT COUNT(*) AS n FROM "${table}" WHERE ${cast} LIKE ?`, [
      `%${needle}%`,
    ]);
    if (Number(row?.['n']) > 0) hits.push(`${table}.${column}`);
  }
  return hits;
}

async function listed(temporal: Client, query: string): Promise<WorkflowExecutionInfo[]> {
  const found: WorkflowExecutionInfo[] = [];
  for await (const info of temporal.workflow.list({ query })) found.push(info);
  return found;
}

/** A run's whole history as the server serializes it, or null when it is gone. */
async function historyBytes(
  temporal: Client,
  run: { workflowId: string; runId: string },
): Promise<Buffer | null> {
  try {
    const history = await temporal.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
    return Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
  } catch (error) {
    if (error instanceof WorkflowNotFoundError || /not found/i.test((error as Error).message)) return null;
    throw error;
  }
}

const withoutId = (report: ErasureReport) => ({ ...report, erasureId: '', dryRun: false });

/** The file's private server, started once for both stores' suites. */
let server: Promise<PrivateTemporalServer> | undefined;
const privateServer = () =>
  (server ??= PrivateTemporalServer.onFreePorts().then(async (started) => {
    await started.start();
    return started;
  }));

function serverAvailable(): boolean {
  const problem = temporalCliProblem();
  if (problem === null) return true;
  const ci = process.env['CI'];
  if (ci && ci !== 'false' && ci !== '0')
    throw new Error(`cannot run a private Temporal dev server: ${problem}`);
  console.warn(`\n!!! SKIPPING the erasure suites: cannot run a private Temporal dev server: ${problem}\n`);
  return false;
}

function erasureSuite(openTestStore: () => Promise<{ store: Store; close(): Promise<void> }>) {
  let store: Store;
  let close: () => Promise<void>;
  let temporal: Client;
  let client: TurnKitClient;
  let stopWorker: () => Promise<void>;
  let closeConnections: () => Promise<void>;
  const taskQueue = uniqueTaskQueue('privacy-erase');
  const counter = { calls: 0, failed: 0 };

  beforeAll(async () => {
    ({ store, close } = await openTestStore());
    const { address } = await privateServer();
    const connection = await Connection.connect({ address });
    const native = await NativeConnection.connect({ address });
    closeConnections = async () => {
      await connection.close();
      await native.close();
    };
    temporal = new Client({ connection, namespace: 'default' });
    const worker = await createWorker({
      store,
      agents,
      model,
      connection: native,
      taskQueue,
      worker: { interceptors: { activity: [failingSteps(counter)] } },
    });
    const running = worker.run();
    stopWorker = async () => {
      worker.shutdown();
      await running;
    };
    client = new TurnKitClient({ store, agents, temporal, taskQueue });
  }, 240_000);
  afterAll(async () => {
    await stopWorker?.();
    await closeConnections?.();
    await close?.();
  });

  /**
   * Alice's data: a run with an approval, a post, a schedule's firing, her fork and Bob's fork of
   * hers, and a run whose sub-agent has a conversation of its own.
   */
  async function plantAlice(scheduleId: string) {
    const run = await client.run('erase_agent', `Look up the account of ${SECRET}`, { principal: ALICE });
    await waitUntil(async () => (await run.pendingApprovals()).length > 0);
    const [pending] = await run.pendingApprovals();
    await run.approve(pending!.toolCallId, { note: `approved for ${SECRET}`, principal: ALICE });
    expect((await run.result()).status).toBe('completed');
    const conversation = await client.loadConversation(run.conversationId);
    const receipt = await conversation.post(`And the other account of ${SECRET}?`, { principal: ALICE });
    expect((await (await client.handle(receipt.turnId!)).result()).status).toBe('completed');
    const [first] = await store.listMessages(run.conversationId);
    const aliceFork = await client.fork(run.conversationId, { at: first!.id });
    const bobFork = await client.fork(run.conversationId, { at: first!.id, principal: BOB });
    const schedule = await client.schedule('erase_plain', `Daily digest for ${SECRET}`, {
      id: scheduleId,
      cron: YEARLY,
      principal: ALICE,
    });
    await schedule.trigger();
    let firings: Awaited<ReturnType<typeof schedule.runs>> = [];
    await waitUntil(async () => {
      firings = await schedule.runs();
      return firings.length === 1 && (await firings[0]!.status()) === 'completed';
    });
    await waitUntil(async () => (await schedule.describe()).runningFirings.length === 0);
    const parent = await client.run('erase_parent', `Delegate the case of ${SECRET}`, { principal: ALICE });
    expect((await parent.result()).status).toBe('completed');
    const [sub] = await (store as SqlStore)
      .statements()
      .read(
        `SELECT DISTINCT conversation_id FROM turnkit_turns WHERE root_turn_id = ? AND conversation_id <> ?`,
        [parent.turnId, parent.conversationId],
      );
    return {
      conversations: [
        run.conversationId,
        aliceFork.id,
        bobFork.id,
        firings[0]!.conversationId,
        parent.conversationId,
        String(sub!['conversation_id']),
      ],
      scheduleId,
    };
  }

  it('privacy: a principal with runs, an approval, a post, a schedule and forks is erased everywhere; another principal is untouched; an erasure failing halfway completes with the same report', async () => {
    const alice = await plantAlice(`erase-${process.pid}-${Date.now().toString(36)}`);
    const bobRun = await client.run('erase_plain', `Remember ${KEPT}`, { principal: BOB });
    expect((await bobRun.result()).status).toBe('completed');
    const bobMessages = await store.listMessages(bobRun.conversationId);
    // Six turns, the lane of the conversation posted to, the schedule's firing.
    let started: WorkflowExecutionInfo[] = [];
    await waitUntil(async () => (started = await listed(temporal, `TaskQueue = '${taskQueue}'`)).length >= 8);
    expect(await storeHits(store, SECRET)).not.toEqual([]);

    // The dry run counts and changes nothing.
    const dry = await client.erase({ principal: ALICE }, { dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, subject: 'principal', schedules: 1 });
    // The run's conversation, the two forks, the firing's, the delegating run's and its sub-agent's.
    expect(dry.rows.conversations).toBe(6);
    expect(dry.rows.turns).toBe(5);
    expect(dry.rows.toolExecutions).toBe(2);
    expect(dry.rows.deliveries).toBeGreaterThanOrEqual(1);
    // One ledger row per turn tree: the sub-agent's turn is in its parent's tree.
    expect(dry.rows.budgetLedger).toBe(4);
    // Five turns, the lane of the conversation posted to, the firing.
    expect(dry.workflows).toBe(7);
    expect((await store.loadConversation(alice.conversations[0]!)).id).toBe(alice.conversations[0]);

    const report = await client.erase({ principal: ALICE }, { batchSize: 2 });
    expect(counter.failed).toBeGreaterThan(0);
    expect(withoutId(report)).toEqual(withoutId(dry));
    expect(report.erasureId).toMatch(/^erasure_/);

    // The store: not a byte of the secret in any column of any table; Bob's rows all there.
    expect(await storeHits(store, SECRET)).toEqual([]);
    expect(await storeHits(store, KEPT)).not.toEqual([]);
    expect(await store.listMessages(bobRun.conversationId)).toEqual(bobMessages);
    for (const id of alice.conversations)
      await expect(store.loadConversation(id)).rejects.toThrow(/not found/);

    // Temporal: every history of Alice's is gone, and no history left on the queue holds the secret.
    const aliceRuns = started.filter(
      (run) =>
        run.workflowId !== `turnkit-turn-${bobRun.turnId}` && !run.workflowId.endsWith(bobRun.conversationId),
    );
    let remaining: string[] = [];
    await waitUntil(async () => {
      remaining = [];
      for (const run of aliceRuns)
        if ((await historyBytes(temporal, run)) !== null) remaining.push(run.workflowId);
      return remaining.length === 0;
      // Temporal deletes a closed execution from its queues after the call returned (after the
      // shard's earlier tasks: under load, a minute or more).
    }, 180_000).catch((error: unknown) => {
      throw new Error(`histories left: ${remaining.join(', ')}`, { cause: error });
    });
    expect(
      await historyBytes(temporal, { workflowId: `turnkit-turn-${bobRun.turnId}`, runId: '' }),
    ).not.toBeNull();
    for (const run of await listed(temporal, `TaskQueue = '${taskQueue}'`)) {
      const bytes = await historyBytes(temporal, run);
      expect(bytes?.includes(SECRET) ?? false, run.workflowId).toBe(false);
    }
    // Visibility: nothing listed by Alice's conversations or her schedule.
    const byAlice = alice.conversations.map((id) => `'${id}'`).join(', ');
    await waitUntil(
      async () =>
        (await listed(temporal, `${TURNKIT_CONVERSATION_ID.name} IN (${byAlice})`)).length === 0 &&
        (await listed(temporal, `TurnKitScheduleId = '${alice.scheduleId}'`)).length === 0,
      180_000,
    );
    await expect(client.getSchedule(alice.scheduleId).describe()).rejects.toThrow(/no schedule/);
    expect(
      await listed(temporal, `${TURNKIT_CONVERSATION_ID.name} = '${bobRun.conversationId}'`),
    ).toHaveLength(1);

    // A second erasure of the same subject finds nothing left.
    const again = await client.erase({ principal: ALICE });
    expect(again.workflows + again.schedules + Object.values(again.rows).reduce((a, b) => a + b, 0)).toBe(0);
  }, 480_000);

  it('privacy: erase asks the policy for `erase` (a refusal is an AuthorizationError and removes nothing); a conversation is erased alone', async () => {
    const run = await client.run('erase_plain', `Hello ${SECRET}`, { principal: BOB });
    await run.result();
    const other = await client.run('erase_plain', `Hello again ${KEPT}`, { principal: BOB });
    await other.result();
    const asked: unknown[] = [];
    const guarded = new TurnKitClient({
      store,
      agents,
      temporal,
      taskQueue,
      authorization: (request) => {
        asked.push(request);
        return request['principal'] === 'dpo';
      },
    });
    await expect(
      guarded.erase({ conversationId: run.conversationId }, { by: 'intern' }),
    ).rejects.toBeInstanceOf(AuthorizationError);
    expect(asked[0]).toMatchObject({
      action: 'erase',
      principal: 'intern',
      conversation: run.conversationId,
      owner: BOB,
    });
    expect((await store.loadConversation(run.conversationId)).id).toBe(run.conversationId);

    const report = await guarded.erase({ conversationId: run.conversationId }, { by: 'dpo' });
    expect(report).toMatchObject({ subject: 'conversation', schedules: 0, workflows: 1 });
    expect(report.rows).toMatchObject({ conversations: 1, turns: 1 });
    await expect(store.loadConversation(run.conversationId)).rejects.toThrow(/not found/);
    expect((await store.loadConversation(other.conversationId)).id).toBe(other.conversationId);
    expect(await storeHits(store, SECRET)).toEqual([]);
  }, 120_000);

  it('privacy: the erasure workflow continues as new after its steps per run, and its history holds ids only', async () => {
    const run = await client.run('erase_plain', `Hello ${SECRET}`, { principal: { user: 'erin' } });
    await run.result();
    const dry = await client.erase({ conversationId: run.conversationId }, { dryRun: true });
    const erasureId = `erasure_${randomBytes(8).toString('hex')}`;
    await createErasure(
      (store as SqlStore).statements(),
      erasureId,
      { conversationId: run.conversationId },
      1,
    );
    const handle = await temporal.workflow.start<typeof erasureWorkflow>('erasureWorkflow', {
      workflowId: `turnkit-erase-${erasureId}`,
      taskQueue,
      args: [{ erasureId, storeId: store.identity.id, stepsPerRun: 2 }],
    });
    const report = await handle.result();
    expect(withoutId(report)).toEqual(withoutId(dry));
    const runs = await listed(temporal, `WorkflowId = 'turnkit-erase-${erasureId}'`);
    expect(runs.length).toBeGreaterThanOrEqual(3);
    for (const each of runs) {
      const bytes = await historyBytes(temporal, each);
      expect(bytes?.includes(SECRET)).toBe(false);
      expect(bytes?.includes(run.conversationId)).toBe(false);
    }
    // The same id again: the erasure is over, and waiting for it gives its report.
    expect(withoutId(await client.erase({ conversationId: run.conversationId }, { erasureId }))).toEqual(
      withoutId(dry),
    );
  }, 120_000);
}

afterAll(async () => {
  await (await server)?.dispose();
});

describe.skipIf(!serverAvailable())('privacy: erasure (issue 49), SQLite', () => {
  erasureSuite(async () => {
    const store = await openStore(tempSqliteUrl('erasure'));
    return { store, close: () => store.close() };
  });
});

describePostgres('privacy: erasure (issue 49), PostgreSQL', () => {
  if (!serverAvailable()) return;
  erasureSuite(async () => {
    const opened = await openPgTestStore();
    return { store: opened.store, close: () => opened.drop() };
  });
});
