/**
 * Fallback along a model chain for the engine's internal calls (output-policy judges and
 * compaction summaries), inside one attempt of their activity: each model is asked once, in
 * order, while the errors are ones another model might not hit; Temporal's retry of the
 * activity then starts over from the first. A turn's own model step falls back across
 * attempts instead, counted in the store (`engine/model/model-failure.ts`).
 */
import { ModelError } from '../errors.js';
import type { ModelCallOptions, ModelClient, ModelRequest, ModelResult } from './types.js';

/** A ModelClient that serves `request.model` and, on a retryable error, the rest of `chain`. */
export function alongChain(client: ModelClient, chain: readonly string[]): ModelClient {
  if (chain.length <= 1) return client;
  return {
    ...(client.validate ? { validate: (model: string) => client.validate!(model) } : {}),
    async chat(request: ModelRequest, options: ModelCallOptions): Promise<ModelResult> {
      const failures: { model: string; error: string }[] = [];
      const start = Math.max(0, chain.indexOf(request.model));
      for (const model of chain.slice(start)) {
        try {
          const result = await client.chat({ ...request, model }, options);
          return { ...result, model: result?.model ?? model };
        } catch (error) {
          if (options.signal.aborted || !(error instanceof ModelError) || !error.retryable) throw error;
          failures.push({ model, error: error.message });
        }
      }
      throw chainExhausted(failures);
    },
  };
}

/** The error of a chain whose every model failed: it names each model and its last error. */
export function chainExhausted(
  failures: readonly { model: string; error: string }[],
  options: { retryable?: boolean; retryDelayMs?: number } = {},
): ModelError {
  return new ModelError(`every model failed: ${failures.map((f) => `${f.model} (${f.error})`).join('; ')}`, {
    details: { models: failures },
    ...options,
    retryable: options.retryable ?? true,
  });
}
