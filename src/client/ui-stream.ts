/**
 * A run's live stream in the AI SDK's UI message stream format (what `useChat` reads), as a
 * `ReadableStream`, as a web `Response`, and as plain SSE for Node's `http`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ReasoningUIPart, TextUIPart } from 'ai';
import { createUIMessageStreamResponse } from 'ai';
import { randomBytes } from 'node:crypto';
import { ArgumentError, AuthorizationError, InputError, RecordNotFound, StoreError } from '../errors.js';
import type { TurnError, TurnRecord, Usage } from '../store/types.js';
import type { SubAgentUIData, TurnKitMessageMetadata, TurnKitUIMessageChunk } from '../ui/types.js';
import type { RunStreamOptions, RunStreamPart } from './run-stream.js';

/**
 * What the UI helpers need of a run (a `RunHandle`). With `turn`, `usage` and `cost` (a
 * `RunHandle` has them), the end's message metadata carries the turn's ids, model, usage and cost.
 */
export interface StreamableRun {
  readonly turnId: string;
  stream(options?: RunStreamOptions): AsyncIterable<RunStreamPart>;
  turn?(): Promise<TurnRecord>;
  usage?(): Promise<Usage>;
  cost?(): Promise<number>;
}

/**
 * One turn's step, text, reasoning and tool parts as UI message chunks (text and reasoning
 * blocks get ids of their own; a restarted step is a `reset-step`).
 */
class TurnChunks {
  #open: { kind: 'text' | 'reasoning'; id: string } | null = null;
  #blocks = 0;
  #inStep = false;
  /** A `reset-step` went out: the step's `step-start` stays, so its next start sends none. */
  #reset = false;

