/**
 * Issue 31, scheduled agents on Temporal Schedules: a schedule's firing writes an ordinary
 * turn and runs it as its child; overlap policies, budgets, bad input, the signed definition
 * and `turnkit schedule`. Real dev server, real SQLite (and PostgreSQL for the firing's
 * idempotency); only the model is scripted.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import type { ScheduleHandle } from '../../src/client/schedules.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { ScheduledTurnInput, ScheduledTurnResult } from '../../src/contract/schedule.js';
import type { AuthorizationRequest } from '../../src/engine/runtime.js';
import { Runtime } from '../../src/engine/runtime.js';
import { prepareScheduledTurn } from '../../src/engine/schedule/firing.js';
import { ArgumentError, ConfigError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import { connectClient, temporalAddress, temporalNamespace } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit, tempSqliteUrl } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';

const KEY = 'schedules-test-signing-key-0123456789';
const run = promisify(execFile);
const userTexts = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === 'user').map((m) => m.content);
const held = { gate: gate(), entered: 0 };
const model = new ScriptedModel({
  // Each call costs 0.3 USD (provider-reported), and says how many user messages it read.
  reporter: (request) => ({
    text: `report after ${userTexts(request).length} user message(s)`,
    usage: { inputTokens: 1, outputTokens: 1, cost: 0.3 },
  }),
  // Holds its first call until the test opens the gate: the run "still works".
  slowpoke: async () => {
    held.entered += 1;
    await held.gate.promise;
    return 'done slowly';
  },
  // Calls a tool that awaits a person's approval: a run that waits until cancelled.
  approver: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'wired'
      : { toolCalls: [{ name: 'wire', arguments: { amount: 1 } }] },
});
const wire = defineTool({
  name: 'wire',
  description: 'Wires money once approved.',
  input: z.object({ amount: z.number() }),
  needsApproval: true,
  execute: ({ amount }) => ({ wired: amount }),
});
const agents = [
  defineAgent({ name: 'reporter' }),
  defineAgent({ name: 'slowpoke' }),
  defineAgent({ name: 'approver', tools: [wire] }),
];
const seen: AuthorizationRequest[] = [];

let kit: TestKit;
let client: TurnKitClient;
const created: ScheduleHandle[] = [];
const uid = (name: string) => `${name}-${process.pid}-${Date.now().toString(36)}`;

/** The Temporal CLI that temporal-dev.sh uses: on PATH, or the one it installed. */
function temporalCli(): string {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'temporal'))) return join(dir, 'temporal');
  }
  return readFileSync(join(process.cwd(), '.temporal', 'venv', 'turnkit-cli-path'), 'utf8').trim();
}
const cli = async (...args: string[]) =>
  (await run(temporalCli(), [...args, '--address', temporalAddress(), '--namespace', temporalNamespace()]))
    .stdout;

async function schedule(...args: Parameters<TurnKitClient['schedule']>): Promise<ScheduleHandle> {
  const handle = await client.schedule(...args);
  created.push(handle);
  return handle;
}

/** Waits until the schedule's runs (Temporal visibility) number `count`, all finished. */
async function finishedRuns(handle: ScheduleHandle, count: number) {
  let runs = await handle.runs();
  await waitUntil(async () => {
    runs = await handle.runs();
    if (runs.length !== count) return false;
    const statuses = await Promise.all(runs.map((r) => r.status()));
    return statuses.every((s) => ['completed', 'failed', 'cancelled'].includes(s));
  }, 25_000);
  return runs;
}

/**
 * No firing of the schedule is open: under `skip` a trigger while the last firing closes
 * (its turn just finished) is skipped, as it should be.
 */
async function idle(handle: ScheduleHandle): Promise<void> {
  await waitUntil(async () => (await handle.describe()).runningFirings.length === 0, 15_000);
}

/** The result of the schedule's newest firing workflow. */
async function lastFiring(handle: ScheduleHandle): Promise<ScheduledTurnResult> {
  let workflowId: string | undefined;
  await waitUntil(async () => {
    workflowId = (await handle.describe()).recentFirings.at(-1)?.workflowId;
    return workflowId !== undefined;
  }, 15_000);
  return (await client.temporal.workflow.getHandle(workflowId!).result()) as ScheduledTurnResult;
}

// A yearly cron: nothing fires by itself while the tests run; they trigger.
const YEARLY = '0 0 1 1 *';

