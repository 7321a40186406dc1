/**
 * Any AI SDK provider by id: model ids of the form `provider:model` are resolved through the
 * AI SDK's provider registry (`createProviderRegistry` from `ai`). Providers come from
 * `createWorker({ providers })`, or, for a prefix nobody passed, from the installed package
 * `@ai-sdk/<prefix>` (its default provider, configured from its own environment variables).
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ProviderV3, ProviderV4 } from '@ai-sdk/provider';
import { createProviderRegistry } from 'ai';
import { ConfigError } from '../errors.js';
import { AiSdkModel } from './ai-sdk-model.js';
import type { ModelChoice } from './model-chain.js';
import { envModelChain, modelChain } from './model-chain.js';
import type { ModelCallOptions, ModelClient, ModelRequest, ModelResult } from './types.js';

/** AI SDK providers by the prefix model ids use: `{ openai: createOpenAI({...}) }`. */
export type ProviderMap = Record<string, ProviderV4 | ProviderV3>;

export interface ProviderRegistryModelOptions {
  providers?: ProviderMap;
  /** Load `@ai-sdk/<prefix>` for a prefix not in `providers` (default true). */
  discover?: boolean;
  /** Serves model ids without a `provider:` prefix (e.g. the worker's own `model`). */
  fallback?: ModelClient;
  /** Retries inside the SDK, as AiSdkModel's (default 0). */
  maxRetries?: number;
  /** How long one call may take before it is a retryable timeout, as AiSdkModel's. */
  timeoutMs?: number;
  name?: string;
}

const SEPARATOR = ':';
/** Only a plain package-name segment is ever imported, never a path a model id could smuggle in. */
const PROVIDER_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** `openai:gpt-4o` → `['openai', 'gpt-4o']`; an id without a prefix → null. */
function splitModelId(modelId: string): [string, string] | null {
  const index = modelId.indexOf(SEPARATOR);
  if (index <= 0) return null;
  return [modelId.slice(0, index), modelId.slice(index + 1)];
}

const looksLikeProvider = (value: unknown): value is ProviderV4 =>
  (typeof value === 'function' || (typeof value === 'object' && value !== null)) &&
  typeof (value as { languageModel?: unknown }).languageModel === 'function';

const squash = (name: string) => name.toLowerCase().replace(/[^a-z0-9]/g, '');

async function importInstalled(specifier: string): Promise<Record<string, unknown> | null> {
  try {
    return (await import(specifier)) as Record<string, unknown>;
  } catch {
    // Not resolvable from TurnKit's own location: try the application's (its working directory).
    try {
      const resolved = createRequire(join(process.cwd(), 'package.json')).resolve(specifier);
      return (await import(pathToFileURL(resolved).href)) as Record<string, unknown>;
    } catch {
      return null;
    }
  }
}

/**
 * The provider of an installed `@ai-sdk/<id>` package: its `create<Id>()` factory called with
 * no settings (so it reads its environment now), else its default instance. Null when the
 * package is not installed.
 */
async function loadInstalledProvider(id: string): Promise<ProviderV4 | ProviderV3 | null> {
  if (!PROVIDER_ID.test(id)) return null;
  const module = await importInstalled(`@ai-sdk/${id}`);
  if (!module) return null;
  const factory = Object.entries(module).find(
    ([name, value]) => typeof value === 'function' && squash(name) === `create${squash(id)}`,
  );
  if (factory) {
    try {
      const provider = (factory[1] as () => unknown)();
      if (looksLikeProvider(provider)) return provider;
    } catch {
      // A factory that needs settings (e.g. a base URL): fall through to the default instance.
    }
  }
  const instance = Object.entries(module).find(
    ([name, value]) => squash(name) === squash(id) && looksLikeProvider(value),
  );
  if (instance) return instance[1] as ProviderV4;
  throw new ConfigError(
    `@ai-sdk/${id} is installed but exports no usable provider; pass it as createWorker({ providers: { ${JSON.stringify(id)}: ... } })`,
    { details: { provider: id } },
  );
}

/**
 * A ModelClient over the AI SDK's provider registry. `provider:model` ids go to the
 * registered (or installed) provider; an unknown prefix is a ConfigError, found before any
 * request is sent. Results report their model as `provider:<model the provider answered>`;
 * cost rates may be keyed by that id or by the bare model id.
 */
