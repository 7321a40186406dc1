/**
 * The `compactStep` activity (spec §3.6): automatic compaction at the start of a model phase,
 * in its own activity, so the summary's model call has its own timeout and retries.
 */
import { alongChain } from '../../models/fallback.js';
import { modelChain } from '../../models/model-chain.js';
import { BudgetError, LostClaim, StoreError, storedErrorClass } from '../../errors.js';
import { costFromUsage } from '../../models/cost.js';
import type { CompactionDigest, CompactionStepInput } from '../../contract/activities.js';
import type { Runtime } from '../runtime.js';
import { Budget, exhaustsAtLimit } from '../step/budget.js';
import { turnEvent } from '../step/events.js';
import { TurnStep } from '../step/turn-step.js';
import { depthOf } from '../step/turn-state.js';
import { compactionMetadata, selectForCompaction, summarize, summaryRequest } from './compaction.js';
import { historyForTurn } from './model-request.js';

const NOTHING: CompactionDigest = { compacted: false, messageId: null };

/**
 * Summarizes the turn's history before its model call. Usage and cost are charged to the
 * turn; a BudgetError propagates, any other failure is logged, recorded as
 * `compaction.failed`, and the turn goes on. Idempotent per step key.
 */
export async function runCompactionStep(
  runtime: Runtime,
  input: CompactionStepInput,
  hooks: { signal: AbortSignal; heartbeat: () => void },
): Promise<CompactionDigest> {
  const step = await TurnStep.open(runtime, input);
  const { turn, agent } = step;
  const policy = agent.compaction;
  if (step.state.compaction_step === input.step || !policy || turn.options['compact'] === false)
    return NOTHING;
  const done = { compaction_step: input.step, compaction_forced: true };
  try {
    const atLimit = exhaustsAtLimit(agent);
    const budget = await Budget.load(step.store, turn.rootTurnId, agent.limits, { root: turn, atLimit });
    budget.check(await depthOf(step.store, turn));
    const selection = selectForCompaction(await historyForTurn(step.store, turn), policy);
    if (!selection) {
      await step.write(async (tx) => tx.patchState(done));
      return NOTHING;
    }
    const replaces = { replaces_from_sequence: selection.from, replaces_through_sequence: selection.through };
    await step.publish([
      turnEvent('compaction.started', { auto: true, message_count: selection.middle.length, ...replaces }),
    ]);
    const chain = modelChain(policy.model ?? runtime.modelsFor(agent, turn), 'compaction model');
    const { request, inputTokens } = summaryRequest(selection, policy, {
      model: chain[0]!,
      focus: null,
      metadata: { turnId: turn.id, conversationId: turn.conversationId, agentName: agent.name },
    });
    const summary = await summarize(
      alongChain(policy.client ?? runtime.modelClientFor(agent), chain),
      request,
      {
        signal: hooks.signal,
        onProgress: hooks.heartbeat,
      },
    );
    const cost = costFromUsage(summary.usage, summary.model, runtime.cost);
    const message = await step.write(async (tx) => {
      if (tx.state.compaction_step === input.step) return null;
      tx.charge(summary.usage, cost);
      tx.patchState(done);
      const appended = await tx.store.appendMessage({
        conversationId: tx.turn.conversationId,
        turnId: tx.turn.id,
        role: 'assistant',
        kind: 'context_summary',
        content: summary.text,
        metadata: compactionMetadata(selection, {
          auto: true,
          focus: null,
          model: summary.model,
          inputTokens,
          usage: summary.usage,
          turnId: tx.turn.id,
        }),
      });
      tx.emit(
        turnEvent('compaction.completed', {
          message_id: appended.id,
          ...replaces,
          input_tokens: inputTokens,
          summary_tokens: summary.usage.outputTokens ?? 0,
          cost: cost.total,
        }),
      );
      return appended;
    });
    if (!message) return NOTHING;
    budget.addCost(cost.total);
    return { compacted: true, messageId: message.id };
  } catch (error) {
    return compactionFailed(step, error, hooks.signal);
  }
}

/**
 * A failed compaction is logged and recorded, and the turn goes on without it; a budget, a
 * lost claim, an abort or a store outage is not the compaction's to swallow.
 */
async function compactionFailed(
  step: TurnStep,
  error: unknown,
  signal: AbortSignal,
): Promise<CompactionDigest> {
  if (
    signal.aborted ||
    error instanceof BudgetError ||
    error instanceof LostClaim ||
    (error instanceof StoreError && error.retryable)
  )
    throw error;
  const reason = error instanceof Error ? error.message : String(error);
  step.runtime.logger.warn(`turnkit: automatic compaction of ${step.turn.id} failed (ignored): ${reason}`);
  const failure = {
    class: storedErrorClass(error instanceof Error ? error.name : 'Error'),
    message: reason,
  };
  await step.publish([turnEvent('compaction.failed', { error: failure })]);
  return NOTHING;
}
