/**
 * Round-4 audit, continue-as-new (issue 43: #12, #10): what a person's controls and a
 * schedule's searches need survives the switch to a new run. On the real dev server with a
 * real SQLite store; only the model is scripted. The continued run is held at its takeover
 * claim (its `turn.reclaimed` event, which the claim awaits) so that a control lands in the
 * window before it dispatches its calls again, every time.
 */
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { ScheduleHandle } from '../../src/client/schedules.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ControlError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { EventRecord } from '../../src/store/types.js';
import { TURNKIT_SCHEDULE_ID, turnWorkflowId } from '../../src/workflows/contract.js';
import type { TurnContinuation } from '../../src/workflows/contract.js';
import { TurnControls } from '../../src/workflows/controls.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';

const wired: number[] = [];
const wire = defineTool({
  name: 'wire',
  description: 'Wires money once a person approved it.',
  input: z.object({ amount: z.number() }),
  needsApproval: true,
  execute: ({ amount }) => {
    wired.push(amount);
    return { wired: amount };
  },
});
const model = new ScriptedModel({
  payer: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'paid'
      : {
          toolCalls: [
            { name: 'wire', arguments: { amount: 1 } },
            { name: 'wire', arguments: { amount: 2 } },
          ],
        },
});

/** While active, holds a continued run at its takeover claim until the test opens the gate. */
const hold = { active: false, entered: '', gate: gate() };
const onEvent = async (event: EventRecord) => {
  if (event.type !== 'turn.reclaimed' || !hold.active) return;
  hold.entered = event.turnId;
  await hold.gate.promise;
};

let kit: TestKit;
let temporal: Client;
beforeAll(async () => {
  kit = await startKit({
    agents: [defineAgent({ name: 'payer', tools: [wire] })],
    model,
    runtime: { onEvent },
    // One event: a run continues as new at its first safe point (suspended in its tools phase).
    turnSettings: { continueAsNewAfter: { events: 1 } },
  });
  temporal = kit.client.temporal;
});
afterAll(async () => {
  hold.gate.open();
  await kit?.stop();
});

async function runsOf(workflowId: string) {
  const runs = [];
  for await (const run of temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.push(run);
  return runs;
}

describe('audit: #12 controls right after continue-as-new', () => {
  it('audit: #12 an approve sent after the switch, before the new run dispatches its calls again, is accepted; controlState shows both pending approvals', async () => {
    hold.active = true;
    const run = await kit.client.run('payer', 'pay twice');
    await waitUntil(async () => (await run.pendingApprovals()).length === 2, 120_000);
    // The first run continued as new at its suspension; the new one waits at its claim.
    await waitUntil(async () => hold.entered === run.turnId, 120_000);
    const [first, second] = (await run.pendingApprovals()).map((p) => p.toolCallId);
    expect((await run.controlState()).awaitingApproval.sort()).toEqual([first, second].sort());
    const answer = await run.approve(first!, { principal: 'ops' });
    expect(answer).toMatchObject({ toolCallId: first, decision: 'approved' });
    // A second decision on it, still in the window, is refused as decided.
    const again = await run.approve(first!).catch((error: unknown) => error);
    expect(again).toBeInstanceOf(ControlError);
    expect((again as ControlError).code).toBe('decided');
    hold.active = false;
    hold.gate.open();
    await waitUntil(async () => (await run.pendingApprovals()).length === 1);
    expect(wired).toEqual([1]);
    await run.approve(second!);
    expect((await run.result()).outputText).toBe('paid');
    expect(wired).toEqual([1, 2]);
    expect((await runsOf(turnWorkflowId(run.turnId))).length).toBeGreaterThanOrEqual(2);
  }, 300_000);

  it('audit: #12 a continued run refuses a second decision on a call decided and settled before the switch as decided, and knows which calls await', () => {
    // What a run hands over when one call of its phase was approved and ran, one awaits.
    const before = new TurnControls();
    before.phaseCalls = new Set(['call_a', 'call_b']);
    before.decisions.set('call_a', { decision: 'approved', principal: 'ops' });
    before.noteSettled('call_a');
    before.noteAwaiting('call_b', null);
    const handOver = before.handOver();
    const continued: TurnContinuation = {
      runs: 1,
      modelCalls: 1,
      children: [],
      ...handOver,
    };
    const after = new TurnControls(continued);
    expect(after.state().awaitingApproval).toEqual(['call_b']);
    const refusal = (() => {
      try {
        after.validateApprove({ toolCallId: 'call_a', principal: null });
        return null;
      } catch (error) {
        return error;
      }
    })();
    expect(refusal).toBeInstanceOf(ApplicationFailure);
    expect((refusal as ApplicationFailure).details).toEqual([{ code: 'decided' }]);
    // The awaited call is known: its decision passes the validator.
    expect(() => after.validateApprove({ toolCallId: 'call_b', principal: null })).not.toThrow();
  });
});

describe('audit: #10 search attributes across continue-as-new', () => {
  const created: ScheduleHandle[] = [];
  afterAll(async () => {
    for (const handle of created) await handle.delete().catch(() => undefined);
  });

  it('audit: #10 a scheduled run that continued as new keeps TurnKitScheduleId and is listed by schedule.runs()', async () => {
    const client = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal,
      taskQueue: kit.taskQueue,
      turnSettings: { continueAsNewAfter: { events: 1 } },
    });
    const handle = await client.schedule('payer', 'Pay the monthly bills.', {
      id: `can-${process.pid}-${Date.now().toString(36)}`,
      cron: '0 0 1 1 *',
    });
    created.push(handle);
    const before = new Set((await kit.store.listTurns({ agentName: 'payer' })).map((t) => t.id));
    await handle.trigger();
    let turnId = '';
    // The firing's turn: the payer turn that was not there before.
    await waitUntil(async () => {
      turnId = (await kit.store.listTurns({ agentName: 'payer' })).find((t) => !before.has(t.id))?.id ?? '';
      return turnId !== '';
    }, 120_000);
    // The turn awaits approval in a continued run.
    await waitUntil(async () => (await runsOf(turnWorkflowId(turnId))).length >= 2, 120_000);
    // The current run (described from its own state, not the eventually consistent list).
    const current = await temporal.workflow.getHandle(turnWorkflowId(turnId)).describe();
    expect(current.status.name).toBe('RUNNING');
    expect(current.typedSearchAttributes.get(TURNKIT_SCHEDULE_ID)).toBe(handle.id);
    await waitUntil(async () => (await handle.runs()).length === 1, 120_000);
    expect((await handle.runs()).map((r) => r.turnId)).toEqual([turnId]);
    await (await kit.client.handle(turnId)).cancel();
  }, 300_000);
});
