/**
 * `evaluate(options)`: runs each case as a real turn on Temporal against the agent as it is
 * now (or each of two variants), in parallel up to a limit and under a budget per case and for
 * the run, scores it, and compares it with a baseline (decision 48).
 */
import type { Agent } from '../agents/agent.js';
import type { RunOptions, TurnKitClient } from '../client/turnkit-client.js';
import { ArgumentError } from '../errors.js';
import { newId } from '../ids.js';
import type { ModelChoice } from '../models/model-chain.js';
import type { EvalCase, RecordedSelection } from './eval-case.js';
import { EVAL_METADATA_KEY, readEvalCases, recordedCases } from './eval-case.js';
import type { BaselineRun, EvalCaseResult, EvalReport } from './eval-report.js';
import { changesAgainst, regressionOf, summarize } from './eval-report.js';
import { observeRun } from './run-observation.js';
import type { Scorer, ScorerInput, ScoreResult } from './scorers.js';
import { applyScorer, exactMatch, toScorer } from './scorers.js';

/** One configuration to evaluate: another agent (other instructions, tools), model or per-turn options. */
export interface EvalVariant {
  name: string;
  /** An agent registered in the worker; default the evaluation's agent. */
  agent?: Agent | string;
  model?: ModelChoice;
  options?: RunOptions;
}

export interface EvaluateOptions {
  client: TurnKitClient;
  agent: Agent | string;
  /** The cases, a JSONL file of them, or recorded runs to take them from. */
  cases:
    | readonly EvalCase[]
    | { file: string }
    | { recorded: Omit<RecordedSelection, 'agent'> & { agent?: string } };
  /** `replay` answers tool calls from the case's recorded run (the default when every case has one). */
  tools?: 'replay' | 'real';
  /** Default: an exact match against the expected output. */
  scorers?: readonly ScorerInput[];
  /** Cases running at once (default 4). */
  concurrency?: number;
  budget?: { perCase?: number; total?: number };
  /** `recorded` (default when the cases have recorded runs), an earlier report, or `none`. */
  baseline?: 'recorded' | 'none' | EvalReport;
  /** Two configurations compared on the same cases, A then B; default the agent as it is. */
  variants?: readonly [EvalVariant, EvalVariant] | readonly [EvalVariant];
  /** A score falling by more than this against the baseline is a regression (default 0). */
  threshold?: number;
  name?: string;
  /** Per-turn options for every case (a variant's own options go on top). */
  runOptions?: RunOptions;
  onCase?: (result: EvalCaseResult) => void;
}

interface EvalPlan {
  runId: string;
  agentName: string;
  cases: EvalCase[];
  tools: 'replay' | 'real';
  scorers: Scorer[];
  variants: EvalVariant[];
  concurrency: number;
}

async function casesOf(options: EvaluateOptions, agentName: string): Promise<EvalCase[]> {
  const given = options.cases;
  if (Array.isArray(given)) return [...(given as EvalCase[])];
  if (given && typeof given === 'object' && 'file' in given) return readEvalCases(given.file);
  if (given && typeof given === 'object' && 'recorded' in given)
    return recordedCases(options.client.store, {
      ...given.recorded,
      agent: given.recorded.agent ?? agentName,
    });
  throw new ArgumentError('evaluate: cases must be an array, { file } or { recorded }');
}

async function planOf(options: EvaluateOptions): Promise<EvalPlan> {
  if (!options?.client) throw new ArgumentError('evaluate needs { client }');
  const agentName = typeof options.agent === 'string' ? options.agent : options.agent?.name;
  if (!agentName) throw new ArgumentError('evaluate needs { agent }');
  const cases = await casesOf(options, agentName);
  if (cases.length === 0) throw new ArgumentError('evaluate: no cases');
  const recorded = cases.every((item) => item.recordedTurnId);
  const tools = options.tools ?? (recorded ? 'replay' : 'real');
  if (tools === 'replay' && !recorded)
    throw new ArgumentError('evaluate: replayed tools need cases from recorded runs (or tools: "real")');
  const concurrency = options.concurrency ?? 4;
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new ArgumentError('evaluate: concurrency must be a positive integer');
  const variants = options.variants ? [...options.variants] : [{ name: 'current' }];
  if (
    variants.length < 1 ||
    variants.length > 2 ||
    new Set(variants.map((v) => v.name)).size !== variants.length
  )
    throw new ArgumentError('evaluate: variants are one or two configurations with different names');
  return {
    runId: newId('eval'),
    agentName,
    cases,
    tools,
    scorers: (options.scorers ?? [exactMatch()]).map(toScorer),
    variants,
    concurrency,
  };
}

async function scoresOf(scorers: readonly Scorer[], item: EvalCase, run: EvalCaseResult['run']) {
  const scores: ScoreResult[] = [];
  for (const scorer of scorers) {
    const result = await applyScorer(scorer, { case: item, run: run! });
    if (result) scores.push(result);
  }
  const score = scores.length ? scores.reduce((sum, s) => sum + s.score, 0) / scores.length : null;
  return { scores, score, pass: scores.every((s) => s.pass) };
}

async function baselineOf(
  options: EvaluateOptions,
  plan: EvalPlan,
  item: EvalCase,
  variant: string,
): Promise<BaselineRun | undefined> {
  const mode = options.baseline ?? (item.recordedTurnId ? 'recorded' : 'none');
  if (mode === 'none') return undefined;
  if (mode === 'recorded') {
    if (!item.recordedTurnId) return undefined;
    const run = await observeRun(options.client.store, item.recordedTurnId);
    const { score, pass } = await scoresOf(plan.scorers, item, run);
    return {
      source: 'recorded',
      turnId: run.turnId,
      output: run.output,
      toolCalls: run.toolCalls,
      score,
      pass,
      ...pick(run),
    };
  }
  const earlier =
    mode.cases.find((row) => row.caseId === item.id && row.variant === variant) ??
    mode.cases.find((row) => row.caseId === item.id);
  if (!earlier?.run) return undefined;
  return {
    source: 'report',
    turnId: earlier.run.turnId,
    output: earlier.run.output,
    toolCalls: earlier.run.toolCalls,
    score: earlier.score,
    pass: earlier.pass,
    ...pick(earlier.run),
  };
}

