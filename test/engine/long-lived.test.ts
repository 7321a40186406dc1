/**
 * Issue 26, turns of any length and waits of any duration, on the real dev server with a real
 * SQLite store (only the model is scripted): the turn workflow continues as new at a safe
 * point (a threshold of one event forces it at the first one), and a wait adds no history.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { stateQuery, turnWorkflowId } from '../../src/workflows/contract.js';
import { temporalAddress } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

const exec = promisify(execFile);
const wired: string[] = [];
const wire = defineTool({
  name: 'wire',
  description: 'Wires money once a person approved it.',
  input: z.object({ amount: z.number() }),
  needsApproval: true,
  approvalTimeout: '10 minutes',
  execute: ({ amount }) => {
    wired.push(String(amount));
    return { wired: amount };
  },
});
let kit: TestKit;
let ticks = 0;
/** The `tick` call that sends the cancel (set by the test), just before it returns. */
const cancelAt = { tick: 0, turnId: '' };
const tick = defineTool({
  name: 'tick',
  description: 'One step of a long turn.',
  input: z.object({}),
  execute: async () => {
    ticks += 1;
    if (ticks === cancelAt.tick) await kit.client.cancel(cancelAt.turnId, { principal: 'ops' });
    return { tick: ticks };
  },
});
// Approvals wait up to 10 minutes, so the trees that hold them run for up to an hour.
const worker = defineAgent({ name: 'payer', tools: [wire], limits: { timeout: 3600 } });
const answered = (request: { messages: { role: string }[] }) =>
  request.messages.some((m) => m.role === 'tool');
const model = new ScriptedModel({
  lead: (request) =>
    answered(request) ? 'lead done' : { toolCalls: [{ name: 'payer', arguments: { task: 'pay 7' } }] },
  payer: (request) =>
    answered(request) ? 'paid' : { toolCalls: [{ name: 'wire', arguments: { amount: 7 } }] },
  ticker: () => ({ toolCalls: [{ name: 'tick', arguments: {} }] }),
  // Only the turn asked to hold calls wire; the turn queued behind it answers.
  holder: (request) =>
    answered(request) ||
    request.messages.filter((m) => m.role === 'user').at(-1)?.content !== 'hold for approval'
      ? 'held'
      : { toolCalls: [{ name: 'wire', arguments: { amount: 1 } }] },
});

let temporal: Client;
/** `turnkit --json ls …` in a process of its own, against this dev server. */
async function turnkitLs(args: string[]): Promise<string> {
  const bin = fileURLToPath(new URL('../../src/cli/bin.ts', import.meta.url));
  const { stdout } = await exec(
    process.execPath,
    // The test's own store: `ls` marks the turns it holds, and never creates one.
    [
      '--import',
      import.meta.resolve('tsx'),
      bin,
      '--json',
      '--store',
      kit.store.identity.location,
      'ls',
      ...args,
    ],
    {
      env: { ...process.env, TEMPORAL_ADDRESS: temporalAddress() },
    },
  );
  return stdout;
}
/** Every run of a turn's workflow, oldest first. */
async function runsOf(turnId: string) {
  const runs = [];
  for await (const run of temporal.workflow.list({ query: `WorkflowId = '${turnWorkflowId(turnId)}'` }))
    runs.push(run);
  return runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
}
async function historyOf(workflowId: string, runId?: string) {
  const history = await temporal.workflow.getHandle(workflowId, runId).fetchHistory();
  return history.events ?? [];
}

beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'lead', subAgents: [worker], limits: { timeout: 3600 } }),
      worker,
      defineAgent({ name: 'ticker', tools: [tick] }),
      defineAgent({ name: 'holder', tools: [wire], limits: { timeout: 3600 } }),
    ],
    model,
    turnSettings: { continueAsNewAfter: { events: 1 } },
  });
  temporal = kit.client.temporal;
});
afterAll(async () => {
  await kit?.stop();
});

