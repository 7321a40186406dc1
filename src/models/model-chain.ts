/**
 * A model setting is one model id or a fallback chain of them (issue 30, decision 42):
 * `'anthropic:claude-sonnet-4-5'` or `['anthropic:claude-sonnet-4-5', 'openai:gpt-5-mini']`.
 * The first id is the model a step asks first; the next ones serve the step once the earlier
 * ones have used up their attempts on errors another model might not hit (429, 529, 5xx,
 * timeouts, resets).
 */
import { ArgumentError } from '../errors.js';
import type { TurnRecord } from '../store/types.js';

export type ModelChoice = string | readonly string[];

/**
 * The chain a setting names, checked: an id is a non-empty string; a list is non-empty and
 * has no id twice. `what` names the setting in the error.
 */
export function modelChain(choice: ModelChoice, what: string): readonly string[] {
  const ids = typeof choice === 'string' ? [choice] : choice;
  if (!Array.isArray(ids))
    throw new ArgumentError(`${what} must be a model id or a list of model ids`, {
      details: { got: typeof choice },
    });
  if (ids.length === 0) throw new ArgumentError(`${what}: an empty list of models`);
  const seen = new Set<string>();
  for (const id of ids) {
    if (typeof id !== 'string' || id.trim() === '')
      throw new ArgumentError(`${what}: every model id must be a non-empty string`);
    if (seen.has(id)) throw new ArgumentError(`${what}: model ${JSON.stringify(id)} is listed twice`);
    seen.add(id);
  }
  return Object.freeze([...ids]);
}

/** The chain of an optional setting; undefined when the setting is unset. */
export function optionalModelChain(
  choice: ModelChoice | null | undefined,
  what: string,
): readonly string[] | undefined {
  return choice === undefined || choice === null ? undefined : modelChain(choice, what);
}

/**
 * Which model of a chain serves an attempt: each model gets `attemptsPerModel` retryable
 * errors, then the next one takes over; the last one keeps the step.
 */
export function chainIndex(errorsSoFar: number, attemptsPerModel: number, chainLength: number): number {
  return Math.min(Math.floor(errorsSoFar / Math.max(1, attemptsPerModel)), chainLength - 1);
}

/** `TURNKIT_MODEL`: one id, or a comma-separated chain (`anthropic:claude-sonnet-4-5,openai:gpt-5-mini`). */
export function envModelChain(value: string | undefined): ModelChoice | undefined {
  if (!value || value.trim() === '') return undefined;
  const ids = value.split(',').map((id) => id.trim());
  return ids.length === 1 ? ids[0]! : ids;
}

/**
 * The fallbacks stored with a turn (`options.fallback_models`) when it was built from a chain;
 * the turn's `model` column keeps the first model, as TurnKit's readers expect.
 */
export function fallbackModelsOf(turn: Pick<TurnRecord, 'options'>): readonly string[] {
  const stored = turn.options['fallback_models'];
  return Array.isArray(stored) ? stored.filter((id): id is string => typeof id === 'string') : [];
}
