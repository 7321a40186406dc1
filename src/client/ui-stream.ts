/**
 * A run's live stream in the AI SDK's UI message stream format (what `useChat` reads), as a
 * `ReadableStream`, as a web `Response`, and as plain SSE for Node's `http`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { UIMessageChunk } from 'ai';
import { createUIMessageStreamResponse } from 'ai';
import { TurnKitError } from '../errors.js';
import type { RunStreamOptions, RunStreamPart } from './run-stream.js';

/** What the UI helpers need of a run (a `RunHandle`). */
export interface StreamableRun {
  readonly turnId: string;
  stream(options?: RunStreamOptions): AsyncIterable<RunStreamPart>;
}

/**
 * Maps the run's parts to UI message chunks: one assistant message for the run's own turn
 * (its steps, text, reasoning, tool calls and results; a restarted step is a `reset-step`).
 * Sub-agents' parts are not in the message: their work reaches it as the tool results of
 * the calls that started them. A cancelled run ends with `abort`, a failed one with `error`.
 */
export function toUIMessageChunks(
  run: StreamableRun,
  options: RunStreamOptions = {},
): ReadableStream<UIMessageChunk> {
  const parts = run.stream(options)[Symbol.asyncIterator]();
  let open: { kind: 'text' | 'reasoning'; id: string } | null = null;
  let blocks = 0;
  let inStep = false;
  const close = (out: UIMessageChunk[]) => {
    if (open) out.push({ type: open.kind === 'text' ? 'text-end' : 'reasoning-end', id: open.id });
    open = null;
  };
  return new ReadableStream<UIMessageChunk>(
    {
      start(controller) {
        controller.enqueue({ type: 'start', messageId: run.turnId });
      },
      // One store read per pull at most: a client that stops reading stops the reads.
      async pull(controller) {
        for (;;) {
          let next: IteratorResult<RunStreamPart>;
          try {
            next = await parts.next();
          } catch (error) {
            controller.enqueue({
              type: 'error',
              errorText: error instanceof Error ? error.message : String(error),
            });
            controller.close();
            return;
          }
          if (next.done) {
            controller.close();
            return;
          }
          const part = next.value;
          if (part.turnId !== run.turnId) continue;
          const out: UIMessageChunk[] = [];
          switch (part.type) {
            case 'step.started':
              close(out);
              out.push({ type: 'start-step' });
              inStep = true;
              break;
            case 'step.restarted':
              close(out);
              if (inStep) out.push({ type: 'reset-step' });
              break;
            case 'text.delta':
            case 'reasoning.delta': {
              const kind = part.type === 'text.delta' ? 'text' : 'reasoning';
              if (open?.kind !== kind) {
                close(out);
                open = { kind, id: `${kind}-${++blocks}` };
                out.push({ type: kind === 'text' ? 'text-start' : 'reasoning-start', id: open.id });
              }
              out.push({
                type: kind === 'text' ? 'text-delta' : 'reasoning-delta',
                id: open.id,
                delta: part.text,
              });
              break;
            }
            case 'tool.call':
              close(out);
              out.push({
                type: 'tool-input-available',
                toolCallId: part.toolCallId,
                toolName: part.toolName,
                input: part.arguments,
                dynamic: true,
              });
              break;
            case 'tool.result':
              out.push(
                part.status === 'completed'
                  ? {
                      type: 'tool-output-available',
                      toolCallId: part.toolCallId,
                      output: part.output,
                      dynamic: true,
                    }
                  : {
                      type: 'tool-output-error',
                      toolCallId: part.toolCallId,
                      errorText: part.error ?? part.status,
                      dynamic: true,
                    },
              );
              break;
            case 'step.finished':
              close(out);
              out.push({ type: 'finish-step' });
              inStep = false;
              break;
            case 'finish':
              close(out);
              if (part.status === 'cancelled') out.push({ type: 'abort', reason: 'cancelled' });
              else if (part.status === 'failed') out.push({ type: 'error', errorText: 'the run failed' });
              else out.push({ type: 'finish', finishReason: 'stop' });
              break;
            default:
              break;
          }
          if (out.length === 0) continue;
          for (const chunk of out) controller.enqueue(chunk);
          return;
        }
      },
      async cancel() {
        await parts.return?.(undefined);
      },
    },
    { highWaterMark: 0 },
  );
}

/** The run as a web `Response` in the UI message stream format (SSE), for `useChat`. */
export function toUIMessageStreamResponse(
  run: StreamableRun,
  init: RunStreamOptions & { status?: number; headers?: Record<string, string> } = {},
): Response {
  const { status, headers, ...options } = init;
  return createUIMessageStreamResponse({
    stream: toUIMessageChunks(run, options),
    ...(status !== undefined ? { status } : {}),
    ...(headers ? { headers } : {}),
  });
}

export interface RunSseOptions {
  /** A response the client has not drained for this long is ended (default 60 s). */
  stallMs?: number;
}

/**
 * A request handler for Node's `http` that streams a run's parts as Server-Sent Events: each
 * part is `id: <cursor>`, `event: <type>`, `data: <json>`. A reconnecting `EventSource` sends
 * `Last-Event-ID` and gets exactly the parts after it (or `?after=<cursor>`). A bad cursor is a
 * 400 with the error; a client that stops reading is waited for up to `stallMs`, then ended.
 */
export function runSseHandler(
  resolveRun: (request: IncomingMessage) => StreamableRun | Promise<StreamableRun>,
  options: RunSseOptions = {},
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const stallMs = options.stallMs ?? 60_000;
  return async (request, response) => {
    const abort = new AbortController();
    response.on('close', () => abort.abort());
    const url = new URL(request.url ?? '/', 'http://localhost');
    const lastEventId = request.headers['last-event-id'];
    const after =
      (typeof lastEventId === 'string' ? lastEventId : undefined) ??
      url.searchParams.get('after') ??
      undefined;
    const parts = (await resolveRun(request)).stream({ ...(after ? { after } : {}), signal: abort.signal });
    const iterator = parts[Symbol.asyncIterator]();
    let first: IteratorResult<RunStreamPart>;
    try {
      first = await iterator.next();
    } catch (error) {
      response.writeHead(error instanceof TurnKitError ? 400 : 500, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({ error: { class: (error as Error).name, message: (error as Error).message } }),
      );
      return;
    }
    response.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    for (let next = first; !next.done; next = await iterator.next()) {
      const { cursor, type, ...rest } = next.value;
      const written = response.write(
        `id: ${cursor}\nevent: ${type}\ndata: ${JSON.stringify({ type, ...rest })}\n\n`,
      );
      if (!written && !(await drained(response, stallMs))) {
        await iterator.return?.(undefined);
        break;
      }
    }
    response.end();
  };
}

/** Resolves true once the response drained, false when it did not within `ms` or closed. */
function drained(response: ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      response.off('drain', onDrain);
      response.off('close', onClose);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), ms);
    response.on('drain', onDrain);
    response.on('close', onClose);
  });
}
