/**
 * Fallback inside one attempt, for the engine's internal calls (issue 30, decision 42):
 * output-policy judges and compaction summaries walk their chain on retryable errors.
 */
import { describe, expect, it } from 'vitest';
import { outputPolicy } from '../../src/agents/output-policy.js';
import { checkOutputPolicy } from '../../src/engine/output/check-output-policy.js';
import { ModelError } from '../../src/errors.js';
import { alongChain } from '../../src/models/fallback.js';
import type { ModelClient, ModelRequest } from '../../src/models/types.js';

/** A provider whose answer depends on the model asked: errors by model, else a verdict. */
function provider(errors: Record<string, ModelError>) {
  const asked: string[] = [];
  const client: ModelClient = {
    async chat(request: ModelRequest) {
      asked.push(request.model);
      const error = errors[request.model];
      if (error) throw error;
      return {
        parts: [{ type: 'text', text: JSON.stringify({ approved: true, violations: [] }) }],
        usage: { inputTokens: 1, outputTokens: 1 },
        outputData: { approved: true, violations: [] },
      };
    },
  };
  return { client, asked };
}
const signal = new AbortController().signal;
const request = (model: string): ModelRequest => ({
  model,
  instructions: '',
  dynamicInstructions: '',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  metadata: { turnId: '', conversationId: '', agentName: '' },
});
const limited = (model: string) =>
  new ModelError(`provider error 429: ${model} is busy`, { status: 429, retryable: true });

describe('fallback inside an attempt', () => {
  it('gateway: a judge whose first model is rate-limited is answered by the next one, with the served model', async () => {
    const { client, asked } = provider({ 'a:judge': limited('a:judge') });
    const audit = await checkOutputPolicy('a fine answer', {
      constraints: [outputPolicy({ content: 'Be polite.', model: ['a:judge', 'b:judge'] })],
      client,
    });
    expect(audit.clean).toBe(true);
    expect(asked).toEqual(['a:judge', 'b:judge']);
    const result = await alongChain(client, ['a:judge', 'b:judge']).chat(request('a:judge'), { signal });
    expect(result.model).toBe('b:judge');
  });

  it('gateway: a non-retryable error never falls over; every model failing names each', async () => {
    const bad = new ModelError('provider error 400: bad request', { status: 400, retryable: false });
    const first = provider({ 'a:x': bad });
    await expect(alongChain(first.client, ['a:x', 'b:y']).chat(request('a:x'), { signal })).rejects.toBe(bad);
    expect(first.asked).toEqual(['a:x']);
    const both = provider({ 'a:x': limited('a:x'), 'b:y': limited('b:y') });
    const error = await alongChain(both.client, ['a:x', 'b:y'])
      .chat(request('a:x'), { signal })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).retryable).toBe(true);
    expect((error as ModelError).message).toBe(
      'every model failed: a:x (provider error 429: a:x is busy); b:y (provider error 429: b:y is busy)',
    );
  });
});
