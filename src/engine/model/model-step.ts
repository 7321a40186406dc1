import { randomBytes } from 'node:crypto';
import { ConfigError, ModelError } from '../../errors.js';
import { addUsage, costFromUsage } from '../../models/cost.js';
import type { ModelRequest, ModelResult } from '../../models/types.js';
import { nowIso } from '../../store/records.js';
import type {
  ContentPart,
  JsonObject,
  MessageRecord,
  NewStreamPart,
  Store,
  TurnRecord,
} from '../../store/types.js';
import { Budget } from '../step/budget.js';
import { modelSpanEnd, modelSpanStart } from '../telemetry/genai-spans.js';
import { turnDigest } from '../step/digest.js';
import { compactionDue } from './compaction.js';
import { buildModelRequest } from './model-request.js';
import { DeltaWriter, stepFinishedParts, stepStartedParts } from './live-stream.js';
import type { OwnedTurn, Runtime } from '../runtime.js';
import {
  countStepError,
  depthOf,
  iterationsOf,
  toolCallParts,
  turnState,
  updateState,
} from '../step/turn-state.js';
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
): Promise<ModelStepDigest> {
  const owned = await runtime.ownTurn(input);
  if (turnState(owned.turn).model_step === input.step) return reused(owned, owned.turn);
  // Before anything is reserved: the workflow runs compactStep, then this step again.
  if (input.compaction && (await compactionDue(owned.store, owned.agent, owned.turn)))
    return { ...reused(owned, owned.turn), reused: false, compactionDue: true };
  const depth = await depthOf(owned.store, owned.turn);
  const { turn, budget } = await reserveIteration(owned, input.step, depth);
  // One span per model call (a no-op without tracing); a failed attempt ends it failed.
  const stored = await runtime.telemetry.span('chat', modelSpanStart(turn, input.step), async (span) => {
    const { request, result, deltas } = await callModel(runtime, owned, turn, depth, hooks, input);
    span.rename(`chat ${request.model}`);
    span.set(modelSpanEnd(runtime.telemetry, runtime.modelClientFor(owned.agent), request, result));
    const persisted = await persistResponse(runtime, owned, turn, input.step, request, result, deltas);
    if (persisted?.cost !== undefined && persisted.cost !== null)
      span.set({ 'turnkit.cost_usd': persisted.cost });
    return persisted;
  });
  if (!stored) return reused(owned, await owned.store.loadTurn(input.turnId));
  // Spend is checked after the response is stored: the cost is recorded even when it trips the cap.
  budget.addCost(stored.cost);
  return {
    ...turnDigest(owned.agent, stored.committed),
    usage: usageDigest(stored.committed.usage),
    cost: stored.cost,
    reused: false,
  };
}

/** The digest of a step whose response is already stored: no model call, no usage. */
function reused(owned: OwnedTurn, turn: TurnRecord): ModelStepDigest {
  return { ...turnDigest(owned.agent, turn), usage: usageDigest(null), cost: null, reused: true };
}

/** Checks the budget and reserves this step's iteration, once per step key. */
async function reserveIteration(
  { store, turn, agent }: OwnedTurn,
  stepKey: string,
  depth: number,
): Promise<{ turn: TurnRecord; budget: Budget }> {
  let budget!: Budget;
  const reserved = await store.atomic(null, async () => {
    const fresh = await store.loadTurn(turn.id);
    budget = await Budget.load(store, fresh.rootTurnId, agent.limits);
    budget.check(depth);
    if (turnState(fresh).reserved_step === stepKey) return fresh;
    // Reserved and committed before the call, so parallel children cannot both take the last one.
    budget.reserveIteration();
    return updateState(store, fresh.id, { iterations: iterationsOf(fresh) + 1, reserved_step: stepKey });
  });
  return { turn: reserved, budget };
}

/**
 * Builds the request and calls the model, outside any transaction. A failure the provider
 * did not classify is a retryable ModelError, counted against the step's provider attempts;
 * an empty response is not retryable.
 */