const pick = (run: { cost: number; latencyMs: number | null }) => ({
  cost: run.cost,
  latencyMs: run.latencyMs,
});

/** Runs one case under one variant and waits for its end; the turn's rows say what it did. */
async function runCase(options: EvaluateOptions, plan: EvalPlan, item: EvalCase, variant: EvalVariant) {
  const { client } = options;
  const perCase = options.budget?.perCase;
  const runOptions: RunOptions = {
    ...options.runOptions,
    ...variant.options,
    ...(variant.model !== undefined ? { model: variant.model } : {}),
    ...(plan.tools === 'replay' ? { toolReplay: { turnId: item.recordedTurnId! } } : {}),
    ...(perCase !== undefined ? { limits: { ...variant.options?.limits, maxSpend: perCase } } : {}),
    metadata: {
      ...options.runOptions?.metadata,
      ...variant.options?.metadata,
      [EVAL_METADATA_KEY]: { run_id: plan.runId, case_id: item.id, variant: variant.name },
    },
  };
  const handle = await client.run(variant.agent ?? plan.agentName, item.input, runOptions);
  await handle.result();
  return observeRun(client.store, handle.turnId);
}

/** Runs the jobs with at most `limit` at once; returns the most that ran together. */
async function pool(jobs: (() => Promise<void>)[], limit: number): Promise<number> {
  let next = 0;
  let running = 0;
  let most = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const job = jobs[next++]!;
      most = Math.max(most, ++running);
      try {
        await job();
      } finally {
        running--;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
  return most;
}

export async function evaluate(options: EvaluateOptions): Promise<EvalReport> {
  const plan = await planOf(options);
  const threshold = options.threshold ?? 0;
  const started = Date.now();
  const results: EvalCaseResult[] = [];
  let spent = 0;
  const jobs = plan.cases.flatMap((item) =>
    plan.variants.map((variant) => async () => {
      const result: EvalCaseResult = {
        caseId: item.id,
        variant: variant.name,
        input: item.input,
        ...(item.expected !== undefined ? { expected: item.expected } : {}),
        tags: item.tags ?? [],
        divergences: [],
        scores: [],
        score: null,
        pass: false,
      };
      results.push(result);
      if (options.budget?.total !== undefined && spent >= options.budget.total) result.skipped = 'budget';
      else await scoreCase(options, plan, item, variant, result, threshold, (cost) => (spent += cost));
      options.onCase?.(result);
    }),
  );
  const maxParallel = await pool(jobs, plan.concurrency);
  return reportOf(options, plan, results, { started, maxParallel, threshold, spent });
}

async function scoreCase(
  options: EvaluateOptions,
  plan: EvalPlan,
  item: EvalCase,
  variant: EvalVariant,
  result: EvalCaseResult,
  threshold: number,
  charge: (cost: number) => void,
): Promise<void> {
  try {
    const run = await runCase(options, plan, item, variant);
    charge(run.cost);
    result.run = run;
    result.divergences = run.toolCalls.flatMap((call) =>
      call.divergence ? [`${call.name}: ${call.divergence}`] : [],
    );
    Object.assign(result, await scoresOf(plan.scorers, item, run));
    const baseline = await baselineOf(options, plan, item, variant.name);
    if (baseline) {
      result.baseline = baseline;
      result.changes = changesAgainst(result, run, baseline);
      const regression = regressionOf(result, threshold);
      if (regression) result.regression = regression;
    }
  } catch (error) {
    result.skipped = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    result.regression = `did not run: ${result.skipped}`;
  }
}

function reportOf(
  options: EvaluateOptions,
  plan: EvalPlan,
  unordered: EvalCaseResult[],
  run: { started: number; maxParallel: number; threshold: number; spent: number },
): EvalReport {
  const order = new Map(plan.cases.map((item, index) => [item.id, index]));
  const variantOrder = plan.variants.map((variant) => variant.name);
  const cases = [...unordered].sort(
    (a, b) =>
      order.get(a.caseId)! - order.get(b.caseId)! ||
      variantOrder.indexOf(a.variant) - variantOrder.indexOf(b.variant),
  );
  const regressions = cases.flatMap((result) =>
    result.regression ? [{ caseId: result.caseId, variant: result.variant, reason: result.regression }] : [],
  );
  return {
    id: plan.runId,
    name: options.name ?? `${plan.agentName} evaluation`,
    agent: plan.agentName,
    tools: plan.tools,
    startedAt: new Date(run.started).toISOString(),
    finishedAt: new Date().toISOString(),
    wallMs: Date.now() - run.started,
    concurrency: plan.concurrency,
    maxParallel: run.maxParallel,
    threshold: run.threshold,
    baseline:
      options.baseline === undefined
        ? plan.cases.every((item) => item.recordedTurnId)
          ? 'recorded'
          : 'none'
        : typeof options.baseline === 'string'
          ? options.baseline
          : 'report',
    variants: variantOrder,
    cases,
    summary: variantOrder.map((name) =>
      summarize(
        name,
        cases.filter((result) => result.variant === name),
      ),
    ),
    cost: run.spent,
    regressions,
    passed: regressions.length === 0,
  };
}
