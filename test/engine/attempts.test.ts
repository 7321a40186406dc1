/**
 * Layer: engine driver (test/helpers/engine-driver.ts), memory store, no Temporal server.
 *
 * Provider and tool errors are counted by the engine, per model step and per execution, in
 * the turn's state (issue 20): a model step that keeps failing fails the turn with ModelError
 * after exactly `maxProviderAttempts` provider calls, a replay-safe tool that keeps throwing
 * is failed after `maxToolAttempts` runs, output checks that keep throwing fail the turn after
 * `maxOutputAttempts` runs for one candidate, and Temporal's own attempts (unbounded) are left to
 * infrastructure faults, which test/recovery covers with real worker processes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { turnState } from '../../src/engine/step/turn-state.js';
import { ScriptedModel, toolCall } from '../../src/testing.js';
import type { DriverKit } from '../helpers/driver-kit.js';
import { startDriverKit } from '../helpers/driver-kit.js';

const runs: string[] = [];
const flaky = defineTool({
  name: 'flaky',
  description: 'Always throws.',
  input: z.object({}),
  recovery: 'replaySafe',
  execute: (_args, context) => {
    runs.push(context.idempotencyKey);
    throw new Error(`flaky run ${runs.length}`);
  },
});

let checks = 0;
let shaky = 0;

let failures = 0;
const script = new ScriptedModel({
  down: () => ({ error: { status: 503, message: 'service unavailable' } }),
  // Two provider errors, then an answer: within the default five attempts.
  recovering: () => (failures++ < 2 ? { error: { status: 500, message: 'flaky provider' } } : 'recovered'),
  checked: () => 'checked answer',
  steadied: () => 'steadied answer',
  retrier: (request) =>
    request.messages.some((m) => m.role === 'tool') ? 'tool gave up' : toolCall('flaky', {}),
});

describe('provider and tool attempts are counted by the engine', () => {
  let kit: DriverKit;
  beforeAll(async () => {
    kit = await startDriverKit({
      agents: [
        defineAgent({ name: 'down' }),
        defineAgent({ name: 'recovering' }),
        defineAgent({ name: 'retrier', tools: [flaky] }),
        defineAgent({
          name: 'checked',
          outputConstraints: [
            () => {
              checks += 1;
              throw new TypeError(`constraint broke (${checks})`);
            },
          ],
        }),
        defineAgent({
          name: 'steadied',
          outputConstraints: [
            () => {
              shaky += 1;
              if (shaky === 1) throw new Error('constraint broke once');
              return null;
            },
          ],
        }),
      ],
      model: script,
      turnSettings: { maxProviderAttempts: 3, maxToolAttempts: 2, maxOutputAttempts: 2 },
    });
  });
  afterAll(() => kit?.stop());

  it('a model step that keeps failing fails the turn with ModelError after exactly maxProviderAttempts calls', async () => {
    const run = await kit.client.run('down', 'Try');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ class: 'TurnKit::ModelError' });
    expect(turn.error!.message).toContain('service unavailable');
    expect(script.callsFor('down')).toHaveLength(3);
    expect(turnState(turn).provider_errors).toMatchObject({ count: 3 });
  }, 30_000);

  it('provider errors below the limit are retried and the turn completes', async () => {
    const turn = await (await kit.client.run('recovering', 'Try')).result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('recovered');
    expect(script.callsFor('recovering')).toHaveLength(3);
    expect(turnState(turn).provider_errors).toMatchObject({ count: 2 });
  }, 30_000);

  it('a replay-safe tool that keeps throwing runs maxToolAttempts times under one key; its execution is failed and the model reads it', async () => {
    const run = await kit.client.run('retrier', 'Try');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('tool gave up');
    const [execution] = await run.toolExecutions();
    expect(execution!.status).toBe('failed');
    expect(execution!.error).toMatchObject({ message: 'flaky run 2' });
    expect(runs).toEqual([`turnkit:tool:${execution!.id}`, `turnkit:tool:${execution!.id}`]);
    expect(turnState(turn).tool_errors).toEqual({ [execution!.id]: 2 });
  }, 30_000);

  it('output checks that keep throwing fail the turn after exactly maxOutputAttempts runs for the candidate, with the check error', async () => {
    const run = await kit.client.run('checked', 'Answer');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ class: 'TypeError', message: 'constraint broke (2)' });
    expect(checks).toBe(2);
    expect(turnState(turn).output_errors).toMatchObject({ count: 2 });
    expect(turn.claimToken).toBeNull();
  }, 30_000);

  it('an output check that throws once is run again and the turn completes', async () => {
    const turn = await (await kit.client.run('steadied', 'Answer')).result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('steadied answer');
    expect(shaky).toBe(2);
    expect(turnState(turn).output_errors).toMatchObject({ count: 1 });
  }, 30_000);
});