async function callModel(
  runtime: Runtime,
  { store, agent }: OwnedTurn,
  turn: TurnRecord,
  depth: number,
  hooks: ModelStepHooks,
  input: ModelStepInput,
): Promise<{ request: ModelRequest; result: ModelResult; deltas: NewStreamPart[] }> {
  const { request, report } = await buildModelRequest(runtime, store, agent, turn, depth);
  // The live stream opens this attempt's step with the event, in one transaction; the
  // attempt's deltas are then batched into the store (never into history).
  const opened = await runtime.emitAll(
    turn,
    [
      [
        'model.requested',
        {
          model: request.model,
          tool_names: request.tools.map((tool) => tool.name),
          message_count: request.messages.length,
          prompt: report as unknown as JsonObject,
        },
      ],
    ],
    stepStartedParts(turn, input.step, hooks.retry === true, { model: request.model, agent: agent.name }),
  );
  const attempt = opened.find((part) => part.type === 'step.started')!.sequence;
  const deltas = new DeltaWriter(store, turn, input.step, attempt, runtime.logger);
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
    throw await countProviderError(store, turn.id, input, failure);
  }
  // The last deltas are stored with the response, in its transaction.
  return { request, result, deltas: await deltas.drain() };
}

/** Whether an error says the model can never work as configured (a ConfigError, by class or name). */
function isConfigFailure(error: unknown): boolean {
  if (error instanceof ConfigError) return true;
  // A ConfigError of another copy of TurnKit (an app with two installs) still names its class.
  const name = error instanceof Error ? error.name : '';
  return name === 'ConfigError' || name === 'ModelAccessError';
}

/**
 * What a failure of the model client becomes (spec §3.2, §3.10): a ModelError stays as it
 * is; a ModelAccessError or another ConfigError fails the turn at once, with its own class,
 * never retried; anything else is a retryable ModelError.
 */
export function modelFailure(error: unknown, what: string): Error {
  if (error instanceof ModelError) return error;
  if (isConfigFailure(error)) {
    if (error instanceof ConfigError) return error;
    const failure = new ConfigError((error as Error).message, { cause: error });
    failure.name = (error as Error).name;
    return failure;
  }
  return new ModelError(`${what}: ${error instanceof Error ? error.message : String(error)}`, {
    cause: error,
    retryable: true,
  });
}

/**
 * `client.validate(model)` (spec §3.2 step 4), run by the claim step before the phase loop:
 * a model that can never work fails the turn before any model call.
 */
export async function validateModel(runtime: Runtime, agent: OwnedTurn['agent'], turn: TurnRecord) {
  const client = runtime.modelClientFor(agent);
  if (!client.validate) return;
  try {
    await client.validate(runtime.modelFor(agent, turn));
  } catch (error) {
    throw modelFailure(error, 'model validation failed');
  }
}

const DEFAULT_MAX_PROVIDER_ATTEMPTS = 5;

/**
 * Counts a retryable provider error against the step (in the turn's state, so every worker
 * sees it): the error that reaches `maxProviderAttempts` fails the step for good. An attempt
 * that died with its worker never gets here, so worker loss spends none of these attempts.
 * The retry waits 1 s, doubling to 30 s.
 */
async function countProviderError(
  store: Store,
  turnId: string,
  input: ModelStepInput,
  error: unknown,
): Promise<ModelError> {
  const { count, retryDelayMs } = await countStepError(store, turnId, 'provider_errors', input.step);
  const message =
    error instanceof ModelError
      ? error.message
      : `model call failed: ${error instanceof Error ? error.message : String(error)}`;
  const status = error instanceof ModelError ? error.status : undefined;
  return new ModelError(message, {
    cause: error instanceof ModelError ? (error.cause ?? error) : error,
    ...(status !== undefined ? { status } : {}),
    retryable: count < (input.maxProviderAttempts ?? DEFAULT_MAX_PROVIDER_ATTEMPTS),
    retryDelayMs,
  });
}

/**
 * Stores the response in one transaction: usage and cost, the assistant message, the next
 * phase and the step key; then its events. Null when this step's response is stored already.
 */