describe('continue-as-new', () => {
  it('long-lived: a turn continues as new mid-tools with an approval pending and a child running; both finish once approved', async () => {
    const run = await kit.client.run('lead', 'pay through the payer');
    await waitUntil(async () => (await run.pendingApprovals()).length === 1, 30_000);
    const [pending] = await run.pendingApprovals();
    const child = pending!.turnId;
    // Both workflows continued while suspended: the lead waiting on its child, the child on approval.
    await waitUntil(
      async () => (await runsOf(run.turnId)).length === 2 && (await runsOf(child)).length === 2,
      30_000,
    );
    const [childFirst, childNow] = await runsOf(child);
    expect(childFirst!.status.name).toBe('CONTINUED_AS_NEW');
    expect(childNow!.status.name).toBe('RUNNING');
    // The approval timeout goes on from its deadline: the continued run's timer is shorter.
    const timers = async (runId: string) =>
      (await historyOf(turnWorkflowId(child), runId))
        .filter((e) => e.timerStartedEventAttributes)
        .map((e) => Number(e.timerStartedEventAttributes!.startToFireTimeout!.seconds));
    // (Beside the root timeout's timer, 3600 s here, which also goes on from its deadline.)
    const approvalTimer = async (runId: string) => (await timers(runId)).filter((s) => s > 300 && s <= 600);
    await waitUntil(async () => (await approvalTimer(childNow!.runId)).length === 1, 30_000);
    expect(await approvalTimer(childFirst!.runId)).toEqual([600]);
    expect((await approvalTimer(childNow!.runId))[0]).toBeLessThan(600);
    // The continued run's console counts the chain's model calls.
    const state = await temporal.workflow.getHandle(run.workflowId).query(stateQuery);
    expect([state.status, state.modelCalls]).toEqual(['waiting', 1]);
    // The person's decision goes to the running run of the child's workflow.
    await run.approve(pending!.toolCallId, { principal: 'ops' });
    const result = await run.result();
    expect(result.status).toBe('completed');
    expect(await run.outputText()).toBe('lead done');
    expect(wired).toEqual(['7']);
    // One child turn; each turn taken over once by its continued run; the search attribute followed.
    const tree = await kit.store.listTurns({ rootTurnId: run.turnId });
    expect(tree.map((t) => t.status)).toEqual(['completed', 'completed']);
    for (const turnId of [run.turnId, child]) {
      const types = (await kit.store.listEvents(turnId)).map((e) => e.type);
      expect(types.filter((t) => t === 'turn.reclaimed')).toHaveLength(1);
      const runs = await runsOf(turnId);
      expect(runs.map((r) => r.status.name)).toEqual(['CONTINUED_AS_NEW', 'COMPLETED']);
      expect(runs[1]!.searchAttributes?.['TurnKitStatus']).toEqual(['completed']);
    }
    // `turnkit ls` lists the chain once, with its last status (visibility may lag a little).
    let listed: [string, string][] = [];
    await waitUntil(async () => {
      const rows = JSON.parse(await turnkitLs(['--conversation', run.conversationId])) as {
        turnId: string;
        status: string;
      }[];
      listed = rows.map((row) => [row.turnId, row.status]);
      return listed.length > 0 && listed.every(([, status]) => status === 'completed');
    }, 30_000);
    expect(listed).toEqual([[run.turnId, 'completed']]);
  });

  it('long-lived: a cancel that arrives with the switch cancels the turn, and no further run starts', async () => {
    ticks = 0;
    const run = await kit.client.prepare('ticker', 'tick until cancelled');
    // The second tick (in the second run) sends the cancel: it lands in the workflow task
    // that would continue the run as new.
    Object.assign(cancelAt, { tick: 2, turnId: run.turnId });
    await run.start();
    const result = await run.result();
    expect(result.status).toBe('cancelled');
    expect(ticks).toBe(2);
    expect((await runsOf(run.turnId)).map((r) => r.status.name)).toEqual(['CONTINUED_AS_NEW', 'COMPLETED']);
    const turn = await kit.store.loadTurn(run.turnId);
    expect([turn.status, turn.claimToken]).toEqual(['cancelled', null]);
  });
});

describe('waits cost no history', () => {
  it('long-lived: a turn awaiting approval and the turn queued behind it add no history events while they wait', async () => {
    // The default settings here: no switch to continue as new while measuring.
    const client = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal,
      taskQueue: kit.taskQueue,
    });
    const conversation = await client.conversation('holder');
    const first = await conversation.ask('hold for approval');
    await waitUntil(async () => (await first.pendingApprovals()).length === 1, 30_000);
    const second = await conversation.ask('queued behind');
    // Refused by the busy lane, and waiting for the lane's signal (the safety net's timer).
    await waitUntil(
      async () => (await historyOf(second.workflowId)).some((e) => e.timerStartedEventAttributes),
      30_000,
    );
    const lengths = async () => [
      (await historyOf(first.workflowId)).length,
      (await historyOf(second.workflowId)).length,
    ];
    const before = await lengths();
    // Longer than the 30 s recheck this replaces (6 events per check).
    await new Promise((resolve) => setTimeout(resolve, 35_000));
    expect(await lengths()).toEqual(before);
    expect(await second.status()).toBe('pending');
    const [pending] = await first.pendingApprovals();
    await first.approve(pending!.toolCallId, { principal: 'ops' });
    expect((await first.result()).status).toBe('completed');
    // Woken by the lane's signal, not by a timer.
    expect((await second.result()).status).toBe('completed');
    const timers = (await historyOf(second.workflowId)).filter((e) => e.timerFiredEventAttributes);
    expect(timers).toHaveLength(0);
  }, 120_000);
});
