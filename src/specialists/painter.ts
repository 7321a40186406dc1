/**
 * The painter (spec §7.4, §3.9): an agent whose one job is a single image generation. Image
 * generation costs money and produces content, so the application must pass a gate that
 * approves every request; only a literal `true` lets it through (a truthy string or object
 * from a sloppy gate is a denial, like the authorization policy).
 *
 * `paint_image` is terminal: the turn ends with the tool's JSON result as its output text.
 * The image itself becomes an `image` message of the turn's conversation, written through the
 * tool context's fenced store, so a turn that lost its claim cannot add one. The result
 * carries the message id and the image without its base64 bytes, which would only bloat the
 * tool result, the output text and every later prompt.
 */
import { z } from 'zod';
import type { Agent } from '../agents/agent.js';
import { defineAgent } from '../agents/agent.js';
import type { ToolContext, ToolDefinition } from '../agents/tool.js';
import { defineTool } from '../agents/tool.js';
import { ArgumentError, ToolError, ToolValidationError } from '../errors.js';
import { addUsage, costFromUsage } from '../models/cost.js';
import type { GeneratedImage, ImageModel, ImageRequest, ImageResult } from '../models/image.js';
import type { ContentPart, Json, JsonObject } from '../store/types.js';
import type { SpecialistAgentOptions } from './read-only.js';
import { joinInstructions } from './read-only.js';

/** Approves one generation; anything but a literal `true` (or a throw) denies it. */
export type PaintGate = (request: ImageRequest, options: { context: ToolContext }) => unknown;

export type ImagePart = Extract<ContentPart, { type: 'image' }>;

export interface PaintResult {
  conversation_id: string;
  image_message_id: string;
  /** The stored image part without `data`. */
  image: Omit<ImagePart, 'data'>;
}

export interface PaintToolOptions {
  imageModel: ImageModel;
  gate: PaintGate;
  /** Refuse requests with more reference images than this (ToolValidationError). */
  maxReferenceImages?: number;
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

function validateImageModel(imageModel: unknown): ImageModel {
  const candidate = imageModel as Partial<ImageModel> | null;
  if (
    !candidate ||
    typeof candidate !== 'object' ||
    typeof candidate.generate !== 'function' ||
    typeof candidate.modelId !== 'string' ||
    candidate.modelId === ''
  ) {
    throw new ArgumentError('painter needs an imageModel with a modelId and generate()');
  }
  return candidate as ImageModel;
}

function imagePart(image: GeneratedImage, imageModel: ImageModel): ImagePart {
  if (!image || typeof image.mediaType !== 'string' || image.mediaType === '') {
    throw new ToolError('the image model returned an image without a media type');
  }
  if (!image.data && !image.url)
    throw new ToolError('the image model returned an image with neither URL nor data');
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

/** Calls the model once, heartbeating meanwhile (a slow generation must not look like a dead worker). */
async function generate(
  imageModel: ImageModel,
  request: ImageRequest,
  context: ToolContext,
): Promise<ImageResult> {
  const beat = setInterval(() => context.heartbeat(), HEARTBEAT_MS);
  try {
    return await imageModel.generate(request, { signal: context.signal });
  } finally {
    clearInterval(beat);
  }
}

/** Adds the generation's usage and any provider-reported cost to the turn (inside the caller's transaction). */
async function recordUsage(context: ToolContext, result: ImageResult, model: string): Promise<void> {
  if (!result.usage) return;
  const usage = {
    inputTokens: result.usage.inputTokens ?? 0,
    outputTokens: result.usage.outputTokens ?? 0,
    ...(result.usage.cost !== undefined ? { cost: result.usage.cost } : {}),
  };
  const cost = costFromUsage(usage, model);
  const { store, turn } = context;
  const fresh = await store.loadTurn(turn.id);
  await store.updateTurn(turn.id, {
    usage: addUsage(fresh.usage, usage, cost),
    cost: (fresh.cost ?? 0) + (cost.total ?? 0),
  });
}

/** `paint_image`: gate, one generation, an `image` message, and a JSON result that ends the turn. */
export function paintImageTool(options: PaintToolOptions): ToolDefinition {
  if (!options || typeof options !== 'object') throw new ArgumentError('paintImageTool needs options');
  const imageModel = validateImageModel(options.imageModel);
  const { gate, maxReferenceImages } = options;
  if (typeof gate !== 'function')
    throw new ArgumentError('painter needs a gate function (request, { context })');
  if (
    maxReferenceImages !== undefined &&
    !(
      typeof maxReferenceImages === 'number' &&
      Number.isInteger(maxReferenceImages) &&
      maxReferenceImages >= 0
    )
  ) {
    throw new ArgumentError('maxReferenceImages must be a non-negative integer');
  }

  return defineTool({
    name: 'paint_image',
    description: 'Generate one image from a prompt, optionally following reference images and a mask.',
    input,
    // A generation is an external effect that costs money: never re-run one whose outcome is unknown.
    recovery: 'unknown',
    terminal: (result: Json) => JSON.stringify(result),
    execute: async (args, context): Promise<PaintResult> => {
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
      // A copy: whatever the gate does to its argument cannot change what it approved.
      const approved: unknown = await gate(structuredClone(request), { context });
      if (approved !== true) throw new ToolError('image generation was not approved by the application gate');

      const result = await generate(imageModel, request, context);
      if (!result || !Array.isArray(result.images) || result.images.length === 0) {
        throw new ToolError('the image model returned no image');
      }
      const parts = result.images.map((image) => imagePart(image, imageModel));
      // Usage and the image message land together, or not at all if the turn lost its claim.
      const { store, turn, execution } = context;
      const message = await store.atomic(turn.conversationId, async () => {
        await recordUsage(context, result, imageModel.modelId);
        return store.appendMessage({
          conversationId: turn.conversationId,
          turnId: turn.id,
          role: 'assistant',
          kind: 'image',
          content: parts,
          // Not `toolExecutionId`: that column marks the execution's tool-result message.
          metadata: {
            tool_name: 'paint_image',
            tool_execution_id: execution.id,
            tool_call_id: execution.toolCallId,
            prompt: args.prompt,
          },
        });
      });
      const { data: _data, ...image } = parts[0]!;
      return { conversation_id: context.turn.conversationId, image_message_id: message.id, image };
    },
  });
}

export const PAINTER_INSTRUCTIONS =
  'You are the painter. Turn the request into one precise image prompt and call paint_image exactly once; ' +
  'pass reference images and a mask only when the request provides them.';

export type PainterOptions = SpecialistAgentOptions &
  PaintToolOptions & {
    /** Further tools, offered after `paint_image`. */
    tools?: readonly ToolDefinition[];
    /** Appended to the painter's own instructions. */
    instructions?: string;
  };

/** An ordinary agent named `painter` that paints through a gated image model (spec §7.4). */
export function painter(options: PainterOptions): Agent {
  if (!options || typeof options !== 'object') throw new ArgumentError('painter needs options');
  const { imageModel, gate, maxReferenceImages, tools, instructions, name, ...agentOptions } = options;
  const paint = paintImageTool({ imageModel, gate, maxReferenceImages });
  return defineAgent({
    ...agentOptions,
    // Specialists take no global defaults (skills, contributors, limits): spec §7.4.
    inheritGlobals: false,
    name: name ?? 'painter',
    description: agentOptions.description ?? 'Paints one image for a request.',
    instructions: joinInstructions(PAINTER_INSTRUCTIONS, instructions),
    tools: [paint, ...(tools ?? [])],
  });
}
