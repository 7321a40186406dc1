/**
 * The OpenAI chat-completions wire format for local test servers: a completion as JSON, or,
 * when the request asked for `stream: true`, as the SSE chunks the provider streams.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';

export interface Completion {
  text?: string;
  reasoning?: string;
  toolCalls?: { id: string; name: string; arguments: object }[];
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** The model the provider says answered (default `test-model`). */
  model?: string;
}

export const chunk = (delta: object, finish: string | null = null, usage?: object): string =>
  modelChunk(delta, finish, usage);

const modelChunk = (
  delta: object,
  finish: string | null = null,
  usage?: object,
  model = 'test-model',
): string =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-test',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...(usage ? { usage } : {}),
  })}\n\n`;

/** The completion as SSE events: text in `pieces` deltas, tool calls, the finish, `[DONE]`. */
export function completionEvents(completion: Completion, pieces = 4): string[] {
  const chunk = (delta: object, finish: string | null = null, usage?: object) =>
    modelChunk(delta, finish, usage, completion.model);
  const events: string[] = [chunk({ role: 'assistant', content: '' })];
  const split = (text: string) => {
    const size = Math.max(1, Math.ceil(text.length / pieces));
    const out: string[] = [];
    for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
    return out;
  };
  for (const piece of split(completion.reasoning ?? '')) events.push(chunk({ reasoning_content: piece }));
  for (const piece of split(completion.text ?? '')) events.push(chunk({ content: piece }));
  (completion.toolCalls ?? []).forEach((call, index) =>
    events.push(
      chunk({
        tool_calls: [
          {
            index,
            id: call.id,
            type: 'function',
            function: { name: call.name, arguments: JSON.stringify(call.arguments) },
          },
        ],
      }),
    ),
  );
  events.push(
    chunk(
      {},
      completion.toolCalls?.length ? 'tool_calls' : 'stop',
      completion.usage ?? { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    ),
  );
  events.push('data: [DONE]\n\n');
  return events;
}

/** The completion as one JSON body (a request without `stream`). */
export function completionJson(completion: Completion): object {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'test-model',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: completion.text ?? null,
          ...(completion.toolCalls?.length
            ? {
                tool_calls: completion.toolCalls.map((call) => ({
                  id: call.id,
                  type: 'function',
                  function: { name: call.name, arguments: JSON.stringify(call.arguments) },
                })),
              }
            : {}),
        },
        finish_reason: completion.toolCalls?.length ? 'tool_calls' : 'stop',
      },
    ],
    usage: completion.usage ?? { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

/**
 * Answers a chat-completions request: SSE when it asked to stream (one event every
 * `eventDelayMs`), else JSON. Resolves when the answer was written or the client went away.
 */
export async function answerCompletion(
  res: ServerResponse,
  body: { stream?: unknown },
  completion: Completion,
  options: { eventDelayMs?: number } = {},
): Promise<void> {
  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(completionJson(completion)));
    return;
  }
  await writeEvents(res, completionEvents(completion), options.eventDelayMs ?? 0);
}

/** Writes SSE events with a pause between them; stops when the client went away. */
export async function writeEvents(
  res: ServerResponse,
  events: readonly string[],
  delayMs: number,
): Promise<void> {
  if (!res.headersSent)
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const event of events) {
    if (res.destroyed) return;
    res.write(event);
    if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
  res.end();
}

type ChatCompletionJson = {
  id?: string;
  model?: string;
  choices: {
    message: {
      content?: string | null;
      tool_calls?: { id: string; function: { name: string; arguments: string } }[];
    };
    finish_reason: string;
  }[];
  usage?: object;
};
type AnthropicMessageJson = {
  type: 'message';
  content: (
    { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown }
  )[];
  stop_reason: string;
  usage: { input_tokens: number; output_tokens: number };
};

const sse = (event: string, data: object) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** A chat completion or an Anthropic message (JSON bodies) as the SSE events its provider streams. */
export function streamedEvents(json: unknown): string[] {
  if ((json as { object?: unknown }).object === 'response') return responseEvents(json as ResponseJson);
  if ((json as AnthropicMessageJson).type === 'message') {
    const message = json as AnthropicMessageJson & Record<string, unknown>;
    const events = [
      sse('message_start', {
        type: 'message_start',
        message: {
          ...message,
          content: [],
          stop_reason: null,
          usage: { ...message.usage, output_tokens: 0 },
        },
      }),
    ];
    message.content.forEach((block, index) => {
      if (block.type === 'text') {
        events.push(
          sse('content_block_start', {
            type: 'content_block_start',
            index,
            content_block: { type: 'text', text: '' },
          }),
        );
        events.push(
          sse('content_block_delta', {
            type: 'content_block_delta',
            index,
            delta: { type: 'text_delta', text: block.text },
          }),
        );
      } else {
        events.push(
          sse('content_block_start', {
            type: 'content_block_start',
            index,
            content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
          }),
        );
        events.push(
          sse('content_block_delta', {
            type: 'content_block_delta',
            index,
            delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) },
          }),
        );
      }
      events.push(sse('content_block_stop', { type: 'content_block_stop', index }));
    });
    events.push(
      sse('message_delta', {
        type: 'message_delta',
        delta: { stop_reason: message.stop_reason, stop_sequence: null },
        usage: { output_tokens: message.usage.output_tokens },
      }),
    );
    events.push(sse('message_stop', { type: 'message_stop' }));
    return events;
  }
  const completion = json as ChatCompletionJson;
  const choice = completion.choices[0]!;
  return completionEvents({
    text: choice.message.content ?? '',
    toolCalls: (choice.message.tool_calls ?? []).map((call) => ({
      id: call.id,
      name: call.function.name,
      arguments: JSON.parse(call.function.arguments) as object,
    })),
    usage: completion.usage as Completion['usage'],
    ...(completion.model ? { model: completion.model } : {}),
  });
}

type ResponseJson = Record<string, unknown> & {
  output: (
    | { type: 'message'; id: string; content: { type: string; text: string }[] }
    | { type: 'function_call'; id: string; call_id: string; name: string; arguments: string }
  )[];
  usage: { input_tokens: number; output_tokens: number };
};

/** An OpenAI Responses API answer (text messages and function calls) as its stream events. */
function responseEvents(response: ResponseJson): string[] {
  const usage = {
    ...response.usage,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens_details: { reasoning_tokens: 0 },
  };
  const events = [
    sse('response.created', {
      type: 'response.created',
      response: { ...response, status: 'in_progress', output: [] },
    }),
  ];
  response.output.forEach((item, output_index) => {
    if (item.type === 'function_call') {
      events.push(
        sse('response.output_item.added', {
          type: 'response.output_item.added',
          output_index,
          item: { ...item, arguments: '' },
        }),
        sse('response.function_call_arguments.delta', {
          type: 'response.function_call_arguments.delta',
          item_id: item.id,
          output_index,
          delta: item.arguments,
        }),
        sse('response.output_item.done', {
          type: 'response.output_item.done',
          output_index,
          item: { ...item, status: 'completed' },
        }),
      );
      return;
    }
    events.push(
      sse('response.output_item.added', {
        type: 'response.output_item.added',
        output_index,
        item: { ...item, status: 'in_progress', content: [] },
      }),
    );
    item.content.forEach((part, content_index) =>
      events.push(
        sse('response.output_text.delta', {
          type: 'response.output_text.delta',
          item_id: item.id,
          output_index,
          content_index,
          delta: part.text,
          logprobs: [],
        }),
      ),
    );
    events.push(sse('response.output_item.done', { type: 'response.output_item.done', output_index, item }));
  });
  events.push(sse('response.completed', { type: 'response.completed', response: { ...response, usage } }));
  return events;
}

/**
 * Sends a scripted provider reply: as it is, or, when the request asked to stream and the
 * reply is a success, as the provider's SSE events.
 */
export function sendReply(
  res: ServerResponse,
  request: { stream?: unknown },
  status: number,
  json: unknown,
): void {
  if (request.stream && status === 200) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const event of streamedEvents(json)) res.write(event);
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(json));
}

/** A local provider: each request's JSON body (with the request and response) goes to `answer`. */
export function providerServer(
  answer: (body: Record<string, unknown>, res: ServerResponse, req: IncomingMessage) => void,
): Server {
  return createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on('end', () => answer(JSON.parse(raw || '{}') as Record<string, unknown>, res, req));
  });
}

/** Answers with a 4xx/5xx error in OpenAI's shape, with the headers given (`retry-after`, …). */
export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ error: { message, type: 'test_error' } }));
}
