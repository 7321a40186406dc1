import type { Usage } from '../store/types.js';
import type { ModelUsage } from './types.js';

/** USD per million tokens, per component. */
export interface CostRates {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheWrite?: number;
  thinking?: number;
}

export interface CostConfig {
  /** Rates by model id. */
  costRates?: Record<string, CostRates>;
  /** Wins over rates; return null/undefined when it does not know the model. */
  costCalculator?: (usage: ModelUsage, model: string) => number | null | undefined;
}

export interface Cost {
  /** USD, or null when unknown (an unknown cost adds nothing and cannot trip maxSpend). */
  total: number | null;
  details: NonNullable<Usage['cost_details']>;
}

const unknownDetails = (total: number | null): Cost['details'] => ({
  input: null,
  output: null,
  cache_read: null,
  cache_write: null,
  thinking: null,
  total,
});

/**
 * Spec §3.10 precedence: provider-reported cost, then the calculator, then the rates (a
 * positive token count without a rate makes that component, and so the total, unknown).
 */
export function costFromUsage(usage: ModelUsage, model: string, config: CostConfig = {}): Cost {
  if (typeof usage.cost === 'number') return { total: usage.cost, details: unknownDetails(usage.cost) };
  const calculated = config.costCalculator?.(usage, model);
  if (typeof calculated === 'number') return { total: calculated, details: unknownDetails(calculated) };
  // `provider:model` ids (the provider registry) fall back to the rates of the bare model id.
  const rates = config.costRates?.[model] ?? config.costRates?.[model.slice(model.indexOf(':') + 1)];
  if (!rates) return { total: null, details: unknownDetails(null) };
  const component = (tokens: number | undefined, rate: number | undefined): number | null => {
    if (!tokens) return 0;
    return rate === undefined ? null : (tokens * rate) / 1_000_000;
  };
  const details = {
    input: component(usage.inputTokens, rates.input),
    output: component(usage.outputTokens, rates.output),
    cache_read: component(usage.cachedTokens, rates.cacheRead),
    cache_write: component(usage.cacheWriteTokens, rates.cacheWrite),
    thinking: component(usage.thinkingTokens, rates.thinking),
  };
  const parts = Object.values(details);
  const total = parts.some((part) => part === null)
    ? null
    : parts.reduce<number>((sum, part) => sum + (part ?? 0), 0);
  return { total, details: { ...details, total } };
}

const add = (a: number | null | undefined, b: number | null): number | null =>
  a === null || b === null ? null : (a ?? 0) + b;

/** Adds one call's usage and cost to a turn's stored usage (TurnKit's snake_case shape). */
export function addUsage(current: Usage | null, usage: ModelUsage, cost: Cost): Usage {
  const base: Usage = current ?? {
    input_tokens: 0,
    output_tokens: 0,
    cached_tokens: 0,
    cache_write_tokens: 0,
    thinking_tokens: 0,
    total_tokens: 0,
  };
  const next: Usage = {
    input_tokens: base.input_tokens + (usage.inputTokens ?? 0),
    output_tokens: base.output_tokens + (usage.outputTokens ?? 0),
    cached_tokens: base.cached_tokens + (usage.cachedTokens ?? 0),
    cache_write_tokens: base.cache_write_tokens + (usage.cacheWriteTokens ?? 0),
    thinking_tokens: base.thinking_tokens + (usage.thinkingTokens ?? 0),
    total_tokens: 0,
  };
  next.total_tokens =
    next.input_tokens +
    next.output_tokens +
    next.cached_tokens +
    next.cache_write_tokens +
    next.thinking_tokens;
  const prev = base.cost_details;
  next.cost_details = {
    input: add(prev ? prev.input : 0, cost.details.input),
    output: add(prev ? prev.output : 0, cost.details.output),
    cache_read: add(prev ? prev.cache_read : 0, cost.details.cache_read),
    cache_write: add(prev ? prev.cache_write : 0, cost.details.cache_write),
    thinking: add(prev ? prev.thinking : 0, cost.details.thinking),
    total: add(prev ? prev.total : 0, cost.total),
  };
  return next;
}
