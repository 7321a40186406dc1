/**
 * The output audit inside a turn. Constraints and judges are user code and model calls with
 * no time bound, so they run in their own (scheduled) activity, `outputAudit`, with its own
 * timeout; it stores the audit in the turn's state under a key of the candidate it checked,
 * and the output step (a short local activity) reads it from there.
 */
import { alongChain } from '../../models/fallback.js';
import { modelChain } from '../../models/model-chain.js';
import { createHash } from 'node:crypto';
import type { OutputPolicy, OutputViolation } from '../../agents/output-policy.js';
import { StoreError, TurnKitError } from '../../errors.js';
import type { JsonObject } from '../../store/types.js';
import { DEFAULT_TURN_SETTINGS } from '../../workflows/contract.js';
import { loadedSkillsOf } from '../model/skills.js';
import type { Runtime } from '../runtime.js';
import { chargeCall, checkStepSpend } from '../step/charge.js';
import { checkNoModelCall } from '../model/budget-save.js';
import { turnEvent } from '../step/events.js';
import { retryDelayMs } from '../step/retry-delay.js';
import { TurnStep } from '../step/turn-step.js';
import type { TurnState } from '../step/turn-state.js';
import { phaseOf } from '../step/turn-state.js';
import type { OwnerInput } from '../../contract/digests.js';
import type { OutputAuditDigest } from '../../contract/activities.js';
import type { JudgeHost } from './judge.js';
import { DEFAULT_POLICY_THINKING } from './judge.js';
import { runChecks } from './violations.js';

/** The candidate an audit is for: a new candidate (a revision, a new terminal result) is audited again. */
export function auditKey(state: TurnState): string {
  return createHash('sha256')
    .update(JSON.stringify([state.candidate ?? '', state.output_data ?? null, state.revisions_used ?? 0]))
    .digest('hex')
    .slice(0, 32);
}

export interface OutputCheckHooks {
  signal: AbortSignal;
  heartbeat?: () => void;
}

/**
 * How one judge of the turn's audit is called and accounted: its verdict already stored for
 * this candidate (a retry) is reused; a new one is charged to the turn and stored with the
 * charge, in one block, and its cost checked against the tree's cap once that committed.
 */
function turnJudge(step: TurnStep, key: string, hooks: OutputCheckHooks) {
  const { runtime, agent, turn } = step;
  const judged = step.state.output_judged?.key === key ? step.state.output_judged.verdicts : {};
  const judgeChain = (policy: OutputPolicy) =>
    modelChain(
      policy.model ?? agent.outputPolicyModel ?? runtime.outputPolicyModel ?? runtime.modelsFor(agent, turn),
      'output policy model',
    );
  return (policy: OutputPolicy, index: number): JudgeHost => {
    const chain = judgeChain(policy);
    return {
      client: alongChain(policy.client ?? runtime.modelClientFor(agent), chain),
      model: chain[0]!,
      thinking:
        policy.thinking !== undefined
          ? policy.thinking
          : agent.outputPolicyThinking !== undefined
            ? agent.outputPolicyThinking
            : runtime.outputPolicyThinking !== undefined
              ? runtime.outputPolicyThinking
              : DEFAULT_POLICY_THINKING,
      metadata: { turnId: turn.id, conversationId: turn.conversationId, agentName: agent.name },
      signal: hooks.signal,
      ...(hooks.heartbeat ? { heartbeat: hooks.heartbeat } : {}),
      memo: judged[String(index)] as unknown as OutputViolation[] | undefined,
      requested: async (request) => {
        await step.publish([
          turnEvent('output_policy.model.requested', {
            model: request.model,
            tool_names: [],
            message_count: request.messages.length,
            policy: policy.name,
          }),
        ]);
      },
      completed: async (request, result, violations) => {
        const usage = result?.usage ?? { inputTokens: 0, outputTokens: 0 };
        const charged = result?.model ?? request.model;
        // The charge and the verdict land together.
        const cost = await step.write(async (tx) => {
          const cost = chargeCall(tx, runtime, usage, charged);
          const stored = tx.state.output_judged;
          const verdicts = stored?.key === key ? stored.verdicts : {};
          tx.patchState({
            output_judged: {
              key,
              verdicts: { ...verdicts, [String(index)]: violations as unknown as JsonObject[] },
            },
          });
          tx.emit(
            turnEvent('output_policy.model.completed', {
              model: charged,
              tool_call_count: 0,
              usage: { input_tokens: usage.inputTokens ?? 0, output_tokens: usage.outputTokens ?? 0 },
              cost: cost.total,
              policy: policy.name,
            }),
          );
          return cost;
        });
        // The judge's cost is recorded even when it trips the cap (like a main model call's).
        if (cost.total !== null) await checkStepSpend(step);
      },
    };
  };
}

