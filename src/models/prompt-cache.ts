/**
 * Prompt caching on every model path (issue 30): the stable prefix of a request — the tool
 * list and the stable system prompt, byte-identical across the turns of a conversation — is
 * marked for the provider's cache. Anthropic caches up to a `cacheControl` breakpoint (one on
 * the last tool, one on the stable system prompt: two of its four); OpenAI caches prefixes on
 * its own and routes requests that share a `promptCacheKey` to the same cache, so the key is
 * the prefix's hash. Each provider ignores the other's options.
 */
import { createHash } from 'node:crypto';
import type { ModelMessage as SdkMessage, ToolSet } from 'ai';
import { jsonSchema, tool as sdkTool } from 'ai';
import type { ModelRequest } from './types.js';

const EPHEMERAL = { anthropic: { cacheControl: { type: 'ephemeral' } } } as const;

/** The hash of the stable prefix: the tools in order, then the stable instructions. */
function stablePrefixKey(request: Pick<ModelRequest, 'instructions' | 'tools'>): string {
  const hash = createHash('sha256');
  hash.update(JSON.stringify(request.tools));
  hash.update('\u0000');
  hash.update(request.instructions);
  return `turnkit-${hash.digest('hex').slice(0, 32)}`;
}

/** The system messages: the stable prompt (marked when caching), then the per-call tail. */
export function systemMessages(request: ModelRequest, cache: boolean): SdkMessage[] {
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

/** Call-level provider options: OpenAI's cache key. */
export function cacheCallOptions(request: ModelRequest, cache: boolean) {
  return cache ? { providerOptions: { openai: { promptCacheKey: stablePrefixKey(request) } } } : {};
}
