import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ArgumentError, ModelAccessError } from '../errors.js';
import { AiSdkModel } from './ai-sdk-model.js';

export interface ProviderConfig {
  provider: 'openai' | 'anthropic' | 'openai-compatible';
  apiKey?: string;
  /** Required for openai-compatible endpoints (Ollama, vLLM, OpenRouter, …). */
  baseURL?: string;
  name?: string;
  maxRetries?: number;
  /** Custom fetch (tests, proxies). */
  fetch?: typeof fetch;
}

/** A ModelClient for OpenAI, Anthropic or any OpenAI-compatible endpoint. */
export function createModelClient(config: ProviderConfig): AiSdkModel {
  const requireKey = (model: string) => {
    if (!config.apiKey && config.provider !== 'openai-compatible') {
      throw new ModelAccessError(`${config.provider}: no API key configured for model ${model}`);
    }
  };
  const common = {
    name: config.name ?? config.provider,
    maxRetries: config.maxRetries,
    validate: requireKey,
  };
  switch (config.provider) {
    case 'openai': {
      const openai = createOpenAI({ apiKey: config.apiKey, baseURL: config.baseURL, fetch: config.fetch });
      return new AiSdkModel({ ...common, provider: (id) => openai.chat(id) });
    }
    case 'anthropic': {
      const anthropic = createAnthropic({
        apiKey: config.apiKey,
        baseURL: config.baseURL,
        fetch: config.fetch,
      });
      return new AiSdkModel({ ...common, provider: (id) => anthropic(id) });
    }
    case 'openai-compatible': {
      if (!config.baseURL) throw new ArgumentError('openai-compatible providers need a baseURL');
      const compatible = createOpenAICompatible({
        name: config.name ?? 'openai-compatible',
        apiKey: config.apiKey,
        baseURL: config.baseURL,
        fetch: config.fetch,
        // A streamed answer carries its token usage only when asked for (stream_options).
        includeUsage: true,
      });
      return new AiSdkModel({ ...common, provider: (id) => compatible(id) });
    }
    default:
      throw new ArgumentError(
        `unknown provider ${JSON.stringify((config as { provider: unknown }).provider)}`,
      );
  }
}

/**
 * The client the environment configures: ANTHROPIC_API_KEY, OPENAI_API_KEY, or
 * TURNKIT_OPENAI_COMPATIBLE_BASE_URL (+ TURNKIT_OPENAI_COMPATIBLE_API_KEY). Null when none is.
 */
export function modelClientFromEnv(env: NodeJS.ProcessEnv = process.env): AiSdkModel | null {
  if (env['TURNKIT_OPENAI_COMPATIBLE_BASE_URL']) {
    return createModelClient({
      provider: 'openai-compatible',
      baseURL: env['TURNKIT_OPENAI_COMPATIBLE_BASE_URL'],
      apiKey: env['TURNKIT_OPENAI_COMPATIBLE_API_KEY'],
    });
  }
  if (env['ANTHROPIC_API_KEY'])
    return createModelClient({ provider: 'anthropic', apiKey: env['ANTHROPIC_API_KEY'] });
  if (env['OPENAI_API_KEY']) return createModelClient({ provider: 'openai', apiKey: env['OPENAI_API_KEY'] });
  return null;
}
