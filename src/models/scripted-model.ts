/**
 * A deterministic, offline model for tests and demos (yours too): scripted per agent as a
 * list of steps consumed in call order, or as a function of the request.
 */
import { ModelError } from '../errors.js';
import type { ContentPart, Json, JsonObject } from '../store/types.js';
import type {
  ModelCallOptions,
  ModelClient,
  ModelMessage,
  ModelRequest,
  ModelResult,
  ModelUsage,
} from './types.js';

export interface ScriptedToolCall {
  id?: string;
  name: string;
  /** An object, or a JSON string (invalid JSON becomes an `arguments_error`). */
  arguments: object | string;
}

export interface ScriptedStepObject {
  text?: string;
  thinking?: string;
  toolCalls?: ScriptedToolCall[];
  outputData?: Json;
  usage?: Partial<ModelUsage>;
  /** Waits this long (honouring the abort signal) before answering. */
  delayMs?: number;
  /** When the caller streams: the pause between two deltas (default 0). */
  chunkDelayMs?: number;
  /**
   * Fails the call: an Error, or a provider-like status (4xx non-retryable, 429/5xx retryable).
   * With `text` too, a streaming caller gets the text's deltas first (a stream that breaks off).
   */
  error?: Error | { status: number; message?: string };
}

export type ScriptedStep = string | ScriptedStepObject;
export type ScriptFunction = (
  request: ModelRequest,
  context: { call: number },
) => ScriptedStep | Promise<ScriptedStep>;
export type Script = readonly ScriptedStep[] | ScriptFunction;

export function reply(text: string): ScriptedStepObject {
  return { text };
}

export function toolCall(name: string, args: object | string = {}): ScriptedStepObject {
  return { toolCalls: [{ name, arguments: args }] };
}

function parseArguments(raw: object | string): { arguments: JsonObject; error?: string } {
  if (typeof raw !== 'string') return { arguments: JSON.parse(JSON.stringify(raw)) as JsonObject };
  try {
    const parsed: unknown = JSON.parse(raw);
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed)
      ? { arguments: parsed as JsonObject }
      : { arguments: {} };
  } catch {
    return { arguments: {}, error: 'invalid JSON arguments' };
  }
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('the model call was aborted');
}

async function delay(ms: number, options: ModelCallOptions): Promise<void> {
  if (options.signal.aborted) throw abortError(options.signal);
  await new Promise<void>((resolve, reject) => {
    const progress = setInterval(() => options.onProgress?.(), 250);
    const done = (error?: Error) => {
      clearTimeout(timer);
      clearInterval(progress);
      options.signal.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve();
    };
    const onAbort = () => done(abortError(options.signal));
    const timer = setTimeout(() => done(), ms);
    options.signal.addEventListener('abort', onAbort);
  });
}

/** A text as a few deltas (up to four pieces, split at spaces where it can). */
function deltaPieces(text: string): string[] {
  const size = Math.max(1, Math.ceil(text.length / 4));
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > 0) {
    const space = rest.indexOf(' ', size);
    const cut = rest.length <= size ? rest.length : space > 0 && space < size * 2 ? space + 1 : size;
    pieces.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  return pieces;
}

/** Streams the step's thinking, then its text, as a provider would. */
async function streamDeltas(object: ScriptedStepObject, options: ModelCallOptions): Promise<void> {
  const sources = [
    ['reasoning', object.thinking ?? ''],
    ['text', object.text ?? ''],
  ] as const;
  for (const [type, text] of sources) {
    for (const piece of deltaPieces(text)) {
      if (object.chunkDelayMs) await delay(object.chunkDelayMs, options);
      else if (options.signal.aborted) throw abortError(options.signal);
      options.onDelta!({ type, text: piece });
    }
  }
}

export interface ScriptedModelOptions {
  /**
   * Refuse what providers refuse (default true): a request holding a tool call whose results do
   * not all follow it before the next other message, or a result with no open call before it,
   * fails with a non-retryable `ModelError` naming the call ids, as the AI SDK's
   * `AI_MissingToolResultsError` and a provider's 400 do. `false` only for a test that feeds the
   * model a malformed history on purpose.
   */
  strictToolPairing?: boolean;
}

/**
 * The provider's pairing rule: every tool call of an assistant message is answered by a tool
 * message before any other message (and before the request ends); a tool message answers a call
 * still open. Returns the refusal, or null.
 */
