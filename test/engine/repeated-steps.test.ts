/**
 * Layer: engine driver (test/helpers/engine-driver.ts), memory store, no Temporal server.
 *
 * Every activity is safe to run again (decisions 2, 16, 18): an attempt whose first try
 * committed and whose worker died before reporting leaves the same rows as one that ran once.
 * And a run whose claim was taken over writes nothing more (LostClaim).
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel, toolCall } from '../../src/testing.js';
import type { DriverFaults, StepName } from '../helpers/engine-driver.js';
import { startDriverKit } from '../helpers/driver-kit.js';

const ALL_STEPS: StepName[] = ['claim', 'model', 'tool', 'finishTools', 'outputAudit', 'output'];

async function runOnce(faults?: DriverFaults) {
  let looked = 0;
  const lookup = defineTool({
    name: 'lookup',
    description: 'Looks up.',
    input: z.object({ word: z.string() }),
    execute: ({ word }) => {
      looked += 1;
      return { meaning: `meaning of ${word}` };
    },
  });
  const model = new ScriptedModel({
    checked: (request) =>
      request.messages.some((m) => m.role === 'tool') ? 'looked up' : toolCall('lookup', { word: 'x' }),
  });
  const kit = await startDriverKit({
    agents: [defineAgent({ name: 'checked', tools: [lookup], outputConstraints: [() => null] })],
    model,
    ...(faults ? { faults } : {}),
  });
  const run = await kit.client.run('checked', 'Look it up');
  const turn = await run.result();
  const driven = await kit.driven(run.turnId);
  const shape = {
    transcript: (await run.transcript()).map((m) => [m.role, m.kind]),
    executions: (await run.toolExecutions()).map((e) => [e.toolName, e.status]),
    usage: await run.usage(),
  };
  await kit.stop();
  return { turn, driven, shape, looked, modelCalls: model.callsFor('checked').length };
}

describe('activities run again', () => {
  it('every step run twice (claim, model, tool, close, audit, output) leaves the rows of one run: one model call per step, the tool run once', async () => {
    const once = await runOnce();
    const twice = await runOnce({ repeat: ALL_STEPS });
    expect(once.turn.status).toBe('completed');
    expect(twice.turn.status).toBe('completed');
    expect(twice.turn.outputText).toBe(once.turn.outputText);
    expect(twice.shape).toEqual(once.shape);
    expect(twice.looked).toBe(1);
    expect(twice.modelCalls).toBe(once.modelCalls);
  });

  it('a tool call under another run’s claim token is LostClaim: the run ends `lost`, the tool never runs, the turn stays running', async () => {
    const fenced = await runOnce({
      input: (step, input) => (step === 'tool' ? { ...input, claimToken: 'another-run' } : undefined),
    });
    expect(fenced.driven.status).toBe('lost');
    expect(fenced.looked).toBe(0);
    expect(fenced.turn.status).toBe('running');
    expect(fenced.shape.executions).toEqual([]);
  });
});
