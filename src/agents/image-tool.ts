/**
 * `imageTool`: the generic image-generation tool (TurnKit's `ImageTool`) the painter is built
 * on. One approved call makes exactly one image-model call; its usage is charged to the turn
 * through the runtime's cost rates and counts toward `maxSpend`; the image becomes an
 * `assistant` message of kind `image`, written after the response's tool results, whose id
 * the tool returns (without the base64 bytes). `image.requested`, `image.completed` and
 * `image.failed` go to the turn's event log.
 */
import { z } from 'zod';
import { ArgumentError, ToolError, ToolValidationError } from '../errors.js';
import type { GeneratedImage, ImageModel, ImageRequest, ImageResult } from '../models/image.js';
import type { ModelUsage } from '../models/types.js';
import type { ContentPart, Json, JsonObject } from '../store/types.js';
import type { NetworkPolicy, NetworkPolicyOptions } from './public-fetch.js';
import { checkPublicUrl, networkPolicy } from './public-fetch.js';
import type { ToolContext, ToolDefinition } from './tool.js';
import { defineTool } from './tool.js';

/** Approves one generation; anything but a literal `true` (or a throw) denies it. */
export type ImageGate = (request: ImageRequest, options: { context: ToolContext }) => unknown;

export type ImagePart = Extract<ContentPart, { type: 'image' }>;

export interface ImageToolResult {
  conversation_id: string;
  image_message_id: string;
  /** The stored image part without `data`. */
  image: Omit<ImagePart, 'data'>;
}

/** Largest decoded image the tool stores (bytes); a bigger one is a ToolError. */
export const IMAGE_MAX_BYTES = 20 * 1024 * 1024;

/**
 * Reference images and masks given as URLs are handed to the image model, whose SDK may fetch
 * them from this worker: they must be public https URLs, like `view_media`'s (the network
 * options open that up the same way).
 */
export interface ImageToolOptions extends NetworkPolicyOptions {
  imageModel: ImageModel;
  /** Default `generate_image`. */
  name?: string;
  description?: string;
  /** When given, only a literal `true` lets a generation happen. */
  gate?: ImageGate;
  /** Refuse requests with more reference images than this (ToolValidationError). */
  maxReferenceImages?: number;
  /** Largest decoded image stored, in bytes (default 20 MiB). */
  maxImageBytes?: number;
  /** Ends the turn; the completion message is the JSON result. */
  terminal?: boolean;
}

const HEARTBEAT_MS = 1_000;

const input = z.object({
  prompt: z.string().min(1).describe('What to paint: subject, style, composition.'),
  reference_images: z
    .array(z.string())
    .default([])
    .describe('Reference images to follow: https URLs or data URLs.'),
  mask: z.string().optional().describe('Mask image (URL or data URL) marking the area to repaint.'),
  params: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('Generation parameters, e.g. {"size": "1024x1024", "aspect_ratio": "16:9", "seed": 7}.'),
});

export function validateImageModel(imageModel: unknown): ImageModel {
  const candidate = imageModel as Partial<ImageModel> | null;
  if (
    !candidate ||
    typeof candidate !== 'object' ||
    typeof candidate.generate !== 'function' ||
    typeof candidate.modelId !== 'string' ||
    candidate.modelId === ''
  ) {
    throw new ArgumentError('an image tool needs an imageModel with a modelId and generate()');
  }
  return candidate as ImageModel;
}

function imagePart(image: GeneratedImage, imageModel: ImageModel, maxBytes: number): ImagePart {
  if (!image || typeof image.mediaType !== 'string' || image.mediaType === '') {
    throw new ToolError('the image model returned an image without a media type');
  }
  if (!image.data && !image.url)
    throw new ToolError('the image model returned an image with neither URL nor data');
  if (image.data && Math.floor((image.data.length * 3) / 4) > maxBytes) {
    throw new ToolError(`the generated image is larger than ${maxBytes} bytes`);
  }
  return {
    type: 'image',
    mime_type: image.mediaType,
    ...(image.url ? { url: image.url } : {}),
    ...(image.data ? { data: image.data } : {}),
    model: imageModel.modelId,
    ...(imageModel.provider ? { provider: imageModel.provider } : {}),
    ...(image.revisedPrompt ? { revised_prompt: image.revisedPrompt } : {}),
  };
}

/** Calls `fn`, heartbeating meanwhile (a slow generation must not look like a dead worker). */
export async function heartbeating<T>(context: ToolContext, fn: () => Promise<T>): Promise<T> {
  const beat = setInterval(() => context.heartbeat(), HEARTBEAT_MS);
  try {
    return await fn();
  } finally {
    clearInterval(beat);
  }
}

/** Refuses a model-chosen reference image or mask URL that points anywhere but the public internet. */
async function checkImageUrls(
  urls: readonly string[],
  policy: NetworkPolicy,
  context: ToolContext,
): Promise<void> {
  for (const url of urls.filter((candidate) => /^https?:/i.test(candidate))) {
    try {
      await checkPublicUrl(url, policy);
    } catch (error) {
      await context.emit('image.failed', {
        url,
        error: error instanceof Error ? error.message : String(error),
      });
      throw new ToolError('a reference image or mask URL was refused (only public https URLs are used)');
    }
  }
}

