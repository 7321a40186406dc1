/**
 * A local server speaking Anthropic's Messages API that models its prompt cache by the
 * breakpoints it receives (issue 43, #9). The request is read as Anthropic reads it: tools,
 * then system blocks, then each message's content blocks. A prefix ending at a block marked
 * `cache_control` is cached once a request has marked that exact prefix; a request reads the
 * longest of its marked prefixes seen before, and writes all of its own. Tokens are counted
 * as characters / 4 of each block's JSON (without its `cache_control`). More than four
 * breakpoints is a 400, as Anthropic answers it.
 */
import { createHash } from 'node:crypto';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { providerServer, sendError, sendReply } from './openai-sse.js';

type Block = Record<string, unknown> & { cache_control?: unknown };

/** One request as the server counted it. */
export interface CachedCall {
  model: string;
  inputTokens: number;
  cachedTokens: number;
  /** Where each breakpoint was: `tools`, `system`, or `message:<index>` (the message's index). */
  breakpoints: string[];
  body: Record<string, unknown>;
}

/** What the server answers a request with: Anthropic content blocks (text, tool_use). */
export type CacheAnswer = (
  body: Record<string, unknown>,
  call: number,
) => { content: Block[]; stopReason: string } | { status: number; headers?: Record<string, string> };

export interface AnthropicCacheServer {
  server: Server;
  calls: CachedCall[];
  /** The base URL to give `createAnthropic`; the server listens once this resolves. */
  listen(): Promise<string>;
  close(): Promise<void>;
  /** The share of input tokens read from the cache over `calls` (all when omitted). */
  cachedShare(calls?: readonly CachedCall[]): number;
}

const tokens = (chars: number) => Math.ceil(chars / 4);

/** The request's blocks in Anthropic's cache order, each with where it sits. */
function blocksOf(body: Record<string, unknown>): { block: Block; at: string }[] {
  const out: { block: Block; at: string }[] = [];
  for (const tool of (body['tools'] as Block[] | undefined) ?? []) out.push({ block: tool, at: 'tools' });
  const system = body['system'];
  if (typeof system === 'string') out.push({ block: { type: 'text', text: system }, at: 'system' });
  else for (const block of (system as Block[] | undefined) ?? []) out.push({ block, at: 'system' });
  ((body['messages'] as { role: string; content: string | Block[] }[] | undefined) ?? []).forEach(
    (message, index) => {
      const content =
        typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
      for (const block of content)
        out.push({ block: { role: message.role, ...block }, at: `message:${index}` });
    },
  );
  return out;
}

export function anthropicCacheServer(answer: CacheAnswer): AnthropicCacheServer {
  const calls: CachedCall[] = [];
  const written = new Set<string>();
  const respond = (body: Record<string, unknown>, res: ServerResponse) => {
    const hash = createHash('sha256');
    let chars = 0;
    let cachedChars = 0;
    const marked: { key: string; chars: number }[] = [];
    const breakpoints: string[] = [];
    for (const { block, at } of blocksOf(body)) {
      const { cache_control: mark, ...plain } = block;
      const json = JSON.stringify(plain);
      hash.update(json);
      chars += json.length;
      if (mark === undefined) continue;
      breakpoints.push(at);
      const key = hash.copy().digest('hex');
      marked.push({ key, chars });
      if (written.has(key)) cachedChars = Math.max(cachedChars, chars);
    }
    if (breakpoints.length > 4)
      return sendError(
        res,
        400,
        `A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints.length}.`,
      );
    for (const { key } of marked) written.add(key);
    const call: CachedCall = {
      model: String(body['model']),
      inputTokens: tokens(chars),
      cachedTokens: tokens(cachedChars),
      breakpoints,
      body,
    };
    calls.push(call);
    const reply = answer(body, calls.length);
    if ('status' in reply)
      return sendError(res, reply.status, `provider error ${reply.status}`, reply.headers);
    sendReply(res, body, 200, {
      id: `msg_${calls.length}`,
      type: 'message',
      role: 'assistant',
      model: call.model,
      content: reply.content,
      stop_reason: reply.stopReason,
      usage: {
        input_tokens: call.inputTokens - call.cachedTokens,
        cache_read_input_tokens: call.cachedTokens,
        cache_creation_input_tokens: 0,
        output_tokens: 20,
      },
    });
  };
  const server = providerServer((body, res) => respond(body, res));
  return {
    server,
    calls,
    async listen() {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    cachedShare(some = calls) {
      const input = some.reduce((sum, call) => sum + call.inputTokens, 0);
      return input === 0 ? 0 : some.reduce((sum, call) => sum + call.cachedTokens, 0) / input;
    },
  };
}

/**
 * A tool loop's answers: a `tool_use` of `tool` until the request holds `loopCalls - 1` tool
 * results, then a text answer; so a turn makes `loopCalls` model calls.
 */
export function toolLoopAnswer(tool: string, loopCalls: number): CacheAnswer {
  return (body, call) => {
    const results = ((body['messages'] as { content: string | Block[] }[]) ?? [])
      .flatMap((message) => (typeof message.content === 'string' ? [] : message.content))
      .filter((block) => block.type === 'tool_result').length;
    return results < loopCalls - 1
      ? {
          content: [{ type: 'tool_use', id: `toolu_${call}`, name: tool, input: { page: results + 1 } }],
          stopReason: 'tool_use',
        }
      : { content: [{ type: 'text', text: `Read ${results} pages.` }], stopReason: 'end_turn' };
  };
}