  close(out: TurnKitUIMessageChunk[]): void {
    if (this.#open)
      out.push({ type: this.#open.kind === 'text' ? 'text-end' : 'reasoning-end', id: this.#open.id });
    this.#open = null;
  }

  map(part: RunStreamPart): TurnKitUIMessageChunk[] {
    const out: TurnKitUIMessageChunk[] = [];
    switch (part.type) {
      case 'step.started':
        this.close(out);
        if (!this.#reset) out.push({ type: 'start-step' });
        this.#reset = false;
        this.#inStep = true;
        break;
      case 'step.restarted':
        this.close(out);
        if (this.#inStep) {
          // The AI SDK empties the step and keeps its `step-start`: the retry goes into it.
          out.push({ type: 'reset-step' });
          this.#reset = true;
        }
        break;
      case 'text.delta':
      case 'reasoning.delta': {
        const kind = part.type === 'text.delta' ? 'text' : 'reasoning';
        if (this.#open?.kind !== kind) {
          this.close(out);
          this.#open = { kind, id: `${kind}-${++this.#blocks}` };
          out.push({ type: kind === 'text' ? 'text-start' : 'reasoning-start', id: this.#open.id });
        }
        out.push({
          type: kind === 'text' ? 'text-delta' : 'reasoning-delta',
          id: this.#open.id,
          delta: part.text,
        });
        break;
      }
      case 'tool.call':
        this.close(out);
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
        this.close(out);
        out.push({ type: 'finish-step' });
        this.#inStep = false;
        this.#reset = false;
        break;
      default:
        break;
    }
    return out;
  }
}

const RESEND_MIN_CHARS = 256;

/** A sub-agent's message, built from its chunks the way the AI SDK builds the run's. */
class SubAgentMessage {
  readonly chunks = new TurnChunks();
  readonly data: SubAgentUIData;
  readonly #blocks = new Map<string, TextUIPart | ReasoningUIPart>();
  /** Characters of text and reasoning applied, and how many of them the last send carried. */
  #chars = 0;
  #sentChars = 0;

  constructor(turnId: string) {
    this.data = {
      turnId,
      agentName: null,
      parentTurnId: null,
      toolCallId: null,
      status: 'running',
      parts: [],
    };
  }

  /**
   * Applies the part; whether the data is to be sent again. Any change of status, step, block or
   * tool is; more text only once it grew by a quarter of what was last sent (at least 256
   * characters): each send repeats the whole message, so sending every delta would cost O(n²)
   * bytes for an n-character answer; this costs about 5n, plus one whole part per status or
   * step change.
   */
  apply(part: RunStreamPart): boolean {
    if (part.type === 'status') {
      if (part.subAgent) Object.assign(this.data, part.subAgent);
      this.data.status = part.status;
      return this.#sent();
    }
    const chunks = this.chunks.map(part);
    for (const chunk of chunks) this.#applyChunk(chunk);
    if (chunks.length === 0) return false;
    if (chunks.every((chunk) => chunk.type === 'text-delta' || chunk.type === 'reasoning-delta')) {
      this.#chars += chunks.reduce((sum, chunk) => sum + ('delta' in chunk ? chunk.delta.length : 0), 0);
      if (this.#chars - this.#sentChars < Math.max(RESEND_MIN_CHARS, this.#sentChars / 4)) return false;
    }
    return this.#sent();
  }

  #sent(): true {
    this.#sentChars = this.#chars;
    return true;
  }

  #applyChunk(chunk: TurnKitUIMessageChunk): void {
    const parts = this.data.parts;
    const tool = (id: string) =>
      parts.findIndex((part) => part.type === 'dynamic-tool' && part.toolCallId === id);
    switch (chunk.type) {
      case 'start-step':
        parts.push({ type: 'step-start' });
        break;
      case 'reset-step': {
        // As the AI SDK does: the parts since the step's start go.
        const start = parts.map((part) => part.type).lastIndexOf('step-start');
        parts.splice(start + 1);
        this.#blocks.clear();
        break;
      }
      case 'text-start':
      case 'reasoning-start': {
        const block = {
          type: chunk.type === 'text-start' ? 'text' : 'reasoning',
          text: '',
          state: 'streaming',
        } as TextUIPart | ReasoningUIPart;
        this.#blocks.set(chunk.id, block);
        parts.push(block);
        break;
      }
      case 'text-delta':
      case 'reasoning-delta': {
        const block = this.#blocks.get(chunk.id);
        if (block) block.text += chunk.delta;
        break;
      }
      case 'text-end':
      case 'reasoning-end': {
        const block = this.#blocks.get(chunk.id);
        if (block) block.state = 'done';
        this.#blocks.delete(chunk.id);
        break;
      }
      case 'tool-input-available':
        parts.push({
          type: 'dynamic-tool',
          toolName: chunk.toolName,
          toolCallId: chunk.toolCallId,
          state: 'input-available',
          input: chunk.input,
        });
        break;
      case 'tool-output-available':
      case 'tool-output-error': {
        const at = tool(chunk.toolCallId);
        const call = parts[at];
        if (call?.type !== 'dynamic-tool') break;
        const { toolName, toolCallId, input } = call;
        parts[at] =
          chunk.type === 'tool-output-available'
            ? {
                type: 'dynamic-tool',
                toolName,
                toolCallId,
                state: 'output-available',
                input,
                output: chunk.output,
              }
            : {
                type: 'dynamic-tool',
                toolName,
                toolCallId,
                state: 'output-error',
                input,
                errorText: chunk.errorText,
              };
        break;
      }
      default:
        break;
    }
  }
}

/**
 * Maps the run's parts to UI message chunks: one assistant message for the run's own turn
 * (its steps, text, reasoning, tool calls and results; a restarted step is a `reset-step`).
 * Each sub-agent's work is a `data-subagent` part of that message (id: its turn id), sent
 * again whole whenever it changes: its status, and its own steps, text, reasoning and tool
 * calls as message parts (`SubAgentUIData`). The message metadata (`TurnKitMessageMetadata`)
 * says `running` from the start; the end carries the final status, ids, model, usage and cost.
 * A cancelled run ends with `abort`, a failed one with `error` (its text safe to show, see
 * `errorText`). Cancelling the stream (a client gone) stops the reads at once.
 */
export function toUIMessageChunks(
  run: StreamableRun,
  streamOptions: UIStreamOptions = {},
): ReadableStream<TurnKitUIMessageChunk> {
  const { logger, errorText, ...options } = streamOptions;
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  const parts = run.stream({ ...options, signal })[Symbol.asyncIterator]();
  const own = new TurnChunks();
  const subAgents = new Map<string, SubAgentMessage>();
  return new ReadableStream<TurnKitUIMessageChunk>(
    {
      start(controller) {
        controller.enqueue({
          type: 'start',
          messageId: run.turnId,
          messageMetadata: { turnId: run.turnId, status: 'running' },
        });
      },
      // One store read per pull at most: a client that stops reading stops the reads.
      async pull(controller) {
        for (;;) {
          let next: IteratorResult<RunStreamPart>;
          try {
            next = await parts.next();
          } catch (error) {
            controller.enqueue({ type: 'error', errorText: clientError(error, logger).message });
            controller.close();
            return;
          }
          if (stop.signal.aborted) return;
          if (next.done) {
            controller.close();
            return;
          }
          const part = next.value;
          let out: TurnKitUIMessageChunk[];
          if (part.turnId !== run.turnId) {
            let message = subAgents.get(part.turnId);
            if (!message) subAgents.set(part.turnId, (message = new SubAgentMessage(part.turnId)));
            // A copy: the chunk must not change after it was sent.
            out = message.apply(part)
              ? [{ type: 'data-subagent', id: part.turnId, data: structuredClone(message.data) }]
              : [];
          } else if (part.type === 'finish') {
            out = [];
            own.close(out);
            out.push(...endChunks(part.status, await endMetadata(run, part.status, { logger, errorText })));
          } else {
            out = own.map(part);
          }
          if (out.length === 0) continue;
          for (const chunk of out) controller.enqueue(chunk);
          return;
        }
      },
      async cancel() {
        // Wakes a reader waiting for parts (an idle run): it ends now, not at the next part.
        stop.abort();
        await parts.return?.(undefined);
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * The chunks that end the run's message, each with the end's metadata: `finish` for a run
 * that completed; for a cancelled one `message-metadata` and `abort` (which `useChat` does not
 * report: `metadata.status` tells it); for a failed one `message-metadata` and `error`.
 */
function endChunks(status: string, messageMetadata: TurnKitMessageMetadata): TurnKitUIMessageChunk[] {
  if (status === 'cancelled')
    return [
      { type: 'message-metadata', messageMetadata },
      { type: 'abort', reason: 'cancelled' },
    ];
  if (status === 'failed')
    return [
      { type: 'message-metadata', messageMetadata },
      { type: 'error', errorText: messageMetadata.error?.text ?? 'the run failed' },
    ];
  return [{ type: 'finish', finishReason: 'stop', messageMetadata }];
}

/** A failed run's text for the page: its error class and turn, never the message (default). */
const safeErrorText = (error: TurnError | null, turn: TurnRecord) =>
  `the run failed${error ? ` (${error.class})` : ''}; turn ${turn.id}`;

/**
 * The end's metadata: the status, and with a run handle its ids, model, usage and cost; a store
 * that fails here costs the extras only (the detail goes to the log).
 */
async function endMetadata(
  run: StreamableRun,
  status: TurnKitMessageMetadata['status'],
  options: Pick<UIStreamOptions, 'logger' | 'errorText'>,
): Promise<TurnKitMessageMetadata> {
  const metadata: TurnKitMessageMetadata = { turnId: run.turnId, status };
  if (!run.turn) return metadata;
  try {
    const turn = await run.turn();
    Object.assign(metadata, {
      rootTurnId: turn.rootTurnId,
      conversationId: turn.conversationId,
      agentName: turn.agentName,
      model: turn.model,
    });
    if (run.usage) metadata.usage = await run.usage();
    if (run.cost) metadata.cost = await run.cost();
    if (status === 'failed') {
      const text = (options.errorText ?? safeErrorText)(turn.error, turn);
      metadata.error = { class: turn.error?.class ?? 'Error', text };
    }
  } catch (error) {
    (options.logger ?? console).error(
      `turnkit: the end of run ${run.turnId}'s UI stream has no details:`,
      error,
    );
  }
  return metadata;
}

/** The run as a web `Response` in the UI message stream format (SSE), for `useChat`. */
export function toUIMessageStreamResponse(
  run: StreamableRun,
  init: UIStreamOptions & { status?: number; headers?: Record<string, string> } = {},
): Response {
  const { status, headers, ...options } = init;
  return createUIMessageStreamResponse({
    stream: toUIMessageChunks(run, options),
    ...(status !== undefined ? { status } : {}),
    ...(headers ? { headers } : {}),
  });
}

/** Where the stream handlers log the errors they do not show their HTTP clients (default `console`). */
export type StreamErrorLogger = Pick<Console, 'error'>;

export type UIStreamOptions = RunStreamOptions & {
  logger?: StreamErrorLogger;
  /**
   * A failed run's text for the page (`metadata.error.text` and the `error` chunk). The default
   * names the error's class and the turn only: a model's or tool's message can carry hosts,
   * keys or internals. Return `error.message` where your users may see it.
   */
  errorText?: (error: TurnError | null, turn: TurnRecord) => string;
};

export interface RunSseOptions {
  /** A response the client has not drained for this long is cut off (default 60 s). */
  stallMs?: number;
  /**
   * `false`: every part is an unnamed event (`message`, its `type` in the data), so that
   * `EventSource.onmessage` gets them all. Default `true`: `event: <type>`, for `addEventListener`.
   */
  namedEvents?: boolean;
  logger?: StreamErrorLogger;
}

/**
 * A run that does not exist and one the caller may not stream are the same answer (like
 * `parentRun` and `send_message`): telling them apart would let a client probe for run ids.
 */
const unknownRun = (error: unknown) => error instanceof RecordNotFound || error instanceof AuthorizationError;
const UNKNOWN_RUN = { class: 'RecordNotFound', message: 'no such run' } as const;

/** The HTTP status of a run that cannot be streamed. */
function statusOf(error: unknown): number {
  if (unknownRun(error)) return 404;
  if (error instanceof StoreError) return 503;
  if (error instanceof ArgumentError || error instanceof InputError) return 400;
  return 500;
}

/**
 * What an HTTP client reads of an error. An unknown run and a refused one are one fixed answer;
 * its other mistakes (a bad cursor, bad input) are told as they are; anything else (a store
 * that is down names its host, a bug names internals) is a generic text with an id, and the
 * detail goes to the log under that id.
 */
function clientError(
  error: unknown,
  logger: StreamErrorLogger = console,
): { class: string; message: string; id?: string } {
  if (unknownRun(error)) return { ...UNKNOWN_RUN };
  if (error instanceof ArgumentError || error instanceof InputError)
    return { class: error.name, message: error.message };
  const id = `err_${randomBytes(6).toString('hex')}`;
  logger.error(`turnkit: stream error ${id}:`, error);
  const retry = error instanceof StoreError;
  return {
    class: retry ? 'StoreError' : 'Error',
    message: `the stream failed (error ${id})${retry ? ': the store is unavailable, reconnect to resume' : ''}`,
    id,
  };
}

/**
 * A request handler for Node's `http` that streams a run's parts as Server-Sent Events: each
 * part is `id: <cursor>`, `event: <type>` (none with `namedEvents: false`), `data: <json>`. A
 * reconnecting `EventSource` sends `Last-Event-ID` and gets exactly the parts after it (or
 * `?after=<cursor>`); one past `finish` gets 204 No Content, which ends its reconnects. A run
 * that cannot be streamed (`resolveRun` threw, a bad cursor) is a JSON error with a 4xx/5xx
 * status; a store that fails mid-stream ends the response with a `stream-error` event
 * (reconnect to resume).
 *
 * Backpressure: a part is read from the store only once the socket took the one before, so a
 * client that stops reading holds one part and the socket's buffer, never more; one stalled
 * for `stallMs` is cut off. A client gone (closed, or cut off) releases the run's reader and
 * its store subscription at once.
 */
export function runSseHandler(
  resolveRun: (request: IncomingMessage) => StreamableRun | Promise<StreamableRun>,
  options: RunSseOptions = {},
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const stallMs = options.stallMs ?? 60_000;
  const logger = options.logger ?? console;
  const named = options.namedEvents ?? true;
  return async (request, response) => {
    const gone = new AbortController();
    response.on('close', () => gone.abort());
    let iterator: AsyncIterator<RunStreamPart> | undefined;
    let next: IteratorResult<RunStreamPart>;
    try {
      const url = new URL(request.url ?? '/', 'http://localhost');
      const lastEventId = request.headers['last-event-id'];
      const after =
        (typeof lastEventId === 'string' ? lastEventId : undefined) ??
        url.searchParams.get('after') ??
        undefined;
      const run = await resolveRun(request);
      iterator = run.stream({ ...(after ? { after } : {}), signal: gone.signal })[Symbol.asyncIterator]();
      next = await iterator.next();
    } catch (error) {
      await iterator?.return?.(undefined);
      if (!response.headersSent && !response.destroyed) {
        response.writeHead(statusOf(error), { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: clientError(error, logger) }));
      }
      return;
    }
    if (next.done) {
      // Nothing after the cursor: the client reconnected past `finish`. 204 stops an EventSource.
      response.writeHead(204).end();
      return;
    }
    response.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    let stalled = false;
    try {
      for (; !next.done && !gone.signal.aborted; next = await iterator.next()) {
        const { cursor, type, ...rest } = next.value;
        const written = response.write(sseEvent(cursor, type, { type, ...rest }, named));
        if (!written && !(await drained(response, stallMs))) {
          stalled = !gone.signal.aborted;
          break;
        }
      }
    } catch (error) {
      // The store failed mid-stream: the client hears of it; Last-Event-ID resumes it later.
      if (!gone.signal.aborted)
        response.write(
          sseEvent(null, STREAM_ERROR, { type: STREAM_ERROR, error: clientError(error, logger) }, named),
        );
    } finally {
      await iterator.return?.(undefined);
    }
    // A stalled client would keep the socket and its unsent buffer for as long as it stalls.
    if (stalled) response.destroy();
    else response.end();
  };
}

/**
 * A store failure mid-stream: not `error`, the name `EventSource` gives its own connection
 * errors, so a listener for one never mistakes it for the other.
 */
const STREAM_ERROR = 'stream-error';

/** One SSE event: `id` (none for an error), `event` unless unnamed, and the JSON data. */
function sseEvent(id: string | null, name: string, data: unknown, named: boolean): string {
  return `${id === null ? '' : `id: ${id}\n`}${named ? `event: ${name}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
}

/** Resolves true once the response drained; false when it did not within `ms`, or the client is gone. */
function drained(response: ServerResponse, ms: number): Promise<boolean> {
  // A write after the client left returns false and no `drain` or `close` comes again.
  if (response.destroyed) return Promise.resolve(false);
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
