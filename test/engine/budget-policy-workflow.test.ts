/**
 * Layer: the Temporal dev server, a real SQLite store and worker; only the model is scripted.
 * The engine's rules for both features are in budget-completion.test.ts and
 * tool-policy.test.ts (engine driver); this file runs one turn of each through the turn
 * workflow (its dispatch, its closing call and its approval controls), decision 38.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { toolResults, wireTool } from '../helpers/tools.js';

const ran: string[] = [];
const save = defineTool({
  name: 'save_report',
  description: 'Saves the report as it stands.',
  input: z.object({ report: z.string() }),
  terminal: (result) => `Saved the report: ${(result as { report: string }).report}`,
  recovery: 'replaySafe',
  budgetCompletion: true,
  execute: ({ report }) => {
    ran.push(`save ${report}`);
    return { report };
  },
});
const research = defineTool({
  name: 'research',
  description: 'Researches a topic.',
  input: z.object({ topic: z.string() }),
  execute: ({ topic }) => {
    ran.push(`research ${topic}`);
    return { notes: topic };
  },
});
const wire = wireTool(ran);

const toolMessages = (request: ModelRequest) => request.messages.filter((m) => m.role === 'tool');
const model = new ScriptedModel({
  reporter: [
    {
      usage: { inputTokens: 3_000_000 },
      toolCalls: [
        { name: 'research', arguments: { topic: 'otters' } },
        { name: 'save_report', arguments: { report: 'otters are great' } },
        { name: 'research', arguments: { topic: 'beavers' } },
      ],
    },
  ],
  payer: (request) =>
    toolMessages(request).length
      ? `read: ${toolMessages(request)
          .map((m) => m.content)
          .join(' | ')}`
      : {
          toolCalls: [
            { name: 'wire', arguments: { amount: 500 } },
            { name: 'research', arguments: { topic: 'invoices' } },
          ],
        },
});

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'reporter', model: 'priced', tools: [research, save], limits: { maxSpend: 2 } }),
      defineAgent({
        name: 'payer',
        tools: [wire, research],
        toolPolicy: (call) => (call.name === 'wire' ? { block: 'payments are frozen' } : 'allow'),
      }),
    ],
    model,
    runtime: { cost: { costRates: { priced: { input: 1, output: 0 } } } },
  });
});
afterAll(async () => kit?.stop());

describe('budget completion and tool policy on the Temporal dev server', () => {
  it('budget completion: a turn past its spend limit saves through its budgetCompletion tool and completes; the other calls are closed "not executed: spend limit reached"', async () => {
    const run = await kit.client.run('reporter', 'Write the report');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Saved the report: otters are great');
    expect(turn.cost).toBeCloseTo(3);
    expect(ran).toEqual(['save otters are great']);
    const rows = await run.toolExecutions();
    expect(rows.map((row) => [row.toolName, row.status])).toEqual([
      ['research', 'cancelled'],
      ['save_report', 'completed'],
      ['research', 'cancelled'],
    ]);
    const results = toolResults(await run.transcript()).map((r) => JSON.parse(r.text) as unknown);
    expect(results).toEqual([
      { skipped: true, message: 'not executed: spend limit reached' },
      { report: 'otters are great' },
      { skipped: true, message: 'not executed: spend limit reached' },
    ]);
    expect((await run.events()).map((e) => e.type)).toContain('budget_completion.started');
    expect(model.callsFor('reporter')).toHaveLength(1);
  });

  it('tool policy: a call the policy blocks gets its one result and a tool_policy_blocked event, is never held for approval, and the model reads it', async () => {
    ran.length = 0;
    const run = await kit.client.run('payer', 'Pay the invoice');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(ran).toEqual(['research invoices']);
    expect(turn.outputText).toContain('blocked by policy: payments are frozen');
    const rows = await run.toolExecutions();
    expect(rows.map((row) => [row.toolName, row.status])).toEqual([
      ['wire', 'failed'],
      ['research', 'completed'],
    ]);
    expect(toolResults(await run.transcript())).toHaveLength(2);
    const blocked = (await run.events()).filter((e) => e.type === 'tool_policy_blocked');
    expect(blocked.map((e) => e.payload)).toEqual([
      { id: rows[0]!.toolCallId, name: 'wire', reason: 'payments are frozen', principal: null },
    ]);
  });
});
