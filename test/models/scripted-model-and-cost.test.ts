import { describe, expect, it } from 'vitest';
import { ModelError } from '../../src/errors.js';
import { addUsage, costFromUsage } from '../../src/models/cost.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';

const request = (agentName: string): ModelRequest => ({
  model: 'm',
  instructions: '',
  dynamicInstructions: '',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  metadata: { turnId: 't', conversationId: 'c', agentName },
});
const options = () => ({ signal: new AbortController().signal });

describe('scripted model', () => {
  it('plays lists per agent in order, functions of the request, and the * fallback', async () => {
    const model = new ScriptedModel({
      a: ['one', { toolCalls: [{ name: 'x', arguments: { k: 1 } }] }],
      '*': (r) => `echo ${r.messages.length}`,
    });
    expect((await model.chat(request('a'), options())).parts).toEqual([{ type: 'text', text: 'one' }]);
    expect((await model.chat(request('a'), options())).parts).toEqual([
      { type: 'tool_call', id: 'call_a_1_0', name: 'x', arguments: { k: 1 } },
    ]);
    expect((await model.chat(request('b'), options())).parts).toEqual([{ type: 'text', text: 'echo 1' }]);
    await expect(model.chat(request('a'), options())).rejects.toThrow(
      /no step left for agent a \(2 calls made\)/,
    );
    expect(model.callsFor('a')).toHaveLength(3);
  });

  it('turns invalid JSON arguments into an arguments_error and non-object JSON into {}', async () => {
    const model = new ScriptedModel({
      a: [
        {
          toolCalls: [
            { name: 'x', arguments: '{oops' },
            { name: 'y', arguments: '[1]' },
          ],
        },
      ],
    });
    const { parts } = await model.chat(request('a'), options());
    expect(parts[0]).toMatchObject({ arguments: {}, arguments_error: 'invalid JSON arguments' });
    expect(parts[1]).toEqual({ type: 'tool_call', id: 'call_a_0_1', name: 'y', arguments: {} });
  });

  it('a delayed step rejects promptly when the signal aborts; a scripted status error is a ModelError', async () => {
    const model = new ScriptedModel({ a: [{ text: 'late', delayMs: 10_000 }, { error: { status: 429 } }] });
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(new Error('stop')), 50);
    await expect(model.chat(request('a'), { signal: controller.signal })).rejects.toThrow('stop');
    expect(Date.now() - started).toBeLessThan(2_000);
    const error = await model.chat(request('a'), options()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).retryable).toBe(true);
  });
});

describe('cost', () => {
  it('CORE-26 precedence: provider cost, then calculator, then rates; a rate missing for used tokens makes the total unknown', () => {
    const usage = {
      inputTokens: 1_000_000,
      outputTokens: 500_000,
      cacheWriteTokens: 1_000,
      thinkingTokens: 2_000,
    };
    const rates = { m: { input: 3, output: 15, cacheWrite: 3.75, thinking: 15 } };
    const byRates = costFromUsage(usage, 'm', { costRates: rates });
    expect(byRates.total).toBeCloseTo(3 + 7.5 + 0.00375 + 0.03, 8);
    expect(byRates.details.cache_write).toBeCloseTo(0.00375, 8);
    expect(costFromUsage(usage, 'm', { costRates: rates, costCalculator: () => 1.5 }).total).toBe(1.5);
    expect(
      costFromUsage({ ...usage, cost: 0.42 }, 'm', { costRates: rates, costCalculator: () => 1.5 }).total,
    ).toBe(0.42);
    expect(costFromUsage(usage, 'm', { costRates: { m: { input: 3 } } }).total).toBeNull();
    expect(costFromUsage(usage, 'unknown-model').total).toBeNull();
  });

  it('addUsage sums the five counters and the cost details', () => {
    const first = addUsage(
      null,
      { inputTokens: 10, outputTokens: 5, cachedTokens: 1 },
      costFromUsage({ inputTokens: 10, outputTokens: 5, cachedTokens: 1 }, 'm', {
        costRates: { m: { input: 1, output: 1, cacheRead: 1 } },
      }),
    );
    const second = addUsage(
      first,
      { inputTokens: 1, outputTokens: 1, thinkingTokens: 2 },
      costFromUsage({ inputTokens: 1, outputTokens: 1, cost: 0.5 }, 'm'),
    );
    expect(second).toMatchObject({
      input_tokens: 11,
      output_tokens: 6,
      cached_tokens: 1,
      thinking_tokens: 2,
      total_tokens: 20,
    });
    expect(second.cost_details!.total).toBeCloseTo(0.000016 + 0.5, 9);
  });
});