/**
 * Runs the agent's constraints and policies on the turn's candidate. Every judge call is
 * charged to the turn as it completes (BudgetError over the spend cap) and reported as
 * `output_policy.model.requested` / `.completed`.
 */
export async function checkTurnOutput(step: TurnStep, hooks: OutputCheckHooks): Promise<OutputViolation[]> {
  const { agent, turn, state } = step;
  // Verdicts already stored for this candidate: a retried audit (a store outage, a failed later
  // judge) does not call, or charge, a judge twice.
  const key = auditKey(state);
  // The agent's own checks, then those of its skills: always-loaded ones and the ones this
  // turn loaded (read from the store, so a retried audit on another worker sees the same list).
  const loaded = await loadedSkillsOf(step.store, agent, turn.id);
  const skills = [...agent.skills, ...agent.availableSkills.filter((skill) => loaded.has(skill.key))];
  const policies = [...agent.outputPolicies, ...skills.flatMap((skill) => skill.outputPolicies)];
  // A judge is a model call, which a turn past its spend limit no longer makes (decision 38).
  if (policies.length > 0) checkNoModelCall(state);
  return runChecks(
    {
      constraints: [...agent.outputConstraints, ...skills.flatMap((skill) => skill.outputConstraints)],
      policies,
    },
    { turn, outputText: state.candidate ?? '', outputData: state.output_data ?? null },
    turnJudge(step, key, hooks),
    async () => (await step.store.listMessages(turn.conversationId)).filter((m) => m.turnId === turn.id),
  );
}

/**
 * A check that threw, with its class and message: retried while the candidate has attempts
 * left (`maxOutputAttempts`), then the turn's failure. The engine's own signal.
 */
class OutputCheckFailure extends TurnKitError {
  override readonly retryable: boolean;
  constructor(error: unknown, retryable: boolean, retryDelayMs: number) {
    super(error instanceof Error ? error.message : String(error), { cause: error, retryDelayMs });
    this.name = error instanceof Error ? error.name : 'Error';
    this.retryable = retryable;
  }
}

/**
 * The `outputAudit` activity: runs the checks once per candidate and stores the result in
 * `state.output_audit` (`{key, violations}`); a retry after the store finds it and runs nothing.
 * A check that throws is counted per candidate in the store, so worker loss (Temporal's
 * retries) never spends the attempts; a TurnKit error that is final (a budget) fails at once.
 */
export async function runOutputAudit(
  runtime: Runtime,
  input: OwnerInput & { maxAttempts?: number },
  hooks: OutputCheckHooks,
): Promise<OutputAuditDigest> {
  const step = await TurnStep.open(runtime, input);
  if (phaseOf(step.turn) !== 'output' || step.turn.status !== 'running')
    return { audited: false, clean: true, violationCount: 0 };
  const key = auditKey(step.state);
  const stored = storedAudit(step.state, key);
  if (stored) return { audited: true, clean: stored.length === 0, violationCount: stored.length };
  let violations: OutputViolation[];
  try {
    violations = await checkTurnOutput(step, hooks);
  } catch (error) {
    // A store outage is waited out around the activity (decision 14); a final error fails now.
    if (error instanceof StoreError || (error instanceof TurnKitError && !error.retryable)) throw error;
    const count = await step.write(async (tx) => tx.countError('output_errors', key));
    const attempts = input.maxAttempts ?? DEFAULT_TURN_SETTINGS.maxOutputAttempts;
    throw new OutputCheckFailure(error, count < attempts, retryDelayMs(count));
  }
  await step.write(async (tx) =>
    tx.patchState({ output_audit: { key, violations: violations as unknown as JsonObject[] } }),
  );
  return { audited: true, clean: violations.length === 0, violationCount: violations.length };
}

/** The violations `outputAudit` stored for this candidate, or null when it has not run for it. */
export function storedAudit(state: TurnState, key: string): OutputViolation[] | null {
  const stored = state.output_audit;
  if (!stored || stored.key !== key || !Array.isArray(stored.violations)) return null;
  return stored.violations as unknown as OutputViolation[];
}
