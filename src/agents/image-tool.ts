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
import type { HopFetch, NetworkPolicyOptions } from './public-fetch.js';
import { networkPolicy, publicFetch } from './public-fetch.js';
import type { ToolContext, ToolDefinition } from './tool.js';
import { defineTool } from './tool.js';
import type { MediaFetch } from './view-media-tool.js';
import { heartbeating } from './heartbeating.js';
import { checkedReference, inlineReferences } from './image-references.js';

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
 * Reference images and masks given as URLs are fetched here, like `view_media`'s media (the
 * same network options open that up the same way), and handed to the image model as `data:`
 * content: the model's provider never fetches a URL from this worker.
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
  /** Replaces the built-in transport for one hop (a proxy), as `viewMediaTool`'s `fetch`. */
  fetch?: MediaFetch;
}

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

/** The request as the model asked for it, within the reference-image limit. */
function imageRequest(
  imageModel: ImageModel,
  args: z.infer<typeof input>,
  maxReferenceImages: number | undefined,
): ImageRequest {
  if (maxReferenceImages !== undefined && args.reference_images.length > maxReferenceImages) {
    throw new ToolValidationError(
      `too many reference images: ${args.reference_images.length} (at most ${maxReferenceImages})`,
    );
  }
  return {
    model: imageModel.modelId,
    prompt: args.prompt,
    referenceImages: [...args.reference_images],
    ...(args.mask !== undefined ? { mask: args.mask } : {}),
    params: JSON.parse(JSON.stringify(args.params ?? {})) as JsonObject,
  };
}

/** What one image-model call made: its images as parts, its usage and recorded cost. */
interface Generated {
  parts: ImagePart[];
  usage: ModelUsage;
  cost: number | null;
}

/** The one image-model call: its cost is recorded even when the image is unusable. */
async function generateImages(
  imageModel: ImageModel,
  sent: ImageRequest,
  maxBytes: number,
  context: ToolContext,
): Promise<Generated> {
  let result: ImageResult;
  try {
    result = await heartbeating(context, () => imageModel.generate(sent, { signal: context.signal }));
  } catch (error) {
    await context.emit('image.failed', {
      model: sent.model,
      error: error instanceof Error ? error.message : String(error),
    });
    throw error;
  }
  const usage = usageOf(result ?? { images: [] });
  const cost = await context.recordUsage(usage, imageModel.modelId);
  try {
    if (!result || !Array.isArray(result.images) || result.images.length === 0) {
      throw new ToolError('the image model returned no image');
    }
    return { parts: result.images.map((image) => imagePart(image, imageModel, maxBytes)), usage, cost };
  } catch (error) {
    await context.emit('image.failed', {
      model: sent.model,
      error: error instanceof Error ? error.message : String(error),
      cost,
    });
    throw error;
  }
}

/** `image.completed` for the first image (without its bytes), then the spend cap. */
async function publishImage(imageModel: ImageModel, generated: Generated, context: ToolContext) {
  const { parts, usage, cost } = generated;
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
  return image;
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
  if (options.fetch !== undefined && typeof options.fetch !== 'function')
    throw new ArgumentError('imageTool: fetch must be a function (url, { signal, redirect })');
  const fetchHop = options.fetch as HopFetch | undefined;
  const fetcher = (url: string, signal: AbortSignal) =>
    publicFetch(url, { policy, signal, ...(fetchHop ? { fetchHop } : {}) });

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
      const request = imageRequest(imageModel, args, maxReferenceImages);
      // Checked before the gate (by name), fetched only once it approved.
      const references: ({ data: string } | { url: string })[] = [];
      for (const reference of [...request.referenceImages, ...(request.mask ? [request.mask] : [])])
        references.push(await checkedReference(reference, policy, maxBytes, context));
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
      const inline = await inlineReferences(references, fetcher, maxBytes, context);
      // What the image model gets: the same request with every reference as `data:` content.
      const sent: ImageRequest = {
        ...request,
        referenceImages: inline.slice(0, request.referenceImages.length),
        ...(request.mask !== undefined ? { mask: inline[inline.length - 1]! } : {}),
      };
      const generated = await generateImages(imageModel, sent, maxBytes, context);
      const image = await publishImage(imageModel, generated, context);
      const messageId = await context.appendAfterResults({
        role: 'assistant',
        kind: 'image',
        content: generated.parts,
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
