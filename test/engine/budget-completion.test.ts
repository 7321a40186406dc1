/**
 * Layer: engine driver (test/helpers/engine-driver.ts), memory store, no Temporal server; the
 * same turn on the dev server is in budget-policy-workflow.test.ts.
 *
 * TurnKit's later `budget_completion` (decision 38): a terminal, replay-safe save that may run
 * once after the spend limit is reached; its siblings are closed "not executed: spend limit
 * reached" and the turn completes with what it saved. Turns of an agent with a save count
 * spend equal to the cap as exhausted; every other turn keeps 0.6's strict rule.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { outputPolicy } from '../../src/agents/output-policy.js';
import type { ToolDefinition } from '../../src/agents/tool.js';
import { defineTool } from '../../src/agents/tool.js';
import { ArgumentError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { DriverKit } from '../helpers/driver-kit.js';
import { startDriverKit } from '../helpers/driver-kit.js';
import { toolResults } from '../helpers/tools.js';

const SKIPPED = 'not executed: spend limit reached';
/** $1 per million input tokens on the model `priced`. */
const dollars = (amount: number) => ({ inputTokens: amount * 1_000_000 });

const saved: { note: string; key: string }[] = [];
let flakyRuns = 0;
const save = defineTool({
  name: 'save',
  description: 'Saves the work done so far.',
  input: z.object({ note: z.string() }),
  terminal: (result) => `Saved: ${(result as { note: string }).note}`,
  recovery: 'replaySafe',
  budgetCompletion: true,
  execute: ({ note }, context) => {
    if (note === 'fails') throw new TypeError('the disk is full');
    if (note === 'flaky' && ++flakyRuns === 1) throw new Error('the disk hiccuped');
    saved.push({ note, key: context.idempotencyKey });
    return { note };
  },
});

const worked: string[] = [];
const work = defineTool({
  name: 'work',
  description: 'Does more work.',
  input: z.object({ step: z.string() }),
  execute: ({ step }) => {
    worked.push(step);
    return { done: step };
  },
});

/** Spends `dollars` of the turn's money through an internal model call, then checks the cap. */
const paint = defineTool({
  name: 'paint',
  description: 'Paints (an internal model call charged to the turn).',
  input: z.object({ dollars: z.number() }),
  execute: async ({ dollars: amount }, context) => {
    await context.recordUsage({ inputTokens: amount * 1_000_000, outputTokens: 0 }, 'priced');
    await context.checkSpend();
    return { painted: true };
  },
});

const answered = (request: ModelRequest) => request.messages.some((m) => m.role === 'tool');
const calls = (...list: [string, object][]) => list.map(([name, args]) => ({ name, arguments: args }));

let judgeCalls = 0;
const model = new ScriptedModel({
  // Its output is judged by an LLM: a model call the turn may no longer make.
  judged_saver: (request) => {
    if (request.metadata['purpose'] === 'output_policy') {
      judgeCalls += 1;
      return '{"violations":[]}';
    }
    return { usage: dollars(2), toolCalls: calls(['save', { note: 'judged' }]) };
  },
  // Over the cap, with work on both sides of the save.
  saver: [
    {
      usage: dollars(2),
      toolCalls: calls(
        ['work', { step: 'before' }],
        ['save', { note: 'draft' }],
        ['work', { step: 'after' }],
      ),
    },
  ],
  // Exactly at the cap: the later rule, exhausted.
  exact_saver: [
    { usage: dollars(1), toolCalls: calls(['work', { step: 'x' }], ['save', { note: 'exact' }]) },
  ],
  // Exactly at the cap without a save: the strict rule, the turn goes on.
  exact_plain: (request) =>
    answered(request)
      ? { text: 'carried on', usage: dollars(0) }
      : { usage: dollars(1), toolCalls: calls(['work', { step: 'y' }]) },
  // Over the cap and no save proposed.
  no_save: [{ usage: dollars(2), toolCalls: calls(['work', { step: 'z' }]) }],
  // Under the cap: the save is an ordinary terminal tool.
  cheap_saver: [
    { usage: dollars(0.5), toolCalls: calls(['work', { step: 'cheap' }], ['save', { note: 'early' }]) },
  ],
  failing_saver: [
    { usage: dollars(2), toolCalls: calls(['save', { note: 'fails' }], ['work', { step: 'w' }]) },
    'never asked',
  ],
  flaky_saver: [{ usage: dollars(2), toolCalls: calls(['save', { note: 'flaky' }]) }],
  painter_saver: [
    {
      usage: dollars(0.5),
      toolCalls: calls(['paint', { dollars: 1 }], ['work', { step: 'p' }], ['save', { note: 'painted' }]),
    },
  ],
});

