/**
 * Any Vercel AI SDK (v7) language model behind TurnKit's ModelClient. The SDK never runs a
 * tool: tools are declared without `execute`, and the engine runs them as activities.
 */
import { globalDefaults } from '../config.js';
import { APICallError } from '@ai-sdk/provider';
import type { LanguageModel } from 'ai';
import { generateText, jsonSchema, Output, streamText } from 'ai';
import { ConfigError, ModelAccessError, ModelError } from '../errors.js';
import type { ContentPart, Json, JsonObject } from '../store/types.js';
import { cacheCallOptions, requestMessages, sdkTools } from './prompt-cache.js';
import type { ModelCallOptions, ModelClient, ModelRequest, ModelResult } from './types.js';

/** How long one model call may take, unless `timeoutMs` says otherwise. */
const DEFAULT_TIMEOUT_MS = 10 * 60_000;

export interface AiSdkModelOptions {
  /** Builds the SDK model for a model id, e.g. `(id) => createOpenAI({ apiKey }).chat(id)`. */
  provider: (modelId: string) => LanguageModel;
  name?: string;
  /**
   * Retries inside the SDK (429/5xx/network), default 0: the engine retries on a durable
   * timer, honouring the provider's `retry-after`, and falls back along the model chain;
   * retries inside the SDK would multiply with those and hold the worker's slot.
   */
  maxRetries?: number;
  /**
   * How long one call may take before it is abandoned as a retryable timeout (default 10
   * minutes): a provider that hangs then counts against the step's attempts and the chain
   * moves on, instead of holding the activity to its start-to-close timeout.
   */
  timeoutMs?: number;
  /** Throws ModelAccessError from `validate` (e.g. a missing API key). */
  validate?: (model: string) => void;
  /**
   * Marks what repeats for the provider's prompt cache (default true, unless
   * `configure({ promptCache: false })`): Anthropic `cacheControl` on the last tool, the
   * stable system prompt and two transcript messages, OpenAI's `promptCacheKey` per
   * conversation (decision 54).
   */
  cacheInstructions?: boolean;
  /**
   * Whether a caller that takes deltas (the turn's model step) gets the SDK's streaming call
   * (`streamText`); default true. False: `generateText`, and the run streams whole steps.
   */
  stream?: boolean;
}

/** The language-model specifications `ai@7` runs, and the AI SDK major that introduced each. */
const SUPPORTED_SPECIFICATIONS: Record<string, string> = { v4: 'AI SDK 7', v3: 'AI SDK 6', v2: 'AI SDK 5' };

/** A provider model from an AI SDK major that `ai@7` cannot run is a ConfigError, found before any call. */
function checkModelSpecification(model: LanguageModel, modelId: string): LanguageModel {
  if (typeof model === 'string') return model;
  const version = (model as { specificationVersion?: unknown } | null)?.specificationVersion;
  if (typeof version === 'string' && version in SUPPORTED_SPECIFICATIONS) return model;
  const provider = (model as { provider?: unknown } | null)?.provider;
  throw new ConfigError(
    `model ${JSON.stringify(modelId)}${typeof provider === 'string' ? ` from provider ${provider}` : ''} ` +
      `implements language-model specification ${JSON.stringify(version ?? 'none')}; TurnKit runs ai@7, ` +
      `which accepts ${Object.entries(SUPPORTED_SPECIFICATIONS)
        .map(([spec, major]) => `${spec} (${major})`)
        .join(', ')}. Install a provider package of the AI SDK 7 line (e.g. @ai-sdk/openai@4).`,
    { details: { modelId, specificationVersion: version ?? null } },
  );
}

function isAbort(error: unknown, signal: AbortSignal): boolean {
  return signal.aborted || (error instanceof Error && error.name === 'AbortError');
}

/** The longest wait a provider's `retry-after` may impose on one attempt (ten minutes). */
const MAX_RETRY_AFTER_MS = 10 * 60_000;

