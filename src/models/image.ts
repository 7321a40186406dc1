/**
 * The image-generation boundary (spec §3.9, §7.4 painter). Like `ModelClient` for text, the
 * painter talks to image models only through `ImageModel`, so vendors stay in this folder and
 * tests can script generations offline.
 */
import type { ImageModel as SdkImageModel } from 'ai';
import { generateImage } from 'ai';
import { ArgumentError, ModelError } from '../errors.js';
import type { JsonObject } from '../store/types.js';
import { toModelError } from './ai-sdk-model.js';

export interface ImageRequest {
  /** Id of the image model that will serve the request (what an application gate checks). */
  model: string;
  prompt: string;
  /**
   * Reference images. The image tool's gate sees them as the model gave them (https URLs or
   * base64 `data:` URLs); the image model gets each as a base64 `data:` URL (URLs fetched by
   * the tool), never a URL to fetch.
   */
  referenceImages: string[];
  /** Mask for inpainting, in the same forms as a reference image. */
  mask?: string;
  /** Provider-neutral knobs (`size`, `aspect_ratio`, `seed`, `n`, `provider_options`). */
  params: JsonObject;
}

export interface GeneratedImage {
  /** IANA media type, e.g. `image/png`. */
  mediaType: string;
  /** Base64 bytes, when the provider returned them inline. */
  data?: string;
  /** Where the image can be fetched, when the provider hosts it. */
  url?: string;
  revisedPrompt?: string;
}

export interface ImageUsage {
  inputTokens?: number;
  outputTokens?: number;
  /** USD, when the provider reports it. */
  cost?: number;
}

export interface ImageResult {
  images: GeneratedImage[];
  usage?: ImageUsage;
}

export interface ImageCallOptions {
  /** Aborted when the turn is cancelled or the activity times out. */
  signal: AbortSignal;
}

export interface ImageModel {
  /** The model id recorded on image messages and shown to the painter's gate. */
  readonly modelId: string;
  readonly provider?: string;
  generate(request: ImageRequest, options: ImageCallOptions): Promise<ImageResult>;
}

/** One-pixel transparent PNG: a real, decodable image for tests that do not care what it shows. */
export const TINY_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

export type ImageScript =
  | readonly (ImageResult | Error)[]
  | ((request: ImageRequest, context: { call: number }) => ImageResult | Promise<ImageResult>);

/**
 * An offline image model for tests and demos: answers from a list of results consumed in call
 * order (an Error entry fails that call), from a function, or with one tiny PNG by default.
 * Every request is recorded in `calls`.
 */
export class ScriptedImageModel implements ImageModel {
  readonly modelId: string;
  readonly provider: string;
  readonly calls: ImageRequest[] = [];
  readonly #script: ImageScript | undefined;

  constructor(options: { modelId?: string; provider?: string; script?: ImageScript } = {}) {
    this.modelId = options.modelId ?? 'scripted-image';
    this.provider = options.provider ?? 'scripted';
    this.#script = options.script;
  }

  async generate(request: ImageRequest, options: ImageCallOptions): Promise<ImageResult> {
    if (options.signal.aborted) throw new ModelError('the image call was aborted');
    const call = this.calls.length;
    this.calls.push(JSON.parse(JSON.stringify(request)) as ImageRequest);
    const script = this.#script;
    if (script === undefined) return { images: [{ mediaType: 'image/png', data: TINY_PNG_BASE64 }] };
    if (typeof script === 'function') return script(request, { call });
    const step = script[call];
    if (step === undefined) throw new ModelError(`scripted image model: no result left (${call} calls made)`);
    if (step instanceof Error) throw step;
    return step;
  }
}

export interface AiSdkImageModelOptions {
  /** An AI SDK image model, e.g. `createOpenAI({ apiKey }).image('gpt-image-1')`. */
  model: Exclude<SdkImageModel, string>;
  /**
   * Retries inside the SDK, default 0, as for every model call the engine drives: a provider
   * error fails the paint and the model reads it (Temporal does not retry a paint: its outcome
   * would be unknown).
   */
  maxRetries?: number;
}

/** A base64 `data:` URL and nothing else (no URL a provider would fetch, no control characters). */
const INLINE_IMAGE = /^data:[\w.+-]+\/[\w.+-]+(?:;[\w-]+=[\w.+%-]*)*;base64,[A-Za-z0-9+/]*={0,2}$/;

function dimension<T extends string>(value: unknown, pattern: RegExp, name: string): T | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || !pattern.test(value))
    throw new ModelError(`invalid image ${name}: ${JSON.stringify(value)}`);
  return value as T;
}

/**
 * Any Vercel AI SDK (v7) image model behind `ImageModel`, through `generateImage`. Only the
 * provider-neutral params are mapped; `provider_options` is passed as the SDK's
 * `providerOptions` (keyed by provider, e.g. `{ openai: { quality: 'high' } }`).
 */
export class AiSdkImageModel implements ImageModel {
  readonly modelId: string;
  readonly provider: string;
  readonly #options: AiSdkImageModelOptions;

  constructor(options: AiSdkImageModelOptions) {
    if (!options?.model || typeof options.model !== 'object') {
      throw new ArgumentError('AiSdkImageModel needs an AI SDK image model object');
    }
    this.#options = options;
    this.modelId = options.model.modelId;
    this.provider = options.model.provider;
  }

  async generate(request: ImageRequest, options: ImageCallOptions): Promise<ImageResult> {
    const { params } = request;
    const size = dimension<`${number}x${number}`>(params['size'], /^\d+x\d+$/, 'size');
    const aspectRatio = dimension<`${number}:${number}`>(params['aspect_ratio'], /^\d+:\d+$/, 'aspect_ratio');
    const seed = typeof params['seed'] === 'number' ? params['seed'] : undefined;
    const n = typeof params['n'] === 'number' ? params['n'] : undefined;
    const providerOptions = params['provider_options'];
    const withImages = request.referenceImages.length > 0 || request.mask !== undefined;
    // The SDK hands any string starting with "http" to the provider as a URL to fetch from this
    // worker: only inline `data:` content goes through (the image tool fetches URLs itself).
    for (const image of [...request.referenceImages, ...(request.mask !== undefined ? [request.mask] : [])]) {
      if (typeof image !== 'string' || !INLINE_IMAGE.test(image))
        throw new ArgumentError('AiSdkImageModel takes reference images and masks only as base64 data: URLs');
    }
    let result: Awaited<ReturnType<typeof generateImage>>;
    try {
      result = await generateImage({
        model: this.#options.model,
        prompt: withImages
          ? {
              text: request.prompt,
              images: request.referenceImages,
              ...(request.mask !== undefined ? { mask: request.mask } : {}),
            }
          : request.prompt,
        ...(size ? { size } : {}),
        ...(aspectRatio ? { aspectRatio } : {}),
        ...(seed !== undefined ? { seed } : {}),
        ...(n !== undefined ? { n } : {}),
        ...(providerOptions && typeof providerOptions === 'object' && !Array.isArray(providerOptions)
          ? { providerOptions: providerOptions as Parameters<typeof generateImage>[0]['providerOptions'] }
          : {}),
        maxRetries: this.#options.maxRetries ?? 0,
        abortSignal: options.signal,
      });
    } catch (error) {
      throw toModelError(error);
    }
    return {
      images: result.images.map((image) => ({ mediaType: image.mediaType, data: image.base64 })),
      usage: {
        inputTokens: result.usage?.inputTokens ?? 0,
        outputTokens: result.usage?.outputTokens ?? 0,
      },
    };
  }
}
