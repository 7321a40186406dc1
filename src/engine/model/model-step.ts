import { ConfigError, ModelError } from '../../errors.js';
import { costFromUsage } from '../../models/cost.js';
import type { ModelRequest, ModelResult } from '../../models/types.js';
import { nowIso } from '../../store/records.js';
import type { ContentPart, JsonObject, MessageRecord, NewStreamPart, TurnRecord } from '../../store/types.js';
import type { Budget } from '../step/budget.js';
import { modelSpanEnd, modelSpanStart } from '../telemetry/genai-spans.js';
import { turnDigest } from '../step/digest.js';
import { messageCreated, turnEvent } from '../step/events.js';
import { TurnStep } from '../step/turn-step.js';
import { compactionDue } from './compaction.js';
import { historyForTurn } from './model-request.js';
import type { OpenedCall } from './model-opening.js';
import { openingOf } from './model-opening.js';
import { DeltaWriter, stepFinishedParts } from './live-stream.js';
import { countProviderError, handingOver, HandedOver, modelFailure } from './model-failure.js';
import { uniqueCalls } from './tool-call-ids.js';
import { modelUsage, usageDigest } from './model-usage.js';
import { checkNoModelCall, enterAfterModelSpend } from './budget-save.js';
import type { Runtime } from '../runtime.js';
import { depthOf, iterationsOf, toolCallParts } from '../step/turn-state.js';
import type { ModelStepDigest } from '../../contract/digests.js';
import type { ModelStepInput } from '../../contract/activities.js';

export interface ModelStepHooks {
  signal: AbortSignal;
  heartbeat: () => void;
  /**
   * An earlier try of this step may have streamed (a Temporal retry, or the step run again
   * inside its attempt after a store outage): its deltas are superseded.
   */
  retry?: boolean;
}

function responseText(parts: readonly ContentPart[]): string {
  return parts
    .filter((part) => part.type === 'text')
    .map((part) => (part as { text: string }).text)
    .join('\n');
}

/**
 * One model phase (spec §3.3): reserve an iteration, call the model outside any
 * transaction, then persist usage, cost, the assistant message and the next phase in one
 * transaction. Idempotent per step key: a retry after the reservation reuses it, and a retry
 * after the commit reuses the stored response without calling the model (BG-05).
 */
export async function runModelStep(
  runtime: Runtime,
  input: ModelStepInput,
  hooks: ModelStepHooks,
  /**
   * The claim of this activity (`claimStep`): its row, the iteration it reserved for this
   * step, and the call it opened (decision 88).
   */
  claimed?: { turn: TurnRecord; reserved?: Budget; opened?: OpenedCall },
): Promise<ModelStepDigest> {
  const step = await TurnStep.open(runtime, input, claimed?.turn);
  if (step.state.model_step === input.step) return reused(step);
  // A call the claim opened was checked there: due, and nothing stopping it.
  let opened = claimed?.opened;
  if (!opened) checkNoModelCall(step.state);
  // Read once, for the trigger and for the request: a reservation writes no message.
  let history =
    !opened && input.compaction && step.agent.compaction
      ? await historyForTurn(runtime.store, step.turn)
      : undefined;
  // Before anything is reserved: the workflow runs compactStep, then this step again.
  if (!opened && input.compaction && (await compactionDue(runtime.store, step.agent, step.turn, history)))
    return { ...reused(step), reused: false, compactionDue: true };
  const depth = await depthOf(runtime.store, step.turn);
  const budget =
    claimed?.reserved && step.state.reserved_step === input.step
      ? claimed.reserved
      : await reserveIteration(step, input.step, depth);
  // One span per model call (a no-op without tracing); a failed call ends it failed.
  let served: string | undefined;
  const chat = (retry: boolean) =>
    runtime.telemetry.span('chat', modelSpanStart(step.turn, input.step), async (span) => {
      // Named for the model asked before the call, so a failed call's span names it too.
      // A second try (the chain's next model) reads the history anew and opens its own call.
      const first = {
        history,
        opened: opened && step.state.reserved_step === input.step ? opened : undefined,
      };
      history = undefined;
      opened = undefined;
      const { request, result, deltas } = await callModel(
        step,
        depth,
        { ...hooks, retry },
        input,
        (model) => span.rename(`chat ${model}`),
        first,
      );
      served = request.model;
      span.set(modelSpanEnd(runtime.telemetry, runtime.modelClientFor(step.agent), request, result));
      const persisted = await persistResponse(step, input.step, { request, result, deltas, budget });
      if (persisted?.cost != null) span.set({ 'turnkit.cost_usd': persisted.cost });
      return persisted;
    });
  const stored = await handingOver(hooks.retry === true, chat, () =>
    reserveIteration(step, input.step, depth),
  );
  if (stored === undefined) return reused(step);
  const { cost, saving } = stored;
  // Spend is checked after the response is stored: the cost is recorded even when it trips the
  // cap. A response that proposed the turn's save at the cap goes on to run it (decision 38).
  if (!saving) budget.addCost(cost);
  return {
    ...turnDigest(step.agent, step.turn),
    usage: usageDigest(step.turn.usage),
    cost,
    reused: false,
    ...(served ? { model: served } : {}),
  };
}

/** The digest of a step whose response is already stored: no model call, no usage. */
function reused(step: TurnStep): ModelStepDigest {
  return { ...turnDigest(step.agent, step.turn), usage: usageDigest(null), cost: null, reused: true };
}

/** Checks the budget and reserves this step's iteration, once per step key. */
async function reserveIteration(step: TurnStep, stepKey: string, depth: number): Promise<Budget> {
  return step.write(async (tx) => {
    const budget = await tx.budget();
    budget.check(depth);
    if (tx.state.reserved_step === stepKey) return budget;
    // Reserved and committed before the call, so parallel children cannot both take the last one.
    budget.reserveIteration();
    tx.patchState({ iterations: iterationsOf(tx.turn) + 1, reserved_step: stepKey });
    return budget;
  });
}

