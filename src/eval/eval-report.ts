/**
 * The report of an evaluation: per case and variant what the run did, its scores and what
 * changed against the baseline; summed up per variant; the regressions that fail a CI run.
 */
import type { ScoreResult } from './scorers.js';
import type { ObservedToolCall, RunObservation } from './run-observation.js';
import { canonicalJson } from '../store/records.js';

export interface BaselineRun {
  /** `recorded` (the case's recorded run) or `report` (an earlier evaluation's result). */
  source: 'recorded' | 'report';
  turnId: string | null;
  output: string | null;
  toolCalls: ObservedToolCall[];
  score: number | null;
  pass: boolean | null;
  cost: number;
  latencyMs: number | null;
}

export interface CaseChanges {
  output: boolean;
  toolCalls: boolean;
  score: number | null;
  cost: number;
  latencyMs: number | null;
}

export interface EvalCaseResult {
  caseId: string;
  variant: string;
  input: string;
  expected?: string;
  tags: string[];
  /** Set when the case did not run: `budget` (the run's budget was spent) or an error's message. */
  skipped?: string;
  run?: RunObservation;
  divergences: string[];
  /**
   * What replaying the tools left out of the run (tools replayed): calls of a tool that needs
   * approval were not held for one, and the agent's tool policy was not asked.
   */
  replayed?: string[];
  scores: ScoreResult[];
  /** The mean of the scores that applied; null when none did. */
  score: number | null;
  pass: boolean;
  baseline?: BaselineRun;
  changes?: CaseChanges;
  /** Why this case counts as a regression, when it does. */
  regression?: string;
}

export interface VariantSummary {
  variant: string;
  cases: number;
  completed: number;
  skipped: number;
  passed: number;
  meanScore: number | null;
  baselineMeanScore: number | null;
  cost: number;
  baselineCost: number;
  latencyP50Ms: number | null;
  baselineLatencyP50Ms: number | null;
  outputChanged: number;
  toolCallsChanged: number;
  divergences: number;
  regressions: number;
}

export interface EvalReport {
  id: string;
  name: string;
  agent: string;
  tools: 'replay' | 'real';
  startedAt: string;
  finishedAt: string;
  wallMs: number;
  concurrency: number;
  /** The most cases that ran at once. */
  maxParallel: number;
  threshold: number;
  baseline: 'recorded' | 'report' | 'none';
  variants: string[];
  cases: EvalCaseResult[];
  summary: VariantSummary[];
  /** Cost of every run together, USD. */
  cost: number;
  regressions: { caseId: string; variant: string; reason: string }[];
  passed: boolean;
}

const sameCalls = (a: readonly ObservedToolCall[], b: readonly ObservedToolCall[]) =>
  canonicalJson(a.map((call) => [call.name, call.arguments])) ===
  canonicalJson(b.map((call) => [call.name, call.arguments]));

export function changesAgainst(
  result: EvalCaseResult,
  run: RunObservation,
  baseline: BaselineRun,
): CaseChanges {
  return {
    output: (run.output ?? '').trim() !== (baseline.output ?? '').trim(),
    toolCalls: !sameCalls(run.toolCalls, baseline.toolCalls),
    score: result.score !== null && baseline.score !== null ? result.score - baseline.score : null,
    cost: run.cost - baseline.cost,
    latencyMs:
      run.latencyMs !== null && baseline.latencyMs !== null ? run.latencyMs - baseline.latencyMs : null,
  };
}

/** Why a case regressed: its run failed, it passed before and fails now, or its score fell past the threshold. */
export function regressionOf(result: EvalCaseResult, threshold: number): string | undefined {
  const { run, baseline } = result;
  if (!run || !baseline) return undefined;
  if (run.status !== 'completed') return `the run ${run.status}${run.error ? `: ${run.error}` : ''}`;
  if (baseline.pass === true && !result.pass) return 'passed in the baseline, fails now';
  if (result.score !== null && baseline.score !== null && baseline.score - result.score > threshold)
    return `score ${baseline.score.toFixed(2)} → ${result.score.toFixed(2)}`;
  return undefined;
}

const mean = (values: number[]) => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : null);

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

const numbers = (values: (number | null | undefined)[]) =>
  values.filter((value): value is number => typeof value === 'number');

export function summarize(variant: string, results: readonly EvalCaseResult[]): VariantSummary {
  const ran = results.filter((result) => result.run);
  return {
    variant,
    cases: results.length,
    completed: ran.filter((result) => result.run!.status === 'completed').length,
    skipped: results.length - ran.length,
    passed: ran.filter((result) => result.pass).length,
    meanScore: mean(numbers(ran.map((result) => result.score))),
    baselineMeanScore: mean(numbers(ran.map((result) => result.baseline?.score))),
    cost: ran.reduce((sum, result) => sum + result.run!.cost, 0),
    baselineCost: ran.reduce((sum, result) => sum + (result.baseline?.cost ?? 0), 0),
    latencyP50Ms: median(numbers(ran.map((result) => result.run!.latencyMs))),
    baselineLatencyP50Ms: median(numbers(ran.map((result) => result.baseline?.latencyMs))),
    outputChanged: ran.filter((result) => result.changes?.output).length,
    toolCallsChanged: ran.filter((result) => result.changes?.toolCalls).length,
    divergences: ran.filter((result) => result.divergences.length > 0).length,
    regressions: results.filter((result) => result.regression).length,
  };
}
