/**
 * Issue 45, the first hour: an offline run on the scripted model is named `scripted` wherever
 * a model is named (the assistant message, the model events, the Temporal UI's state query),
 * never a real model's id, and costs nothing unless the application sets prices for it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { configure, resetConfiguration } from '../../src/config.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { stateQuery } from '../../src/workflows/contract.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const kits: TestKit[] = [];
afterAll(async () => {
  resetConfiguration();
  for (const kit of kits) await kit.stop();
});

async function offlineRun(options: { rates?: boolean } = {}) {
  const model = new ScriptedModel({
    echo: () => ({ text: 'hi', usage: { inputTokens: 1000, outputTokens: 100 } }),
  });
  const kit = await startKit({
    agents: [defineAgent({ name: 'echo' })],
    model,
    ...(options.rates ? { runtime: { cost: { costRates: { scripted: { input: 3, output: 15 } } } } } : {}),
  });
  kits.push(kit);
  const run = await kit.client.run('echo', 'say hi');
  const turn = await run.result();
  const assistant = (await run.transcript()).find((message) => message.role === 'assistant')!;
  const completed = (await run.events()).find((event) => event.type === 'model.completed')!;
  const state = await kit.client.temporal.workflow.getHandle(run.workflowId).query(stateQuery);
  return { turn, model: assistant.metadata['model'], event: completed.payload, state, calls: model.calls };
}

describe('first hour: the scripted model is named as scripted', () => {
  it('first hour: a scripted run with no model named is `scripted` in the transcript, the events and the state query, at no cost', async () => {
    const { turn, model, event, state, calls } = await offlineRun();
    expect(turn.status).toBe('completed');
    expect(calls[0]!.request.model).toBe('scripted');
    expect(model).toBe('scripted');
    // No price is known for it: the step's cost is unknown (null), the turn's total 0.
    expect([event['model'], event['requested_model'], event['cost']]).toEqual(['scripted', 'scripted', null]);
    expect(state.model).toBe('scripted');
    expect(turn.cost).toBe(0);
  });

  it('first hour: prices the application sets for `scripted` are charged; a configured default model still wins', async () => {
    const priced = await offlineRun({ rates: true });
    // 1000 tokens in at $3/M and 100 out at $15/M.
    expect(priced.turn.cost).toBeCloseTo(0.0045, 6);
    configure({ defaultModel: 'house-model' });
    const configured = await offlineRun();
    expect(configured.calls[0]!.request.model).toBe('house-model');
  });
});