async function persistResponse(
  runtime: Runtime,
  { store }: OwnedTurn,
  turn: TurnRecord,
  stepKey: string,
  request: ModelRequest,
  result: ModelResult,
  deltas: readonly NewStreamPart[],
): Promise<{ committed: TurnRecord; cost: number | null } | null> {
  const responseParts = Array.isArray(result?.parts) ? result.parts : [];
  // Only this response's ids can collide: read those executions, not the whole turn's.
  const proposed = responseParts.flatMap((part) =>
    part.type === 'tool_call' && typeof part.id === 'string' && part.id.trim() !== '' ? [part.id.trim()] : [],
  );
  const taken = new Set(
    (await store.listToolExecutions({ turnId: turn.id, toolCallIds: proposed })).map((row) => row.toolCallId),
  );
  const { parts, renamed } = uniqueToolCallIds(responseParts, taken);
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

  const cost = costFromUsage(result.usage, result.model ?? request.model, runtime.cost);
  const phase = calls.length > 0 ? 'tools' : 'output';
  const stored = await store.atomic(
    null,
    async (): Promise<{ message: MessageRecord; committed: TurnRecord } | null> => {
      const fresh = await store.loadTurn(turn.id);
      // A zombie attempt (paused past its heartbeat timeout) shares this run's claim token: the
      // step key is what keeps its late response from being stored a second time.
      if (turnState(fresh).model_step === stepKey) return null;
      await store.updateTurn(fresh.id, {
        usage: addUsage(fresh.usage, result.usage, cost),
        cost: (fresh.cost ?? 0) + (cost.total ?? 0),
        heartbeatAt: nowIso(),
      });
      const metadata: JsonObject = {};
      if (result.outputData !== undefined && result.outputData !== null)
        metadata['output_data'] = result.outputData;
      if (Object.keys(renamed).length > 0) metadata['renamed_tool_call_ids'] = renamed;
      const message = await store.appendMessage({
        conversationId: fresh.conversationId,
        turnId: fresh.id,
        role: 'assistant',
        kind: calls.length > 0 ? 'tool_call' : 'text',
        content: parts,
        providerMessageId: result.providerMessageId ?? null,
        metadata,
      });
      const committed = await updateState(store, fresh.id, {
        phase,
        parts,
        candidate: text,
        output_data: result.outputData ?? null,
        terminal_tool_name: null,
        model_step: stepKey,
      });
      // Last in the transaction: the stream's lock comes after every conversation lock.
      await store.appendStreamParts([
        ...deltas,
        ...stepFinishedParts(
          fresh,
          stepKey,
          parts,
          result,
          usageDigest(committed.usage) as unknown as JsonObject,
        ),
      ]);
      return { message, committed };
    },
  );
  if (!stored) return null;
  const { message, committed } = stored;
  await runtime.emitAll(committed, [
    ['message.created', { message_id: message.id, role: 'assistant', kind: message.kind }],
    ...calls.map((call): [string, JsonObject] => ['tool_call.created', { id: call.id, name: call.name }]),
    [
      'model.completed',
      {
        model: result.model ?? request.model,
        tool_call_count: calls.length,
        usage: usageDigest(committed.usage) as unknown as JsonObject,
        cost: cost.total,
      },
    ],
  ]);
  return { committed, cost: cost.total };
}

/**
 * Tool-call ids key the turn's executions and pair each result with its call, so they must
 * be unique within the turn. Hosted providers make them so, but some OpenAI-compatible
 * servers number them per response (`call_0` every time) or send none: such an id is
 * replaced by a fresh one, and the message's metadata maps it back to the provider's.
 */
export function uniqueToolCallIds(
  parts: readonly ContentPart[],
  taken: ReadonlySet<string>,
): { parts: ContentPart[]; renamed: JsonObject } {
  const seen = new Set(taken);
  const renamed: JsonObject = {};
  const unique = parts.map((part) => {
    if (part.type !== 'tool_call') return part;
    const id = typeof part.id === 'string' ? part.id.trim() : '';
    if (id !== '' && !seen.has(id)) {
      seen.add(id);
      return part;
    }
    const fresh = `call_${randomBytes(8).toString('hex')}`;
    seen.add(fresh);
    renamed[fresh] = id;
    return { ...part, id: fresh };
  });
  return { parts: unique, renamed };
}

function usageDigest(usage: { input_tokens?: number; output_tokens?: number; total_tokens?: number } | null) {
  return {
    input_tokens: usage?.input_tokens ?? 0,
    output_tokens: usage?.output_tokens ?? 0,
    total_tokens: usage?.total_tokens ?? 0,
  };
}
