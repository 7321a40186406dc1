/** Fallback chains as settings (issue 30): what a list may be, and the provider's `retry-after` read. */
import { describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { configure, resetConfiguration } from '../../src/config.js';
import { ArgumentError } from '../../src/errors.js';
import { retryAfterMs } from '../../src/models/ai-sdk-model.js';
import { chainIndex, envModelChain, modelChain } from '../../src/models/model-chain.js';

describe('model chains', () => {
  it('gateway: a model setting is one id or a list; an empty list, an empty id or a duplicate is an ArgumentError', () => {
    expect(modelChain('a:x', 'model')).toEqual(['a:x']);
    expect(modelChain(['a:x', 'b:y'], 'model')).toEqual(['a:x', 'b:y']);
    expect(() => modelChain([], 'model')).toThrow(ArgumentError);
    expect(() => modelChain(['a:x', ''], 'model')).toThrow(/non-empty string/);
    expect(() => modelChain(['a:x', 'a:x'], 'model')).toThrow(/listed twice/);
    expect(() => defineAgent({ name: 'dup', model: ['a:x', 'a:x'] })).toThrow(ArgumentError);
    const agent = defineAgent({ name: 'chained', model: ['a:x', 'b:y'] });
    expect(agent.model).toBe('a:x');
    expect(agent.models).toEqual(['a:x', 'b:y']);
    try {
      expect(configure({ defaultModel: ['a:x', 'b:y'] }).defaultModel).toEqual(['a:x', 'b:y']);
      expect(() => configure({ defaultModel: [] })).toThrow(ArgumentError);
    } finally {
      resetConfiguration();
    }
    expect(envModelChain('a:x, b:y')).toEqual(['a:x', 'b:y']);
    expect(envModelChain('a:x')).toBe('a:x');
  });

  it('gateway: each model of a chain gets its attempts, then the next; the last keeps the step', () => {
    expect([0, 1, 2, 3, 4, 5, 9].map((errors) => chainIndex(errors, 2, 3))).toEqual([0, 0, 1, 1, 2, 2, 2]);
  });

  it("gateway: the provider's retry-after-ms, retry-after in seconds or as a date, capped at ten minutes", () => {
    const now = Date.parse('2026-12-05T10:00:00Z');
    expect(retryAfterMs({ 'retry-after-ms': '1500' }, now)).toBe(1_500);
    expect(retryAfterMs({ 'Retry-After': '2' }, now)).toBe(2_000);
    expect(retryAfterMs({ 'retry-after': 'Sat, 05 Dec 2026 10:00:30 GMT' }, now)).toBe(30_000);
    expect(retryAfterMs({ 'retry-after': '86400' }, now)).toBe(600_000);
    expect(retryAfterMs({ 'retry-after': 'soon' }, now)).toBeUndefined();
    expect(retryAfterMs({ 'retry-after': '-3' }, now)).toBeUndefined();
    expect(retryAfterMs(undefined, now)).toBeUndefined();
  });
});