function usageOf(result: ImageResult): ModelUsage {
  return {
    inputTokens: result.usage?.inputTokens ?? 0,
    outputTokens: result.usage?.outputTokens ?? 0,
    ...(result.usage?.cost !== undefined ? { cost: result.usage.cost } : {}),
  };
}

function nonNegativeInteger(name: string, value: unknown): void {
  if (value !== undefined && !(typeof value === 'number' && Number.isInteger(value) && value >= 0)) {
    throw new ArgumentError(`${name} must be a non-negative integer`);
  }
}

/** The generic image tool (spec §3.9 `paint` from inside a tool). */
export function imageTool(options: ImageToolOptions): ToolDefinition {
  if (!options || typeof options !== 'object') throw new ArgumentError('imageTool needs options');
  const imageModel = validateImageModel(options.imageModel);
  const { gate, maxReferenceImages } = options;
  if (gate !== undefined && typeof gate !== 'function')
    throw new ArgumentError('an image gate must be a function (request, { context })');
  nonNegativeInteger('maxReferenceImages', maxReferenceImages);
  nonNegativeInteger('maxImageBytes', options.maxImageBytes);
  const maxBytes = options.maxImageBytes ?? IMAGE_MAX_BYTES;
  const name = options.name ?? 'generate_image';
  const policy = networkPolicy(options);

  return defineTool({
    name,
    description:
      options.description ??
      'Generate one image from a prompt, optionally following reference images and a mask.',
    input,
    // A generation is an external effect that costs money: never re-run one whose outcome is unknown.
    recovery: 'unknown',
    terminal: options.terminal ? (result: Json) => JSON.stringify(result) : false,
    execute: async (args, context): Promise<ImageToolResult> => {
      if (maxReferenceImages !== undefined && args.reference_images.length > maxReferenceImages) {
        throw new ToolValidationError(
          `too many reference images: ${args.reference_images.length} (at most ${maxReferenceImages})`,
        );
      }
      const request: ImageRequest = {
        model: imageModel.modelId,
        prompt: args.prompt,
        referenceImages: [...args.reference_images],
        ...(args.mask !== undefined ? { mask: args.mask } : {}),
        params: JSON.parse(JSON.stringify(args.params ?? {})) as JsonObject,
      };
      await checkImageUrls(
        [...request.referenceImages, ...(request.mask ? [request.mask] : [])],
        policy,
        context,
      );
      if (gate) {
        // A copy: whatever the gate does to its argument cannot change what it approved.
        const approved: unknown = await gate(structuredClone(request), { context });
        if (approved !== true)
          throw new ToolError('image generation was not approved by the application gate');
      }
      await context.emit('image.requested', {
        model: request.model,
        prompt: request.prompt,
        params: request.params,
        reference_image_count: request.referenceImages.length,
        mask: request.mask !== undefined,
      });
      let result: ImageResult;
      try {
        result = await heartbeating(context, () => imageModel.generate(request, { signal: context.signal }));
      } catch (error) {
        await context.emit('image.failed', {
          model: request.model,
          error: error instanceof Error ? error.message : String(error),
        });
        throw error;
      }
      // The generation happened: its cost is recorded even when the image is unusable.
      const usage = usageOf(result ?? { images: [] });
      const cost = await context.recordUsage(usage, imageModel.modelId);
      let parts: ImagePart[];
      try {
        if (!result || !Array.isArray(result.images) || result.images.length === 0) {
          throw new ToolError('the image model returned no image');
        }
        parts = result.images.map((image) => imagePart(image, imageModel, maxBytes));
      } catch (error) {
        await context.emit('image.failed', {
          model: request.model,
          error: error instanceof Error ? error.message : String(error),
          cost,
        });
        throw error;
      }
      const { data: _data, ...image } = parts[0]!;
      await context.emit('image.completed', {
        image: image as unknown as JsonObject,
        model: imageModel.modelId,
        provider: imageModel.provider ?? null,
        mime_type: image.mime_type,
        usage: { input_tokens: usage.inputTokens, output_tokens: usage.outputTokens },
        cost,
        metadata: { tool_call_id: context.execution.toolCallId, image_count: parts.length },
      });
      // Over the spend cap: the cost stays recorded, no image message is written, the run fails.
      await context.checkSpend();
      const messageId = await context.appendAfterResults({
        role: 'assistant',
        kind: 'image',
        content: parts,
        // Not `toolExecutionId`: that column marks the execution's tool-result message.
        metadata: {
          tool_name: name,
          tool_execution_id: context.execution.id,
          tool_call_id: context.execution.toolCallId,
          prompt: args.prompt,
        },
      });
      return { conversation_id: context.turn.conversationId, image_message_id: messageId, image };
    },
  });
}
