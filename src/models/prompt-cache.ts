/**
 * Prompt caching on every model path (issue 30, decision 54): what a request repeats of the
 * one before it is marked for the provider's cache.
 *
 * Anthropic caches the prefix up to each `cacheControl` breakpoint, at most four a request:
 * the last tool and the stable system prompt (the prefix every turn of a conversation
 * shares), then two on the transcript: the message before the last assistant message (the
 * last message of the previous call, so this call reads the prefix that call wrote) and the
 * last message (written here, read by the next call). OpenAI caches prefixes on its own and
 * routes requests that share a `promptCacheKey` to the same cache machine, so the key is one
 * per conversation. Each provider ignores the other's options.
 */
import { createHash } from 'node:crypto';
import type { ModelMessage as SdkMessage, ToolSet } from 'ai';
import { jsonSchema, tool as sdkTool } from 'ai';
import { toAiSdkMessages } from './ai-sdk-messages.js';
import type { ModelRequest } from './types.js';

const EPHEMERAL = { anthropic: { cacheControl: { type: 'ephemeral' } } } as const;

/** The conversation's cache key: its id and the hash of the stable prefix it is sent with. */
function conversationCacheKey(request: Pick<ModelRequest, 'instructions' | 'tools' | 'metadata'>): string {
  const hash = createHash('sha256');
  hash.update(request.metadata.conversationId);
  hash.update('\u0000');
  hash.update(JSON.stringify(request.tools));
  hash.update('\u0000');
  hash.update(request.instructions);
  return `turnkit-${hash.digest('hex').slice(0, 32)}`;
}

/** The request's messages as the AI SDK takes them: the system prompt, then the transcript, marked. */
export function requestMessages(request: ModelRequest, cache: boolean): SdkMessage[] {
  return [...systemMessages(request, cache), ...cachedTranscript(toAiSdkMessages(request.messages), cache)];
}

/** The system messages: the stable prompt (marked when caching), then the per-call tail. */
function systemMessages(request: ModelRequest, cache: boolean): SdkMessage[] {
  return [
    { role: 'system', content: request.instructions, ...(cache ? { providerOptions: EPHEMERAL } : {}) },
    ...(request.dynamicInstructions
      ? [{ role: 'system' as const, content: request.dynamicInstructions }]
      : []),
  ];
}

/** The request's tools as the AI SDK declares them (schemas only: TurnKit runs them); the last one marked. */
export function sdkTools(request: ModelRequest, cache: boolean): ToolSet {
  const last = request.tools.length - 1;
  return Object.fromEntries(
    request.tools.map((spec, index) => [
      spec.name,
      sdkTool({
        description: spec.description,
        inputSchema: jsonSchema(spec.inputSchema as Record<string, unknown>),
        ...(cache && index === last ? { providerOptions: EPHEMERAL } : {}),
      }),
    ]),
  );
}

/**
 * Where the transcript's two breakpoints go: the last message, and the one before the last
 * assistant message. A tool loop's call k+1 sends call k's messages, its answer and the
 * results, so the message before that answer is exactly where call k put its last breakpoint.
 */
function transcriptBreakpoints(messages: readonly { role: string }[]): number[] {
  if (messages.length === 0) return [];
  const last = messages.length - 1;
  let answer = last;
  while (answer >= 0 && messages[answer]!.role !== 'assistant') answer -= 1;
  const previous = answer - 1;
  return previous >= 0 && previous < last ? [previous, last] : [last];
}

/** The transcript with its breakpoints marked (when caching). */
function cachedTranscript(messages: SdkMessage[], cache: boolean): SdkMessage[] {
  if (!cache) return messages;
  const marked = new Set(transcriptBreakpoints(messages));
  return messages.map((message, index) =>
    marked.has(index) ? ({ ...message, providerOptions: EPHEMERAL } as SdkMessage) : message,
  );
}

/** Call-level provider options: OpenAI's cache key, one per conversation. */
export function cacheCallOptions(request: ModelRequest, cache: boolean) {
  return cache ? { providerOptions: { openai: { promptCacheKey: conversationCacheKey(request) } } } : {};
}
