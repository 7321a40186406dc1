/** The usage a model step records: per serving model on the turn's state, and in its digests. */
import type { ModelResult } from '../../models/types.js';
import type { TurnState } from '../step/turn-state.js';

/** The turn's usage per serving model, with this response added. */
export function modelUsage(
  previous: TurnState['model_usage'],
  model: string,
  result: ModelResult,
  cost: number | null,
): NonNullable<TurnState['model_usage']> {
  const entry = previous?.[model] ?? { calls: 0, input_tokens: 0, output_tokens: 0, cost: 0 };
  return {
    ...previous,
    [model]: {
      calls: entry.calls + 1,
      input_tokens: entry.input_tokens + (result.usage?.inputTokens ?? 0),
      output_tokens: entry.output_tokens + (result.usage?.outputTokens ?? 0),
      cost: entry.cost === null || cost === null ? null : entry.cost + cost,
    },
  };
}

export function usageDigest(
  usage: { input_tokens?: number; output_tokens?: number; total_tokens?: number } | null,
) {
  return {
    input_tokens: usage?.input_tokens ?? 0,
    output_tokens: usage?.output_tokens ?? 0,
    total_tokens: usage?.total_tokens ?? 0,
  };
}