/**
 * How long the provider asked to wait: `retry-after-ms` (OpenAI, Anthropic), else
 * `retry-after` in seconds or as an HTTP date. Undefined when it said nothing usable;
 * capped at ten minutes.
 */
export function retryAfterMs(
  headers: Record<string, string> | undefined,
  now = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const header = (name: string) =>
    Object.entries(headers)
      .find(([key]) => key.toLowerCase() === name)?.[1]
      ?.trim();
  let ms: number | undefined;
  const precise = header('retry-after-ms');
  if (precise && Number.isFinite(Number(precise))) ms = Number(precise);
  const coarse = header('retry-after');
  if (ms === undefined && coarse) {
    if (/^\d+(\.\d+)?$/.test(coarse)) ms = Number(coarse) * 1000;
    else if (Number.isFinite(Date.parse(coarse))) ms = Date.parse(coarse) - now;
  }
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) return undefined;
  return Math.min(Math.round(ms), MAX_RETRY_AFTER_MS);
}

/**
 * Provider failures become ModelError; 408, 409, 429, 5xx (Anthropic's 529 included) and
 * network errors say a retry may help, with the wait the provider asked for.
 */
export function toModelError(error: unknown, model?: string): ModelError {
  const cause = (error as { lastError?: unknown })?.lastError ?? error;
  if (APICallError.isInstance(cause)) {
    const status = cause.statusCode;
    const retryable = status === undefined || status === 429 || status >= 500 || cause.isRetryable;
    const wait = retryable ? retryAfterMs(cause.responseHeaders) : undefined;
    return new ModelError(`provider error${status ? ` ${status}` : ''}: ${cause.message}`, {
      cause: error,
      status,
      retryable,
      ...(wait !== undefined ? { retryAfterMs: wait } : {}),
      ...(model !== undefined ? { model } : {}),
    });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ModelError(`model call failed: ${message}`, {
    cause: error,
    retryable: true,
    ...(model !== undefined ? { model } : {}),
  });
}

/** What `chat` reads from a finished call, streamed or not. */
interface CallResult {
  text: string;
  reasoningText: string | undefined;
  toolCalls: { toolCallId: string; toolName: string; input: unknown }[];
  output?: unknown;
  usage: Awaited<ReturnType<typeof generateText>>['usage'];
  finishReason: string;
  response: { id?: string; modelId: string };
}

const warnedNoUsage = new Set<string>();
/** Spend limits need the token usage; some OpenAI-compatible providers stream none unless asked. */
function warnNoUsage(modelId: string): void {
  if (warnedNoUsage.has(modelId)) return;
  warnedNoUsage.add(modelId);
  console.warn(
    `turnkit: model ${modelId} streamed an answer without token usage, so its cost is unknown: ` +
      'for an OpenAI-compatible provider pass includeUsage: true to createOpenAICompatible, or AiSdkModel({ stream: false })',
  );
}

/**
 * The SDK's streaming call: each text and reasoning delta goes to `onDelta` as it arrives,
 * then the whole answer is read as `generateText` would return it. A stream that reports an
 * error (it broke off, a chunk the provider sent was malformed) throws it.
 */
async function streamed(
  call: Parameters<typeof streamText>[0],
  options: ModelCallOptions,
): Promise<CallResult> {
  const result = streamText({ ...call, onError: () => undefined });
  for await (const part of result.fullStream) {
    if (part.type === 'text-delta') options.onDelta!({ type: 'text', text: part.text });
    else if (part.type === 'reasoning-delta') options.onDelta!({ type: 'reasoning', text: part.text });
    else if (part.type === 'error') throw part.error;
    else if (part.type === 'abort') throw options.signal.reason ?? new Error('the model stream was aborted');
    options.onProgress?.();
  }
  const [text, reasoningText, toolCalls, usage, finishReason, response] = await Promise.all([
    result.text,
    result.reasoningText,
    result.toolCalls,
    result.usage,
    result.finishReason,
    result.response,
  ]);
  if (usage.inputTokens === undefined && usage.outputTokens === undefined) warnNoUsage(response.modelId);
  let output: unknown;
  try {
    output = await result.output;
  } catch {
    output = undefined;
  }
  return { text, reasoningText, toolCalls, usage, finishReason, response, output };
}

export class AiSdkModel implements ModelClient {
  readonly name: string;
  readonly #options: AiSdkModelOptions;

  constructor(options: AiSdkModelOptions) {
    this.#options = options;
    this.name = options.name ?? 'ai-sdk';
  }

  validate(model: string): void {
    this.#resolve(model);
  }

  #resolve(model: string): LanguageModel {
    if (!model) throw new ModelAccessError(`${this.name}: no model id configured`);
    this.#options.validate?.(model);
    return checkModelSpecification(this.#options.provider(model), model);
  }

  async chat(request: ModelRequest, options: ModelCallOptions): Promise<ModelResult> {
    const model = this.#resolve(request.model);
    // `configure({ promptCache: false })` turns the cache marks off everywhere.
    const cache = this.#options.cacheInstructions !== false && globalDefaults().promptCache;
    const timeout = AbortSignal.timeout(this.#options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const call = {
      model,
      messages: requestMessages(request, cache),
      allowSystemInMessages: true,
      ...(request.tools.length ? { tools: sdkTools(request, cache), toolChoice: 'auto' as const } : {}),
      ...(request.outputSchema
        ? { output: Output.object({ schema: jsonSchema(request.outputSchema as Record<string, unknown>) }) }
        : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      ...cacheCallOptions(request, cache),
      abortSignal: AbortSignal.any([options.signal, timeout]),
      maxRetries: this.#options.maxRetries ?? 0,
    };
    const progress = setInterval(() => options.onProgress?.(), 1_000);
    try {
      const result =
        options.onDelta && this.#options.stream !== false
          ? await streamed(call as Parameters<typeof streamText>[0], options)
          : await generateText(call as Parameters<typeof generateText>[0]);
      const parts: ContentPart[] = [];
      if (result.reasoningText) parts.push({ type: 'thinking', text: result.reasoningText });
      if (result.text) parts.push({ type: 'text', text: result.text });
      for (const call of result.toolCalls) {
        const input = call.input;
        const isObject = input !== null && typeof input === 'object' && !Array.isArray(input);
        parts.push({
          type: 'tool_call',
          id: call.toolCallId,
          name: call.toolName,
          arguments: isObject ? (input as JsonObject) : {},
          ...(isObject ? {} : { arguments_error: 'invalid JSON arguments' }),
        });
      }
      let outputData: Json | undefined;
      if (request.outputSchema) {
        try {
          outputData = result.output as Json;
        } catch {
          outputData = undefined;
        }
      }
      const usage = result.usage;
      return {
        parts,
        usage: {
          inputTokens: usage.inputTokenDetails?.noCacheTokens ?? usage.inputTokens ?? 0,
          outputTokens: usage.outputTokens ?? 0,
          cachedTokens: usage.inputTokenDetails?.cacheReadTokens ?? 0,
          cacheWriteTokens: usage.inputTokenDetails?.cacheWriteTokens ?? 0,
          thinkingTokens: usage.outputTokenDetails?.reasoningTokens ?? 0,
        },
        model: result.response.modelId,
        finishReason: result.finishReason,
        ...(outputData !== undefined ? { outputData } : {}),
        ...(result.response.id ? { providerMessageId: result.response.id } : {}),
      };
    } catch (error) {
      if (options.signal.aborted) throw error;
      if (timeout.aborted)
        throw new ModelError(
          `model call timed out after ${this.#options.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms`,
          {
            cause: error,
            retryable: true,
            model: request.model,
          },
        );
      if (isAbort(error, options.signal)) throw error;
      throw toModelError(error, request.model);
    } finally {
      clearInterval(progress);
    }
  }
}