export class ProviderRegistryModel implements ModelClient {
  readonly name: string;
  readonly #providers = new Map<string, ProviderV4 | ProviderV3>();
  readonly #missing = new Set<string>();
  readonly #options: ProviderRegistryModelOptions;
  #registry: ReturnType<typeof createProviderRegistry> | undefined;
  readonly #model: AiSdkModel;

  constructor(options: ProviderRegistryModelOptions = {}) {
    this.#options = options;
    this.name = options.name ?? 'provider-registry';
    for (const [id, provider] of Object.entries(options.providers ?? {})) {
      if (id.includes(SEPARATOR))
        throw new ConfigError(`provider id ${JSON.stringify(id)} must not contain ${SEPARATOR}`);
      if (!looksLikeProvider(provider))
        throw new ConfigError(`provider ${JSON.stringify(id)} is not an AI SDK provider (no languageModel)`);
      this.#providers.set(id, provider);
    }
    this.#model = new AiSdkModel({
      name: this.name,
      ...(options.maxRetries !== undefined ? { maxRetries: options.maxRetries } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      provider: (modelId) => this.#registryOf().languageModel(modelId as `${string}:${string}`),
    });
  }

  /** The prefixes this client can serve now. */
  get providerIds(): string[] {
    return [...this.#providers.keys()].sort();
  }

  #registryOf(): ReturnType<typeof createProviderRegistry> {
    this.#registry ??= createProviderRegistry(Object.fromEntries(this.#providers) as ProviderMap, {
      separator: SEPARATOR,
    });
    return this.#registry;
  }

  /** Makes sure the id's provider is known (loading it if installed); null: use the fallback. */
  async #route(modelId: string): Promise<'registry' | 'fallback'> {
    const split = splitModelId(modelId);
    if (!split) {
      if (this.#options.fallback) return 'fallback';
      throw new ConfigError(
        `model id ${JSON.stringify(modelId)} names no provider: use provider:model (known providers: ${this.#known()})`,
        { details: { modelId } },
      );
    }
    const [id] = split;
    if (this.#providers.has(id)) return 'registry';
    if (this.#options.discover !== false && !this.#missing.has(id)) {
      const loaded = await loadInstalledProvider(id);
      if (loaded) {
        this.#providers.set(id, loaded);
        this.#registry = undefined;
        return 'registry';
      }
      this.#missing.add(id);
    }
    throw new ConfigError(
      `unknown model provider ${JSON.stringify(id)} in model id ${JSON.stringify(modelId)}: ` +
        `pass it as createWorker({ providers: { ${JSON.stringify(id)}: ... } }) or install @ai-sdk/${id} ` +
        `(known providers: ${this.#known()})`,
      { details: { modelId, provider: id } },
    );
  }

  #known(): string {
    return this.providerIds.join(', ') || 'none';
  }

  async validate(model: string): Promise<void> {
    if ((await this.#route(model)) === 'fallback') return this.#options.fallback!.validate?.(model);
    this.#model.validate(model);
  }

  async chat(request: ModelRequest, options: ModelCallOptions): Promise<ModelResult> {
    if ((await this.#route(request.model)) === 'fallback')
      return this.#options.fallback!.chat(request, options);
    const result = await this.#model.chat(request, options);
    const [provider] = splitModelId(request.model)!;
    const answered = result.model ?? splitModelId(request.model)![1];
    return { ...result, model: `${provider}${SEPARATOR}${answered}` };
  }
}

/**
 * The worker's default model client: the registry when `providers` are passed or the default
 * model id names a provider (`TURNKIT_MODEL=provider:model`), with `model` serving bare ids.
 */
export async function registryModelFor(options: {
  model?: ModelClient;
  providers?: ProviderMap;
  defaultModel?: ModelChoice;
}): Promise<ModelClient | undefined> {
  const choice = options.defaultModel ?? envModelChain(process.env['TURNKIT_MODEL']);
  const chain = choice === undefined ? [] : modelChain(choice, 'defaultModel');
  const prefixed = chain.filter((id) => splitModelId(id) !== null);
  if (!options.providers && !(prefixed.length > 0 && !options.model)) return options.model;
  const registry = new ProviderRegistryModel({
    ...(options.providers ? { providers: options.providers } : {}),
    ...(options.model ? { fallback: options.model } : {}),
  });
  // A default model whose provider is unknown can never run: say so at boot, not per turn.
  for (const id of prefixed) await registry.validate(id);
  return registry;
}
