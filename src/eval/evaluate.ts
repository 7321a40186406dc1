/**
 * `evaluate(options)`: runs each case as a real turn on Temporal against the agent as it is
 * now (or each of two variants), in parallel up to a limit and under a budget per case and for
 * the run, scores it, and compares it with a baseline (decision 48).
 */
import type { Agent } from '../agents/agent.js';
import type { RunOptions, TurnKitClient } from '../client/turnkit-client.js';
import { ArgumentError, TurnKitError } from '../errors.js';
import { newId } from '../ids.js';
import type { ModelChoice } from '../models/model-chain.js';
import type { EvalCase, RecordedSelection } from './eval-case.js';
import { EVAL_METADATA_KEY, readEvalCases, recordedCases } from './eval-case.js';
import type { BaselineRun, EvalCaseResult, EvalReport } from './eval-report.js';
import { changesAgainst, regressionOf, summarize } from './eval-report.js';
import { EvalBudget } from './eval-budget.js';
import { replayNotes } from './replay-notes.js';
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
  /**
   * `perCase`: each run's spend limit; `total`: reserved before each case starts (a case
   * reserves `perCase`, default `total / concurrency`, and waits for room or is skipped).
   */
  budget?: { perCase?: number; total?: number };
  /**
   * Seconds each case may run (its turn's `limits.timeout`, unless the variant's own is
   * shorter; default 600): a case still running then, awaiting an approval for one, fails
   * "turn timed out" and counts as a regression.
   */
  caseTimeout?: number;
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
  caseTimeout: number;
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
  const caseTimeout = options.caseTimeout ?? DEFAULT_CASE_TIMEOUT_S;
  if (typeof caseTimeout !== 'number' || !(caseTimeout > 0) || !Number.isFinite(caseTimeout))
    throw new ArgumentError('evaluate: caseTimeout must be a positive number of seconds');
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
    caseTimeout,
  };
}

/** How long a case may run unless `caseTimeout` says otherwise: ten minutes. */
const DEFAULT_CASE_TIMEOUT_S = 600;
/** How long past its timeout the client waits for a case's turn to end before it gives up on it. */
const CASE_GRACE_MS = 60_000;

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

/**
 * Runs one case under one variant and waits for its end; the turn's rows say what it did. The
 * turn's own timeout bounds the case; should the turn not end (no worker runs it), the client
 * stops waiting a minute later and cancels it.
 */
async function runCase(
  options: EvaluateOptions,
  plan: EvalPlan,
  item: EvalCase,
  variant: EvalVariant,
  cap: number | undefined,
) {
  const { client } = options;
  const limits = { ...options.runOptions?.limits, ...variant.options?.limits };
  const timeout = Math.min(plan.caseTimeout, limits.timeout ?? Infinity);
  const runOptions: RunOptions = {
    ...options.runOptions,
    ...variant.options,
    ...(variant.model !== undefined ? { model: variant.model } : {}),
    ...(plan.tools === 'replay' ? { toolReplay: { turnId: item.recordedTurnId! } } : {}),
    limits: { ...limits, timeout, ...(cap !== undefined ? { maxSpend: cap } : {}) },
    metadata: {
      ...options.runOptions?.metadata,
      ...variant.options?.metadata,
      [EVAL_METADATA_KEY]: { run_id: plan.runId, case_id: item.id, variant: variant.name },
    },
  };
  const handle = await client.run(variant.agent ?? plan.agentName, item.input, runOptions);
  let timer: NodeJS.Timeout | undefined;
  const overdue = new Promise<'overdue'>((resolve) => {
    timer = setTimeout(() => resolve('overdue'), timeout * 1000 + CASE_GRACE_MS);
  });
  try {
    if ((await Promise.race([handle.result(), overdue])) === 'overdue') {
      await handle.cancel().catch(() => undefined);
      throw new TurnKitError(`the case's turn did not end within ${timeout} s`);
    }
  } finally {
    clearTimeout(timer);
  }
  return observeRun(client.store, handle.turnId);
}

/** Runs the jobs with at most `limit` at once. */
async function pool(jobs: (() => Promise<void>)[], limit: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) await jobs[next++]!();
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
}

export async function evaluate(options: EvaluateOptions): Promise<EvalReport> {
  const plan = await planOf(options);
  const threshold = options.threshold ?? 0;
  const started = Date.now();
  const results: EvalCaseResult[] = [];
  const budget = new EvalBudget(options.budget, plan.concurrency);
  // Cases that hold a reservation and run (the pool's slots may wait for budget).
  let running = 0;
  let maxParallel = 0;
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
      const reservation = await budget.reserve();
      if (!reservation) result.skipped = 'budget';
      else {
        let cost: number | undefined;
        maxParallel = Math.max(maxParallel, ++running);
        try {
          await scoreCase(
            options,
            plan,
            { item, variant, result, threshold, cap: reservation.cap },
            (spent) => {
              cost = spent;
            },
          );
        } finally {
          running--;
          // A case whose cost could not be read is taken to have spent its whole cap.
          budget.settle(reservation, cost ?? reservation.cap ?? 0);
        }
      }
      options.onCase?.(result);
    }),
  );
  await pool(jobs, plan.concurrency);
  return reportOf(options, plan, results, { started, maxParallel, threshold, spent: budget.spent });
}

async function scoreCase(
  options: EvaluateOptions,
  plan: EvalPlan,
  job: { item: EvalCase; variant: EvalVariant; result: EvalCaseResult; threshold: number; cap?: number },
  charge: (cost: number) => void,
): Promise<void> {
  const { item, variant, result, threshold } = job;
  try {
    const run = await runCase(options, plan, item, variant, job.cap);
    charge(run.cost);
    result.run = run;
    result.divergences = run.toolCalls.flatMap((call) =>
      call.divergence ? [`${call.name}: ${call.divergence}`] : [],
    );
    if (plan.tools === 'replay') {
      const notes = replayNotes(options.client.agents, variant.agent ?? plan.agentName, run);
      if (notes.length > 0) result.replayed = notes;
    }
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