describe('scheduled agents on Temporal Schedules', () => {
  beforeAll(async () => {
    kit = await startKit({
      agents,
      model,
      runtime: {
        signingKey: KEY,
        authorization: (request) => {
          seen.push(request);
          return true;
        },
      },
    });
    client = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal: kit.client.temporal,
      taskQueue: kit.taskQueue,
      signingKey: KEY,
    });
  });

  afterAll(async () => {
    for (const handle of created) await handle.delete().catch(() => undefined);
    held.gate.open();
    await kit?.stop();
  });

  it('schedule: found with `temporal schedule list`, triggered, paused and deleted', async () => {
    const handle = await schedule('reporter', 'Write the nightly report.', {
      id: uid('nightly'),
      cron: YEARLY,
      principal: { user: 'ops' },
    });
    expect(handle.scheduleId).toBe(`turnkit-schedule-${handle.id}`);
    const listed = async () =>
      (JSON.parse(await cli('schedule', 'list', '-o', 'json')) as { scheduleId: string }[]).map(
        (s) => s.scheduleId,
      );
    await waitUntil(async () => (await listed()).includes(handle.scheduleId), 15_000);

    await handle.trigger();
    const [turnRun] = await finishedRuns(handle, 1);
    const turn = await kit.store.loadTurn(turnRun!.turnId);
    expect(turn).toMatchObject({ agentName: 'reporter', status: 'completed', parentTurnId: null });
    expect(turn.options['principal']).toEqual({ user: 'ops' });
    // A new conversation per firing, with the task as a run's task message.
    const messages = await kit.store.listMessages(turn.conversationId);
    expect(messages[0]).toMatchObject({
      role: 'user',
      metadata: { source: 'schedule', task: true, schedule_id: handle.id },
    });
    expect(messages[0]!.content).toEqual([{ type: 'text', text: 'Task:\nWrite the nightly report.' }]);
    expect(turn.outputText).toBe('report after 1 user message(s)');
    // The turn's workflow is found by agent and schedule, as any turn is.
    const described = await client.temporal.workflow.getHandle(turnRun!.workflowId).describe();
    const attribute = (name: string) =>
      described.typedSearchAttributes.getAll().find((pair) => pair.key.name === name)?.value;
    expect(attribute('TurnKitScheduleId')).toBe(handle.id);
    expect(attribute('TurnKitAgent')).toBe('reporter');
    expect(await lastFiring(handle)).toEqual({ turnId: turn.id, status: 'completed' });

    await handle.pause('maintenance');
    expect(await handle.describe()).toMatchObject({ paused: true, note: 'maintenance', firings: 1 });
    const paused = JSON.parse(
      await cli('schedule', 'describe', '--schedule-id', handle.scheduleId, '-o', 'json'),
    ) as {
      schedule: { state: { paused?: boolean } };
    };
    expect(paused.schedule.state.paused).toBe(true);
    await handle.unpause();
    expect((await handle.describe()).paused).toBe(false);

    await handle.delete();
    await expect(handle.describe()).rejects.toThrow(ArgumentError);
    await waitUntil(async () => !(await listed()).includes(handle.scheduleId), 15_000);
    // Its run stays: an ordinary turn.
    expect((await kit.store.loadTurn(turn.id)).status).toBe('completed');
  });

  it('schedule: overlap skip skips a firing while the previous run still works', async () => {
    held.gate = gate();
    held.entered = 0;
    const handle = await schedule('slowpoke', 'Take your time.', { id: uid('skip'), cron: YEARLY });
    expect((await handle.describe()).overlap).toBe('skip');
    await handle.trigger();
    await waitUntil(async () => held.entered === 1, 20_000);
    await handle.trigger();
    await waitUntil(async () => (await handle.describe()).skippedOverlap === 1, 15_000);
    const info = await handle.describe();
    expect(info.firings).toBe(1);
    expect(info.runningFirings).toHaveLength(1);

    held.gate.open();
    const [first] = await finishedRuns(handle, 1);
    expect(await first!.status()).toBe('completed');
    // Free again (its firing closed): the next trigger runs.
    await idle(handle);
    await handle.trigger();
    const runs = await finishedRuns(handle, 2);
    expect(runs.map((r) => r.turnId)).toContain(first!.turnId);
    expect(held.entered).toBe(2);
  });

  it('schedule: overlap cancel_other cancels the running turn as the schedule principal, then the next firing runs', async () => {
    const handle = await schedule('approver', 'Wire the monthly fee.', {
      id: uid('cancel'),
      cron: YEARLY,
      overlap: 'cancel_other',
      principal: { user: 'billing' },
    });
    await handle.trigger();
    let runs = await handle.runs();
    await waitUntil(async () => {
      runs = await handle.runs();
      return runs.length === 1 && (await runs[0]!.pendingApprovals()).length === 1;
    }, 20_000);
    const first = runs[0]!;
    await handle.trigger();
    await waitUntil(async () => (await first.status()) === 'cancelled', 20_000);
    // TurnKit's cancel, authorized as any: the schedule's principal, signed by the worker.
    const cancel = seen.find((r) => r.action === 'cancel' && r['turn'] === first.turnId);
    expect(cancel).toMatchObject({ principal: { user: 'billing' }, verified: true, descendants: 'retain' });
    // The next firing's turn runs (and waits for its approval in turn).
    await waitUntil(async () => {
      runs = await handle.runs();
      return runs.length === 2 && (await runs[0]!.pendingApprovals()).length === 1;
    }, 20_000);
    const second = runs.find((r) => r.turnId !== first.turnId)!;
    const [call] = await second.pendingApprovals();
    await second.approve(call!.toolCallId, { principal: { user: 'billing' } });
    expect(await second.result()).toMatchObject({ status: 'completed', outputText: 'wired' });
  });

  it('schedule: conversation id posts each firing into that conversation as a normal turn', async () => {
    const conversation = await client.conversation('reporter');
    await (await conversation.ask('Keep the numbers short.')).result();
    const handle = await schedule('reporter', 'Post the daily numbers.', {
      id: uid('daily'),
      every: '1 day',
      conversation: conversation.id,
    });
    expect(await handle.describe()).toMatchObject({ conversation: conversation.id, everyMs: 86_400_000 });
    await handle.trigger();
    const [turnRun] = await finishedRuns(handle, 1);
    const turn = await kit.store.loadTurn(turnRun!.turnId);
    expect(turn.conversationId).toBe(conversation.id);
    // It read the conversation so far: two user messages.
    expect(turn.outputText).toBe('report after 2 user message(s)');
    const messages = await conversation.messages();
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['user', [{ type: 'text', text: 'Keep the numbers short.' }]],
      ['assistant', expect.anything()],
      ['user', [{ type: 'text', text: 'Post the daily numbers.' }]],
      ['assistant', expect.anything()],
    ]);
    expect(messages[2]!.metadata).toEqual({ schedule_id: handle.id });
  });

  it('schedule: a budget caps each run and the spend per day; a day at its cap runs nothing', async () => {
    const handle = await schedule('reporter', 'Spend a little.', {
      id: uid('budget'),
      cron: YEARLY,
      budget: { maxSpend: 1, maxIterations: 3, maxSpendPerDay: 0.5 },
    });
    await handle.trigger();
    const [first] = await finishedRuns(handle, 1);
    const limits = async (turnId: string) => (await kit.store.loadTurn(turnId)).options['budget_limits'];
    // The tighter of the agent's limits, the schedule's and what is left of the day.
    expect(await limits(first!.turnId)).toMatchObject({ max_spend: 0.5, max_iterations: 3 });
    expect(await first!.status()).toBe('completed');

    await idle(handle);
    await handle.trigger();
    const second = (await finishedRuns(handle, 2)).find((r) => r.turnId !== first!.turnId)!;
    expect((await limits(second.turnId)) as { max_spend: number }).toMatchObject({
      max_spend: expect.closeTo(0.2, 6),
    });
    // Its one call spent 0.3 of the 0.2 left: over its cap.
    const failed = await kit.store.loadTurn(second.turnId);
    expect(failed.status).toBe('failed');
    expect(failed.error?.message).toContain('cost limit reached');

    await idle(handle);
    await handle.trigger();
    await waitUntil(async () => (await handle.describe()).firings === 3, 15_000);
    const skipped = await lastFiring(handle);
    expect(skipped).toMatchObject({ turnId: null, status: 'skipped' });
    expect(skipped.skipped).toMatch(/spend per day reached on \d{4}-\d{2}-\d{2}: 0\.6 of 0\.5 USD/);
    expect(await handle.runs()).toHaveLength(2);
  });

  it('schedule: bad input is a typed error, and nothing is created', async () => {
    const nothing = async (id: string) =>
      expect(client.getSchedule(id).describe()).rejects.toMatchObject({ details: { reason: 'not_found' } });
    const cases: [string, Parameters<TurnKitClient['schedule']>, typeof ArgumentError][] = [
      ['cron', ['reporter', 'x', { id: uid('badcron'), cron: '61 25 * * *' }], ArgumentError],
      ['agent', ['nobody', 'x', { id: uid('badagent'), cron: YEARLY }], ConfigError],
      ['both', ['reporter', 'x', { id: uid('both'), cron: YEARLY, every: '1h' }], ArgumentError],
      ['neither', ['reporter', 'x', { id: uid('neither') }], ArgumentError],
      ['every', ['reporter', 'x', { id: uid('every'), every: 'soon' }], ArgumentError],
      [
        'overlap',
        ['reporter', 'x', { id: uid('ovl'), cron: YEARLY, overlap: 'terminate_other' as never }],
        ArgumentError,
      ],
      [
        'conversation',
        ['reporter', 'x', { id: uid('conv'), cron: YEARLY, conversation: 'conv_missing' }],
        ArgumentError,
      ],
      [
        'budget',
        ['reporter', 'x', { id: uid('bud'), cron: YEARLY, budget: { maxSpend: -1 } }],
        ArgumentError,
      ],
      ['task', ['reporter', ' ', { id: uid('task'), cron: YEARLY }], ArgumentError],
      ['id', ['reporter', 'x', { id: 'has space', cron: YEARLY }], ArgumentError],
    ];
    for (const [what, args, type] of cases) {
      await expect(client.schedule(...args), what).rejects.toThrow(type);
      if (what !== 'id') await nothing(args[2].id);
    }
    // A taken id: refused, and the schedule that has it is left as it was.
    const handle = await schedule('reporter', 'The first.', { id: uid('dup'), cron: YEARLY });
    await expect(
      client.schedule('reporter', 'The second.', { id: handle.id, cron: YEARLY }),
    ).rejects.toMatchObject({ name: 'ArgumentError', details: { reason: 'exists' } });
    expect((await handle.describe()).task).toBe('The first.');
  });

  it('schedule: a definition changed through Temporal, not by a client holding the key, runs nothing', async () => {
    const handle = await schedule('reporter', 'Report as ops.', {
      id: uid('forged'),
      cron: YEARLY,
      principal: { user: 'ops' },
    });
    // Someone with Temporal access makes the runs another principal's.
    await client.temporal.schedule.getHandle(handle.scheduleId).update((previous) => {
      const definition = previous.action.args![0] as ScheduledTurnInput;
      return {
        ...previous,
        action: { ...previous.action, args: [{ ...definition, principal: { user: 'root' } }] },
      };
    });
    await handle.trigger();
    await expect(lastFiring(handle)).rejects.toThrow();
    const failure = await client.temporal.workflow
      .getHandle((await handle.describe()).recentFirings.at(-1)!.workflowId)
      .result()
      .catch((error: Error & { cause?: { cause?: Error } }) => error.cause?.cause?.message);
    expect(failure).toContain('not signed with this worker');
    expect(await handle.runs()).toHaveLength(0);
    // Updated through the client, it is signed again and runs.
    await handle.update({ principal: { user: 'ops' }, task: 'Report as ops, again.' });
    await idle(handle);
    await handle.trigger();
    const [turnRun] = await finishedRuns(handle, 1);
    expect((await kit.store.loadTurn(turnRun!.turnId)).options['principal']).toEqual({ user: 'ops' });
  });
});