/**
 * Builds the request and calls the model, outside any transaction. A failure the provider
 * did not classify is a retryable ModelError, counted against the step's provider attempts;
 * an empty response is not retryable; a call whose error handed the step to the chain's next
 * model throws `HandedOver`.
 */
async function callModel(
  step: TurnStep,
  depth: number,
  hooks: ModelStepHooks,
  input: ModelStepInput,
  asking: (model: string) => void,
  {
    history,
    opened,
  }: { history?: readonly MessageRecord[] | undefined; opened?: OpenedCall | undefined } = {},
): Promise<{ request: ModelRequest; result: ModelResult; deltas: NewStreamPart[] }> {
  const { runtime, agent, turn } = step;
  let request: ModelRequest;
  let attempt: number;
  if (opened) {
    // Opened in the claim's transaction (decision 88): its event and parts are stored.
    ({ request, attempt } = opened);
    asking(request.model);
  } else {
    const opening = await openingOf(runtime, agent, turn, step.state, {
      depth,
      input,
      retry: hooks.retry === true,
      history,
    });
    request = opening.request;
    asking(request.model);
    // The live stream opens this attempt's step with the event, in one transaction; the
    // attempt's deltas are then batched into the store (never into history).
    const stored = await step.publish([opening.requested], opening.parts);
    attempt = stored.find((part) => part.type === 'step.started')!.sequence;
  }
  const deltas = new DeltaWriter(runtime.store, turn, input.step, attempt, runtime.logger);
  let result: ModelResult;
  try {
    result = await runtime.modelClientFor(agent).chat(request, {
      signal: hooks.signal,
      onProgress: hooks.heartbeat,
      onDelta: (delta) => deltas.push(delta),
    });
  } catch (error) {
    await deltas.close();
    if (hooks.signal.aborted) throw error;
    const failure = modelFailure(error, 'model call failed');
    // A model that can never work fails at once; a provider error is counted against the step.
    if (failure instanceof ConfigError || (failure instanceof ModelError && !failure.retryable))
      throw failure;
    throw (
      (await countProviderError(step, input, failure, runtime.modelsFor(agent, turn), request.model)) ??
      new HandedOver(failure)
    );
  }
  // The last deltas are stored with the response, in its transaction.
  return { request, result, deltas: await deltas.drain() };
}

/**
 * Stores the response in one block: usage and cost, the assistant message, the next phase
 * and the step key, whether it starts a budget completion (`saving`), and its events.
 * Undefined when this step's response is stored already.
 */
async function persistResponse(
  step: TurnStep,
  stepKey: string,
  response: { request: ModelRequest; result: ModelResult; deltas: readonly NewStreamPart[]; budget: Budget },
): Promise<{ cost: number | null; saving: boolean } | undefined> {
  const { request, result, deltas, budget } = response;
  const { parts, renamed } = await uniqueCalls(step, Array.isArray(result?.parts) ? result.parts : []);
  const calls = toolCallParts(parts);
  const text = responseText(parts);
  if (
    calls.length === 0 &&
    text.trim() === '' &&
    (result.outputData === undefined || result.outputData === null)
  ) {
    throw new ModelError(
      'the model returned an empty response (no text, no tool calls, no structured output)',
    );
  }
  const cost = costFromUsage(result.usage, result.model ?? request.model, step.runtime.cost);
  // The model of the chain that served the step (its configured id), on the message itself.
  const metadata: JsonObject = { model: request.model };
  if (result.outputData !== undefined && result.outputData !== null)
    metadata['output_data'] = result.outputData;
  if (Object.keys(renamed).length > 0) metadata['renamed_tool_call_ids'] = renamed;
  const stored = await step.write(async (tx) => {
    // A zombie attempt (paused past its heartbeat timeout) shares this run's claim token: the
    // step key is what keeps its late response from being stored a second time.
    if (tx.state.model_step === stepKey) return null;
    tx.charge(result.usage, cost);
    tx.set({ heartbeatAt: nowIso() });
    tx.patchState({
      model_usage: modelUsage(tx.state.model_usage, request.model, result, cost.total),
      phase: calls.length > 0 ? 'tools' : 'output',
      parts,
      candidate: text,
      output_data: result.outputData ?? null,
      terminal_tool_name: null,
      model_step: stepKey,
    });
    tx.stream((committed) => [
      ...deltas,
      ...stepFinishedParts(
        committed,
        stepKey,
        parts,
        result,
        usageDigest(committed.usage) as unknown as JsonObject,
      ),
    ]);
    const saving = await enterAfterModelSpend(tx, step.agent, budget, cost.total);
    const message = await tx.store.appendMessage({
      conversationId: tx.turn.conversationId,
      turnId: tx.turn.id,
      role: 'assistant',
      kind: calls.length > 0 ? 'tool_call' : 'text',
      content: parts,
      providerMessageId: result.providerMessageId ?? null,
      metadata,
    });
    tx.emit(
      messageCreated(message),
      ...calls.map((call) => turnEvent('tool_call.created', { id: call.id, name: call.name })),
      (committed) =>
        turnEvent('model.completed', {
          model: result.model ?? request.model,
          requested_model: request.model,
          tool_call_count: calls.length,
          usage: usageDigest(committed.usage) as unknown as JsonObject,
          cost: cost.total,
        }),
      ...(saving ? [saving] : []),
    );
    return { saving };
  });
  if (!stored) return undefined;
  const { saving } = stored;
  return { cost: cost.total, saving: saving !== undefined };
}
