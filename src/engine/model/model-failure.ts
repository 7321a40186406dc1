/** What a failure of the model client becomes, and how provider errors are counted (spec §3.2, §3.10). */
import type { Agent } from '../../agents/agent.js';
import { ConfigError, ModelError, ModelFallback } from '../../errors.js';
import type { TurnRecord } from '../../store/types.js';
import { DEFAULT_TURN_SETTINGS } from '../../workflows/contract.js';
import type { ModelStepInput } from '../../contract/activities.js';
import type { Runtime } from '../runtime.js';
import { retryDelayMs } from '../step/retry-delay.js';
import type { TurnStep } from '../step/turn-step.js';
import type { TurnState } from '../step/turn-state.js';
import { turnEvent } from '../step/events.js';
import { chainExhausted } from '../../models/fallback.js';
import { chainIndex } from '../../models/model-chain.js';

/** Whether an error says the model can never work as configured (a ConfigError, by class or name). */
function isConfigFailure(error: unknown): boolean {
  if (error instanceof ConfigError) return true;
  // A ConfigError of another copy of TurnKit (an app with two installs) still names its class.
  const name = error instanceof Error ? error.name : '';
  return name === 'ConfigError' || name === 'ModelAccessError';
}

/**
 * A ModelError stays as it is; a ModelAccessError or another ConfigError fails the turn at
 * once, with its own class, never retried; anything else is a retryable ModelError.
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
 * `client.validate(model)` (spec §3.2 step 4) for every model of the turn's chain, run by the
 * claim step before the phase loop: a model that can never work fails the turn before any
 * model call.
 */
export async function validateModel(runtime: Runtime, agent: Agent, turn: TurnRecord) {
  const client = runtime.modelClientFor(agent);
  if (!client.validate) return;
  try {
    for (const model of runtime.modelsFor(agent, turn)) await client.validate(model);
  } catch (error) {
    throw modelFailure(error, 'model validation failed');
  }
}

/** How many provider errors the step has seen so far (0 for a new step). */
function providerErrorsSoFar(state: TurnState, step: string): number {
  return state.provider_errors?.step === step ? state.provider_errors.count : 0;
}

/**
 * The model of the chain that serves this attempt of the step: each gets `maxProviderAttempts`
 * retryable errors, then the next takes over (decision 42).
 */
export function servingModel(chain: readonly string[], state: TurnState, input: ModelStepInput) {
  const perModel = input.maxProviderAttempts ?? DEFAULT_TURN_SETTINGS.maxProviderAttempts;
  const index = chainIndex(providerErrorsSoFar(state, input.step), perModel, chain.length);
  return { model: chain[index]!, index };
}

/**
 * The longest wait a provider may ask of a model that has a next one in its chain: a
 * rate limit that asks more hands the step to the next model at once (decision 55), since
 * the next provider has not asked us to wait.
 */
const FAILOVER_WAIT_MS = 2_000;

/**
 * Counts a retryable provider error against the step (in the turn's state, so every worker
 * sees it), with the model's last error. A model that used up its attempts, or that asked to
 * wait longer than `FAILOVER_WAIT_MS` while the chain has a next one, hands the step to the
 * next model (a `model.fallback` event): undefined, the caller asks that model at once, in the
 * same attempt (decision 55); on a routed step a `ModelFallback` the workflow schedules on
 * the next model's queue (decision 43). The error that uses up the last model's attempts
 * fails the step for good, naming every model tried. Otherwise the retry waits what the
 * provider asked (`retry-after`), else the engine's backoff. An attempt that died with its
 * worker never gets here, so worker loss spends none of these attempts.
 */
export async function countProviderError(
  step: TurnStep,
  input: ModelStepInput,
  error: unknown,
  chain: readonly string[] = [],
  served?: string,
): Promise<ModelError | undefined> {
  const perModel = input.maxProviderAttempts ?? DEFAULT_TURN_SETTINGS.maxProviderAttempts;
  const message =
    error instanceof ModelError
      ? error.message
      : `model call failed: ${error instanceof Error ? error.message : String(error)}`;
  const asked = error instanceof ModelError ? error.retryAfterMs : undefined;
  const { count, last } = await step.write(async (tx) => {
    let count = tx.countError('provider_errors', input.step);
    const index = chainIndex(count - 1, perModel, chain.length);
    const attempts = count - index * perModel;
    // Waiting out this model would cost more than asking the next one now.
    const impatient = asked !== undefined && asked > FAILOVER_WAIT_MS && index < chain.length - 1;
    if (impatient) {
      count = (index + 1) * perModel;
      tx.patchState({ provider_errors: { step: input.step, count } });
    }
    const previous = tx.state.model_errors?.step === input.step ? tx.state.model_errors.last : {};
    const last = served ? { ...previous, [served]: message } : previous;
    if (served) tx.patchState({ model_errors: { step: input.step, last } });
    // This error used up the serving model's attempts: the chain's next model takes over.
    const usedUp = count % perModel === 0 && count / perModel < chain.length;
    const next = usedUp ? chain[chainIndex(count, perModel, chain.length)] : undefined;
    if (served && next !== undefined)
      tx.emit(
        turnEvent('model.fallback', {
          step: input.step,
          from: served,
          to: next,
          attempts,
          error: message,
          ...(impatient ? { retry_after_ms: asked } : {}),
        }),
      );
    return { count, last };
  });
  const status = error instanceof ModelError ? error.status : undefined;
  const cause = error instanceof ModelError ? (error.cause ?? error) : error;
  const total = perModel * Math.max(1, chain.length);
  const retryable = count < total;
  if (!retryable && chain.length > 1)
    return chainExhausted(
      chain.map((model) => ({ model, error: last[model] ?? 'not tried' })),
      { retryable: false },
    );
  if (chain.length > 1 && count % perModel === 0) {
    // A routed step moves to the next model's queue through the workflow (decision 43).
    if (input.routed)
      return new ModelFallback(message, {
        cause,
        details: { index: count / perModel, model: chain[count / perModel] },
      });
    return undefined;
  }
  return new ModelError(message, {
    cause,
    ...(status !== undefined ? { status } : {}),
    retryable,
    retryDelayMs: asked ?? retryDelayMs(count % perModel || perModel),
    ...(served ? { model: served } : {}),
  });
}

/**
 * A model call whose error handed the step to the chain's next model (never leaves the step);
 * named as that error, so the failed call's span records what the provider did.
 */
export class HandedOver extends Error {
  constructor(readonly failure: Error) {
    super(failure.message, { cause: failure });
    this.name = failure.name;
  }
}

/**
 * Runs `call` until it answers: a call that handed the step to the chain's next model is made
 * again at once, in this attempt, for that model (decision 55), once `beforeNext` (the budget
 * check) allows it. `retry`: whether an earlier call of this step may have streamed.
 */
export async function handingOver<T>(
  retry: boolean,
  call: (retry: boolean) => Promise<T>,
  beforeNext: () => Promise<unknown>,
): Promise<T> {
  for (let again = retry; ; again = true) {
    try {
      return await call(again);
    } catch (error) {
      if (!(error instanceof HandedOver)) throw error;
      await beforeNext();
    }
  }
}