/** The firing's activity, retried (and run twice at once): one turn, one message. */
function firingRetries(open: () => Promise<{ store: Store; close(): Promise<void> }>) {
  it('schedule: a firing whose activity runs again writes its turn once', async () => {
    const { store, close } = await open();
    try {
      const runtime = new Runtime({ store, agents: new AgentRegistry(agents) });
      const input = {
        definition: {
          scheduleId: 'retried',
          agent: 'reporter',
          task: 'Once.',
          conversationId: null,
          principal: null,
          mac: null,
        },
        firingId: `turnkit-schedule-retried-${Date.now()}`,
        firstRunId: 'run-1',
        firedAt: Date.now(),
      };
      const temporal = await connectClient();
      const [a, b] = await Promise.all([
        prepareScheduledTurn(runtime, temporal, input),
        prepareScheduledTurn(runtime, temporal, input),
      ]);
      const c = await prepareScheduledTurn(runtime, temporal, input);
      expect(b).toEqual(a);
      expect(c).toEqual(a);
      if (a.skipped) throw new Error('not skipped');
      expect(await store.listTurns({ conversationId: a.conversationId })).toHaveLength(1);
      expect(await store.listMessages(a.conversationId)).toHaveLength(1);
      // Another firing (another run of the same workflow id) is another turn.
      const other = await prepareScheduledTurn(runtime, temporal, { ...input, firstRunId: 'run-2' });
      expect(other).not.toEqual(a);
    } finally {
      await close();
    }
  });
}

describe('the firing activity on SQLite', () => {
  firingRetries(async () => {
    const store = await openStore(tempSqliteUrl());
    return { store, close: () => store.close() };
  });
});

describePostgres('the firing activity on PostgreSQL', () => {
  firingRetries(async () => {
    const { store, drop } = await openPgTestStore();
    return { store, close: drop };
  });
});