const capped = (name: string, tools: ToolDefinition[]) =>
  defineAgent({ name, model: 'priced', tools, limits: { maxSpend: 1 } });

let kit: DriverKit;
beforeAll(async () => {
  kit = await startDriverKit({
    agents: [
      capped('saver', [work, save]),
      capped('exact_saver', [work, save]),
      capped('exact_plain', [work]),
      capped('no_save', [work, save]),
      capped('cheap_saver', [work, save]),
      capped('failing_saver', [work, save]),
      capped('flaky_saver', [save]),
      capped('painter_saver', [paint, work, save]),
      defineAgent({
        name: 'judged_saver',
        model: 'priced',
        tools: [save],
        limits: { maxSpend: 1 },
        outputPolicy: outputPolicy({ content: 'Be correct.' }),
      }),
    ],
    model,
    runtime: { cost: { costRates: { priced: { input: 1, output: 0 } } } },
  });
});
afterAll(async () => kit?.stop());

async function eventTypes(turnId: string): Promise<string[]> {
  return (await kit.store.listEvents(turnId)).map((event) => event.type);
}

describe('budget completion', () => {
  it('budget completion: a save proposed by the response that passed the spend limit runs once; its siblings are closed "not executed: spend limit reached" and the turn completes with what it saved', async () => {
    const run = await kit.client.run('saver', 'Work until the money runs out');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Saved: draft');
    expect(turn.cost).toBeCloseTo(2);
    expect(saved.filter((entry) => entry.note === 'draft')).toHaveLength(1);
    expect(worked).not.toContain('before');
    expect(worked).not.toContain('after');
    expect(model.callsFor('saver')).toHaveLength(1);

    const rows = await run.toolExecutions();
    expect(rows.map((row) => [row.toolName, row.status])).toEqual([
      ['work', 'cancelled'],
      ['save', 'completed'],
      ['work', 'cancelled'],
    ]);
    for (const row of rows.filter((r) => r.toolName === 'work'))
      expect(row.result).toEqual({ skipped: true, message: SKIPPED });
    // Each call has its one result, in call order, and the model's response is answered.
    const results = toolResults(await run.transcript());
    expect(results.map((r) => JSON.parse(r.text) as unknown)).toEqual([
      { skipped: true, message: SKIPPED },
      { note: 'draft' },
      { skipped: true, message: SKIPPED },
    ]);
    const state = turn.options['state'] as { budget_completion_call_id?: string };
    expect(state.budget_completion_call_id).toBe(rows[1]!.toolCallId);
    const events = await kit.store.listEvents(run.turnId);
    const started = events.find((event) => event.type === 'budget_completion.started');
    expect(started?.payload).toMatchObject({ name: 'save', reached_by: 'model', cost: 2, max_spend: 1 });
    expect(events.filter((event) => event.type === 'tool_call.skipped')).toHaveLength(2);
  });

  it('budget completion: spend equal to the limit is exhausted for an agent with a save; an agent without one keeps the strict rule and goes on', async () => {
    const exact = await (await kit.client.run('exact_saver', 'Spend exactly the cap')).result();
    expect(exact.status).toBe('completed');
    expect(exact.outputText).toBe('Saved: exact');
    expect(worked).not.toContain('x');

    const plain = await (await kit.client.run('exact_plain', 'Spend exactly the cap')).result();
    expect(plain.status).toBe('completed');
    expect(plain.outputText).toBe('carried on');
    expect(plain.cost).toBeCloseTo(1);
    expect(worked).toContain('y');
    expect(model.callsFor('exact_plain')).toHaveLength(2);
  });

  it('budget completion: a response past the limit that proposes no save fails "cost limit reached" as before, running nothing', async () => {
    const turn = await (await kit.client.run('no_save', 'Spend too much')).result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ class: 'TurnKit::BudgetError', message: 'cost limit reached' });
    expect(worked).not.toContain('z');
    expect(await eventTypes(turn.id)).not.toContain('budget_completion.started');
  });

  it('budget completion: under the limit the save is an ordinary terminal tool: the calls before it run', async () => {
    const turn = await (await kit.client.run('cheap_saver', 'Save early')).result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Saved: early');
    expect(worked).toContain('cheap');
    expect((turn.options['state'] as { budget_completion_call_id?: string }).budget_completion_call_id).toBe(
      undefined,
    );
  });

  it('budget completion: a save that fails does not run again; its siblings are closed and the turn fails "cost limit reached" without another model call', async () => {
    const run = await kit.client.run('failing_saver', 'Save on a full disk');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ message: 'cost limit reached' });
    expect(model.callsFor('failing_saver')).toHaveLength(1);
    expect(worked).not.toContain('w');
    const rows = await run.toolExecutions();
    expect(rows.map((row) => [row.toolName, row.status])).toEqual([
      ['save', 'failed'],
      ['work', 'cancelled'],
    ]);
    expect(rows[0]!.error?.message).toBe('the disk is full');
    expect(toolResults(await run.transcript())).toHaveLength(2);
  });

  it('budget completion: a save that throws is retried under the same idempotency key (replay-safe) and the turn completes', async () => {
    const run = await kit.client.run('flaky_saver', 'Save through a hiccup');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Saved: flaky');
    const [row] = await run.toolExecutions();
    expect(saved.filter((entry) => entry.note === 'flaky')).toEqual([
      { note: 'flaky', key: `turnkit:tool:${row!.id}` },
    ]);
    expect(flakyRuns).toBe(2);
  });

  it('budget completion: a tool that reaches the limit (its checkSpend) lets a later save of the same response run', async () => {
    const run = await kit.client.run('painter_saver', 'Paint, then save');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Saved: painted');
    expect(turn.cost).toBeCloseTo(1.5);
    expect(worked).not.toContain('p');
    const rows = await run.toolExecutions();
    expect(rows.map((row) => [row.toolName, row.status])).toEqual([
      ['paint', 'failed'],
      ['work', 'cancelled'],
      ['save', 'completed'],
    ]);
    expect(rows[0]!.error).toMatchObject({ message: 'cost limit reached', details: { budget_denied: true } });
    const started = (await kit.store.listEvents(run.turnId)).find(
      (e) => e.type === 'budget_completion.started',
    );
    expect(started?.payload).toMatchObject({
      name: 'save',
      reached_by: 'tool',
      tool_call_id: rows[0]!.toolCallId,
    });
  });

  it('budget completion: the save runs, but an output judged by an LLM fails "cost limit reached" before the judge is called', async () => {
    const turn = await (await kit.client.run('judged_saver', 'Save, then be judged')).result();
    expect(saved.map((entry) => entry.note)).toContain('judged');
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ class: 'TurnKit::BudgetError', message: 'cost limit reached' });
    expect(judgeCalls).toBe(0);
  });

  it('budget completion: budgetCompletion on a tool that is not terminal, not replay-safe, needs approval or is not a boolean is an ArgumentError at defineTool; a hand-made tool at defineAgent', () => {
    const base = {
      name: 'keep',
      description: 'Keeps.',
      input: z.object({}),
      execute: () => ({}),
      budgetCompletion: true,
    };
    expect(() => defineTool({ ...base, recovery: 'replaySafe' })).toThrow(
      new ArgumentError(
        'tool keep: budgetCompletion needs a terminal tool (terminal: true): nothing may run after the save',
      ),
    );
    expect(() => defineTool({ ...base, terminal: true })).toThrow(
      /budgetCompletion needs recovery: 'replaySafe'/,
    );
    expect(() =>
      defineTool({ ...base, terminal: true, recovery: 'replaySafe', needsApproval: true }),
    ).toThrow(/budgetCompletion cannot be combined with needsApproval/);
    expect(() =>
      defineTool({
        ...base,
        terminal: true,
        recovery: 'replaySafe',
        budgetCompletion: 'yes' as unknown as boolean,
      }),
    ).toThrow(ArgumentError);
    // Read-only tools are replay-safe by default.
    expect(defineTool({ ...base, terminal: true, readOnly: true }).budgetCompletion).toBe(true);
    const handMade = { ...work, budgetCompletion: true } as ToolDefinition;
    expect(() => defineAgent({ name: 'forged', tools: [handMade] })).toThrow(
      /tool work has budgetCompletion but is not an ordinary, terminal, replay-safe tool/,
    );
  });
});
