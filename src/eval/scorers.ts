/**
 * Scorers: each looks at one run of a case and gives a score from 0 to 1 and a pass, or
 * `null` when it does not apply (an exact match without an expected output).
 */
import { z } from 'zod';
import { ArgumentError } from '../errors.js';
import type { OutputCheck, OutputConstraint, OutputPolicy } from '../agents/output-policy.js';
import { checkOutputPolicy } from '../engine/output/check-output-policy.js';
import type { ModelChoice } from '../models/model-chain.js';
import type { ModelClient } from '../models/types.js';
import type { Json, JsonObject } from '../store/types.js';
import type { EvalCase } from './eval-case.js';
import type { RunObservation } from './run-observation.js';

export interface ScoreResult {
  scorer: string;
  /** From 0 to 1. */
  score: number;
  pass: boolean;
  detail?: string;
}

export interface ScoredRun {
  case: EvalCase;
  run: RunObservation;
}

export interface Scorer {
  name: string;
  score(scored: ScoredRun): ScoreOutcome | Promise<ScoreOutcome>;
}

/** What a scorer returns: a score, a pass, a full result, or null when it does not apply. */
export type ScoreOutcome = number | boolean | Omit<ScoreResult, 'scorer'> | null;

/** A scorer, or a plain function (named after itself, else `custom`). */
export type ScorerInput = Scorer | ((scored: ScoredRun) => ScoreOutcome | Promise<ScoreOutcome>);

const text = (run: RunObservation) => (run.output ?? '').trim();

/** The output equals the case's expected output (whitespace at the ends aside). */
export function exactMatch(): Scorer {
  return {
    name: 'exact',
    score: ({ case: item, run }) => (item.expected === undefined ? null : text(run) === item.expected.trim()),
  };
}

/** The output matches `pattern`, else the case's expected output taken as a regular expression. */
export function regexMatch(pattern?: RegExp | string): Scorer {
  const fixed = pattern === undefined ? undefined : new RegExp(pattern);
  return {
    name: 'regex',
    score: ({ case: item, run }) => {
      const re = fixed ?? (item.expected !== undefined ? new RegExp(item.expected) : undefined);
      return re ? re.test(run.output ?? '') : null;
    },
  };
}

/** The structured output (else the output text parsed as JSON) fits a JSON Schema or a zod schema. */
export function jsonSchemaScorer(schema: JsonObject | z.ZodType): Scorer {
  let zodSchema: z.ZodType;
  try {
    zodSchema =
      schema instanceof z.ZodType
        ? schema
        : z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (error) {
    throw new ArgumentError(`jsonSchema scorer: the schema is not usable: ${(error as Error).message}`);
  }
  return {
    name: 'json_schema',
    score: ({ run }) => {
      let value: Json = run.outputData;
      if (value === null || value === undefined) {
        try {
          value = JSON.parse(run.output ?? '') as Json;
        } catch {
          return { score: 0, pass: false, detail: 'the output is not JSON' };
        }
      }
      const parsed = zodSchema.safeParse(value);
      return parsed.success
        ? true
        : { score: 0, pass: false, detail: parsed.error.issues.map((issue) => issue.message).join('; ') };
    },
  };
}

/**
 * The output passes output constraints and policies (LLM judges included), checked as
 * `checkOutputPolicy` checks them; the score is 1 when clean, else 0.
 */
export function policyScorer(
  constraints: readonly (OutputConstraint | OutputCheck | OutputPolicy)[],
  options: { client?: ModelClient; model?: ModelChoice; name?: string } = {},
): Scorer {
  return {
    name: options.name ?? 'output_policy',
    score: async ({ run }) => {
      const audit = await checkOutputPolicy((run.outputData ?? run.output ?? '') as Json, {
        constraints,
        ...(options.client ? { client: options.client } : {}),
        ...(options.model !== undefined ? { model: options.model } : {}),
      });
      return audit.clean
        ? true
        : { score: 0, pass: false, detail: audit.violations.map((v) => v.message).join('; ') };
    },
  };
}

/** Full marks up to `maxUsd`, falling linearly to 0 at twice that; passes at or under it. */
export function costScorer(maxUsd: number): Scorer {
  return thresholdScorer('cost', maxUsd, (run) => run.cost);
}

/** Full marks up to `maxMs`, falling linearly to 0 at twice that; passes at or under it. */
export function latencyScorer(maxMs: number): Scorer {
  return thresholdScorer('latency', maxMs, (run) => run.latencyMs);
}

function thresholdScorer(
  name: string,
  limit: number,
  measure: (run: RunObservation) => number | null,
): Scorer {
  if (typeof limit !== 'number' || !(limit > 0))
    throw new ArgumentError(`${name} scorer: the limit must be > 0`);
  return {
    name,
    score: ({ run }) => {
      const value = measure(run);
      if (value === null) return null;
      const score = value <= limit ? 1 : Math.max(0, 2 - value / limit);
      return { score, pass: value <= limit, detail: `${value} against ${limit}` };
    },
  };
}

/** A scorer from a plain function or a `{ name, score }` object; anything else is an ArgumentError. */
export function toScorer(input: ScorerInput): Scorer {
  if (typeof input === 'function') return { name: input.name || 'custom', score: input };
  if (
    input &&
    typeof input === 'object' &&
    typeof input.score === 'function' &&
    typeof input.name === 'string'
  )
    return input;
  throw new ArgumentError('a scorer is a function or { name, score(run) }');
}

/** Runs a scorer; one that throws scores 0 with the error as its detail. */
export async function applyScorer(scorer: Scorer, scored: ScoredRun): Promise<ScoreResult | null> {
  let outcome: ScoreOutcome;
  try {
    outcome = await scorer.score(scored);
  } catch (error) {
    return { scorer: scorer.name, score: 0, pass: false, detail: `threw: ${(error as Error).message}` };
  }
  if (outcome === null || outcome === undefined) return null;
  if (typeof outcome === 'boolean') return { scorer: scorer.name, score: outcome ? 1 : 0, pass: outcome };
  if (typeof outcome === 'number') {
    const score = Math.min(1, Math.max(0, outcome));
    return { scorer: scorer.name, score, pass: score >= 1 };
  }
  return { scorer: scorer.name, ...outcome, score: Math.min(1, Math.max(0, Number(outcome.score) || 0)) };
}