export function toolPairingError(messages: readonly ModelMessage[]): ModelError | null {
  const open = new Set<string>();
  const refuse = (kind: 'missing_tool_results' | 'unexpected_tool_result', ids: string[]) => {
    const many = ids.length > 1;
    const message =
      kind === 'missing_tool_results'
        ? `Tool result${many ? 's are' : ' is'} missing for tool call${many ? 's' : ''} ${ids.join(', ')}.`
        : `Tool result for tool call ${ids.join(', ')} has no open tool call before it.`;
    return new ModelError(`scripted model: ${message}`, {
      status: 400,
      retryable: false,
      details: { code: kind, toolCallIds: ids },
    });
  };
  for (const message of messages) {
    if (message.role === 'tool') {
      if (!open.delete(message.toolCallId)) return refuse('unexpected_tool_result', [message.toolCallId]);
      continue;
    }
    if (open.size > 0) return refuse('missing_tool_results', [...open]);
    if (message.role === 'assistant') for (const call of message.toolCalls ?? []) open.add(call.id);
  }
  return open.size > 0 ? refuse('missing_tool_results', [...open]) : null;
}

export class ScriptedModel implements ModelClient {
  /** What turns it serves are named when the application names no model: never a real model's id. */
  readonly defaultModel = 'scripted';
  readonly calls: { agentName: string; request: ModelRequest }[] = [];
  readonly #scripts: Map<string, Script>;
  readonly #positions = new Map<string, number>();
  readonly #strict: boolean;

  /** Scripts by agent name; `'*'` answers for agents without a script of their own. */
  constructor(scripts: Record<string, Script>, options: ScriptedModelOptions = {}) {
    this.#scripts = new Map(Object.entries(scripts));
    this.#strict = options.strictToolPairing ?? true;
  }

  callsFor(agentName: string): { agentName: string; request: ModelRequest }[] {
    return this.calls.filter((call) => call.agentName === agentName);
  }

  async chat(request: ModelRequest, options: ModelCallOptions): Promise<ModelResult> {
    const agentName = request.metadata.agentName;
    const script = this.#scripts.get(agentName) ?? this.#scripts.get('*');
    if (!script) throw new ModelError(`scripted model: no script for agent ${agentName}`);
    // Refused before the script is asked, as a provider (or the AI SDK) refuses before answering.
    const refusal = this.#strict ? toolPairingError(request.messages) : null;
    if (refusal) {
      this.calls.push({ agentName, request: JSON.parse(JSON.stringify(request)) as ModelRequest });
      throw refusal;
    }
    const call = this.#positions.get(agentName) ?? 0;
    this.#positions.set(agentName, call + 1);
    this.calls.push({ agentName, request: JSON.parse(JSON.stringify(request)) as ModelRequest });
    let step: ScriptedStep | undefined;
    if (typeof script === 'function') step = await script(request, { call });
    else {
      step = script[call];
      if (step === undefined) {
        throw new ModelError(`scripted model: no step left for agent ${agentName} (${call} calls made)`);
      }
    }
    const object: ScriptedStepObject = typeof step === 'string' ? { text: step } : step;
    if (object.delayMs) await delay(object.delayMs, options);
    if (options.onDelta) await streamDeltas(object, options);
    if (object.error) {
      if (object.error instanceof Error) throw object.error;
      const { status, message } = object.error;
      throw new ModelError(`provider error ${status}: ${message ?? 'scripted failure'}`, {
        status,
        retryable: status === 429 || status >= 500,
      });
    }
    const parts: ContentPart[] = [];
    if (object.thinking) parts.push({ type: 'thinking', text: object.thinking });
    if (object.text !== undefined && object.text !== '') parts.push({ type: 'text', text: object.text });
    (object.toolCalls ?? []).forEach((tool, index) => {
      const parsed = parseArguments(tool.arguments);
      parts.push({
        type: 'tool_call',
        id: tool.id ?? `call_${agentName}_${call}_${index}`,
        name: tool.name,
        arguments: parsed.arguments,
        ...(parsed.error ? { arguments_error: parsed.error } : {}),
      });
    });
    return {
      parts,
      usage: { inputTokens: 0, outputTokens: 0, ...object.usage },
      model: request.model,
      finishReason: object.toolCalls?.length ? 'tool-calls' : 'stop',
      ...(object.outputData !== undefined ? { outputData: object.outputData } : {}),
    };
  }
}
