/**
 * The painter (spec §7.4, §3.9): an agent whose one job is a single image generation. Image
 * generation costs money and produces content, so the application must pass a gate that
 * approves every request; only a literal `true` lets it through (a truthy string or object
 * from a sloppy gate is a denial, like the authorization policy).
 *
 * `paint_image` is terminal: the turn ends with the tool's JSON result as its output text.
 * The image itself becomes an `image` message of the turn's conversation, written through the
 * turn's fenced store once the response's tool calls have their results (so a turn that lost
 * its claim cannot add one, and no message sits between a call and its result). The result
 * carries the message id and the image without its base64 bytes, which would only bloat the
 * tool result, the output text and every later prompt.
 */
import type { Agent } from '../agents/agent.js';
import { defineAgent } from '../agents/agent.js';
import type { ImageGate, ImagePart, ImageToolResult } from '../agents/image-tool.js';
import { imageTool, validateImageModel } from '../agents/image-tool.js';
import type { NetworkPolicyOptions } from '../agents/public-fetch.js';
import { networkOptionsOf } from '../agents/public-fetch.js';
import type { ToolDefinition } from '../agents/tool.js';
import type { MediaFetch } from '../agents/view-media-tool.js';
import { ArgumentError } from '../errors.js';
import type { ImageModel } from '../models/image.js';
import type { SpecialistAgentOptions } from './read-only.js';
import { joinInstructions } from './read-only.js';

/** Approves one generation; anything but a literal `true` (or a throw) denies it. */
export type PaintGate = ImageGate;
export type { ImagePart };
export type PaintResult = ImageToolResult;

/** Reference image and mask URLs: fetched here, public https only, unless the network options say more. */
export interface PaintToolOptions extends NetworkPolicyOptions {
  imageModel: ImageModel;
  gate: PaintGate;
  /** Refuse requests with more reference images than this (ToolValidationError). */
  maxReferenceImages?: number;
  /** Largest decoded image stored, in bytes (default 20 MiB). */
  maxImageBytes?: number;
  /** Replaces the transport that fetches reference images and masks, one hop at a time (a proxy). */
  fetch?: MediaFetch;
}

/** `paint_image`: gate, one generation, an `image` message, and a JSON result that ends the turn. */
export function paintImageTool(options: PaintToolOptions): ToolDefinition {
  if (!options || typeof options !== 'object') throw new ArgumentError('paintImageTool needs options');
  const imageModel = validateImageModel(options.imageModel);
  if (typeof options.gate !== 'function')
    throw new ArgumentError('painter needs a gate function (request, { context })');
  return imageTool({
    imageModel,
    name: 'paint_image',
    description: 'Generate one image from a prompt, optionally following reference images and a mask.',
    gate: options.gate,
    ...(options.maxReferenceImages !== undefined ? { maxReferenceImages: options.maxReferenceImages } : {}),
    ...(options.maxImageBytes !== undefined ? { maxImageBytes: options.maxImageBytes } : {}),
    ...(options.fetch !== undefined ? { fetch: options.fetch } : {}),
    ...networkOptionsOf(options),
    terminal: true,
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
  const {
    imageModel,
    gate,
    maxReferenceImages,
    maxImageBytes,
    fetch,
    tools,
    instructions,
    name,
    allowHttp: _allowHttp,
    allowPrivateNetwork: _allowPrivateNetwork,
    allowHosts: _allowHosts,
    maxRedirects: _maxRedirects,
    resolveHost: _resolveHost,
    ...agentOptions
  } = options;
  const paint = paintImageTool({
    ...networkOptionsOf(options),
    imageModel,
    gate,
    ...(maxReferenceImages !== undefined ? { maxReferenceImages } : {}),
    ...(maxImageBytes !== undefined ? { maxImageBytes } : {}),
    ...(fetch !== undefined ? { fetch } : {}),
  });
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
