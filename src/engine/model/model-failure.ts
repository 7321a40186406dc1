/** What a failure of the model client becomes, and how provider errors are counted (spec §3.2, §3.10). */
import type { Agent } from '../../agents/agent.js';
import { ConfigError, ModelError } from '../../errors.js';
import type { TurnRecord } from '../../store/types.js';
import { DEFAULT_TURN_SETTINGS } from '../../workflows/contract.js';
import type { ModelStepInput } from '../../contract/activities.js';
import type { Runtime } from '../runtime.js';
import { retryDelayMs } from '../step/retry-delay.js';
import type { TurnStep } from '../step/turn-step.js';

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
 * `client.validate(model)` (spec §3.2 step 4), run by the claim step before the phase loop:
 * a model that can never work fails the turn before any model call.
 */
export async function validateModel(runtime: Runtime, agent: Agent, turn: TurnRecord) {
  const client = runtime.modelClientFor(agent);
  if (!client.validate) return;
  try {
    await client.validate(runtime.modelFor(agent, turn));
  } catch (error) {
    throw modelFailure(error, 'model validation failed');
  }
}

/**
 * Counts a retryable provider error against the step (in the turn's state, so every worker
 * sees it): the error that reaches `maxProviderAttempts` fails the step for good. An attempt
 * that died with its worker never gets here, so worker loss spends none of these attempts.
 */
export async function countProviderError(
  step: TurnStep,
  input: ModelStepInput,
  error: unknown,
): Promise<ModelError> {
  const count = await step.write(async (tx) => tx.countError('provider_errors', input.step));
  const message =
    error instanceof ModelError
      ? error.message
      : `model call failed: ${error instanceof Error ? error.message : String(error)}`;
  const status = error instanceof ModelError ? error.status : undefined;
  return new ModelError(message, {
    cause: error instanceof ModelError ? (error.cause ?? error) : error,
    ...(status !== undefined ? { status } : {}),
    retryable: count < (input.maxProviderAttempts ?? DEFAULT_TURN_SETTINGS.maxProviderAttempts),
    retryDelayMs: retryDelayMs(count),
  });
}
