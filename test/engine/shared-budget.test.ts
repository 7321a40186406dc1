/**
 * Layer: engine driver (test/helpers/engine-driver.ts), memory store, no Temporal server.
 *
 * Root-wide budgets across parallel children (spec §3.4, §5.11): reservations run under the
 * root lock, so two children running at once can never both take the last unit.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { DriverKit } from '../helpers/driver-kit.js';
import { startDriverKit } from '../helpers/driver-kit.js';

let toolRuns = 0;
const work = defineTool({
  name: 'work',
  description: 'Does some work.',
  input: z.object({}),
  execute: () => {
    toolRuns += 1;
    return { worked: true };
  },
});

const model = new ScriptedModel({
  child: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'child done'
      : { toolCalls: [{ name: 'work', arguments: {} }] },
  tool_parent: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'parent done'
      : {
          toolCalls: [
            { name: 'child', arguments: { task: 'one' } },
            { name: 'child', arguments: { task: 'two' } },
          ],
        },
  iteration_parent: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'parent done'
      : {
          toolCalls: [
            { name: 'child', arguments: { task: 'one' } },
            { name: 'child', arguments: { task: 'two' } },
          ],
        },
});

const child = defineAgent({ name: 'child', tools: [work] });
let kit: DriverKit;
beforeAll(async () => {
  kit = await startDriverKit({
    agents: [
      child,
      defineAgent({ name: 'tool_parent', subAgents: [child], limits: { maxToolExecutions: 3 } }),
      defineAgent({ name: 'iteration_parent', subAgents: [child], limits: { maxIterations: 2 } }),
    ],
    model,
  });
});
afterAll(async () => kit?.stop());

describe('root-wide budgets across parallel children', () => {
  it('BG-06 two parallel children share max_tool_executions 3: one child runs its tool, the other fails, the parent completes', async () => {
    toolRuns = 0;
    const run = await kit.client.run('tool_parent', 'Fan out');
    const parent = await run.result();
    expect(parent.status).toBe('completed');
    expect(toolRuns).toBe(1);
    const children = (await run.turns()).filter((t) => t.parentTurnId === run.turnId);
    expect(children.map((c) => c.status).sort()).toEqual(['completed', 'failed']);
    expect(children.find((c) => c.status === 'failed')!.error?.message).toMatch(/maximum tool executions/);
  });

  it('BG-07 max_iterations 2 across the tree: exactly 2 iterations, one child model call, the parent fails', async () => {
    const before = model.callsFor('child').length;
    const run = await kit.client.run('iteration_parent', 'Fan out');
    const parent = await run.result();
    expect(parent.status).toBe('failed');
    expect(parent.error?.message).toMatch(/maximum iterations/);
    expect(model.callsFor('child').length - before).toBe(1);
    const iterations = (await run.turns()).reduce(
      (sum, t) => sum + Number((t.options['state'] as { iterations?: number } | undefined)?.iterations ?? 0),
      0,
    );
    expect(iterations).toBe(2);
  });
});
