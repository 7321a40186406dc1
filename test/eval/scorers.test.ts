/**
 * Layer: unit (no Temporal, no store): the scorers an evaluation applies to each run
 * (decision 48), on hand-made run observations. The judges are the project's ScriptedModel.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { outputPolicy } from '../../src/agents/output-policy.js';
import { ArgumentError } from '../../src/errors.js';
import type { EvalCase } from '../../src/eval/eval-case.js';
import type { RunObservation } from '../../src/eval/run-observation.js';
import {
  applyScorer,
  costScorer,
  jsonSchemaScorer,
  latencyScorer,
  policyScorer,
  regexMatch,
  toScorer,
} from '../../src/eval/scorers.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { Json } from '../../src/store/types.js';

const item = { id: 'c1', input: 'Where is order 7?', tags: [] } as unknown as EvalCase;
const run = (output: string | null, outputData: Json = null, extra: Partial<RunObservation> = {}) => ({
  case: item,
  run: {
    turnId: 'turn_1',
    status: 'completed',
    output,
    outputData,
    error: null,
    toolCalls: [],
    cost: 0.01,
    tokens: 100,
    latencyMs: 1_500,
    ...extra,
  } as RunObservation,
});

describe('eval scorers', () => {
  it('eval: jsonSchemaScorer checks the structured output, else the text parsed as JSON, against a JSON Schema or zod', async () => {
    const schema = {
      type: 'object',
      properties: { status: { type: 'string', enum: ['shipped', 'pending'] } },
      required: ['status'],
    };
    const scorer = jsonSchemaScorer(schema);
    expect(await applyScorer(scorer, run(null, { status: 'shipped' }))).toEqual({
      scorer: 'json_schema',
      score: 1,
      pass: true,
    });
    expect(await applyScorer(scorer, run('{"status":"shipped"}'))).toMatchObject({ score: 1, pass: true });
    const wrong = await applyScorer(scorer, run('{"status":"lost"}'));
    expect(wrong).toMatchObject({ score: 0, pass: false });
    expect(wrong!.detail).toBeTruthy();
    expect(await applyScorer(scorer, run('It shipped.'))).toEqual({
      scorer: 'json_schema',
      score: 0,
      pass: false,
      detail: 'the output is not JSON',
    });
    const zodScorer = jsonSchemaScorer(z.object({ count: z.number().int() }));
    expect(await applyScorer(zodScorer, run('{"count":3}'))).toMatchObject({ pass: true });
    expect(await applyScorer(zodScorer, run('{"count":"3"}'))).toMatchObject({ pass: false });
    expect(() => jsonSchemaScorer({ type: 'no-such-type' })).toThrow(ArgumentError);
  });

  it('eval: policyScorer runs constraints and LLM judges; a violation scores 0 with its message', async () => {
    const noRefund = policyScorer([(output) => (String(output).includes('refund') ? 'no refunds' : null)]);
    expect(await applyScorer(noRefund, run('It shipped.'))).toEqual({
      scorer: 'output_policy',
      score: 1,
      pass: true,
    });
    expect(await applyScorer(noRefund, run('I will refund you.'))).toEqual({
      scorer: 'output_policy',
      score: 0,
      pass: false,
      detail: 'no refunds',
    });
    const judge = new ScriptedModel({
      '*': (request) =>
        JSON.stringify(
          request.messages.some((m) => String(m.content).includes('sorry'))
            ? { approved: false, violations: [{ rule: 'tone', message: 'no apologies' }] }
            : { approved: true, violations: [] },
        ),
    });
    const judged = policyScorer([outputPolicy({ content: 'Never apologise.' })], {
      client: judge,
      model: 'judge',
      name: 'tone',
    });
    expect(await applyScorer(judged, run('It shipped.'))).toMatchObject({ scorer: 'tone', pass: true });
    expect(await applyScorer(judged, run('So sorry, it is late.'))).toEqual({
      scorer: 'tone',
      score: 0,
      pass: false,
      detail: 'no apologies',
    });
    expect(judge.calls.map((call) => call.request.metadata['purpose'])).toEqual([
      'output_policy',
      'output_policy',
    ]);
  });

  it('eval: cost, latency and regex scorers grade against their limits; a throwing scorer scores 0; bad scorers are ArgumentErrors', async () => {
    expect(await applyScorer(costScorer(0.02), run('x'))).toMatchObject({ score: 1, pass: true });
    expect(await applyScorer(costScorer(0.008), run('x'))).toMatchObject({ score: 0.75, pass: false });
    expect(await applyScorer(latencyScorer(1_000), run('x'))).toMatchObject({ score: 0.5, pass: false });
    expect(await applyScorer(latencyScorer(1_000), run('x', null, { latencyMs: null }))).toBeNull();
    expect(await applyScorer(regexMatch(/shipped/), run('It shipped.'))).toMatchObject({ pass: true });
    expect(await applyScorer(regexMatch(), run('It shipped.'))).toBeNull();
    const throwing = toScorer(function exploding() {
      throw new Error('boom');
    });
    expect(await applyScorer(throwing, run('x'))).toEqual({
      scorer: 'exploding',
      score: 0,
      pass: false,
      detail: 'threw: boom',
    });
    expect(() => costScorer(0)).toThrow(ArgumentError);
    expect(() => toScorer({ name: 'x' } as never)).toThrow(ArgumentError);
  });
});
