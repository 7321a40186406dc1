/**
 * A model that answers with a recorded run's stored responses, so an application can test its
 * tool code against a real recorded run without a provider (`turnkit/testing`). The store
 * keeps a turn's answers in order but does not key them to model steps, so the model step
 * that reserved the asking turn's k-th iteration gets the recorded turn's k-th answer
 * (decisions 48, 49). The iteration is read from the store: a step re-run after its answer
 * failed to persist, or run on another worker, asks with the same one and gets the same answer.
 */
import { ArgumentError, ModelError } from '../errors.js';
import type { ContentPart, JsonObject, MessageRecord, Store } from '../store/types.js';
import { iterationsOf } from '../engine/step/turn-state.js';
import type { ModelCallOptions, ModelClient, ModelRequest, ModelResult } from './types.js';

export interface ReplayModelOptions {
  /** The store holding the recorded run. */
  store: Store;
  /**
   * The recorded turn whose answers every turn asking this model gets (each from its first),
   * or a function choosing it per request (by agent, by the task). One of `turnId`, `source`.
   */
  turnId?: string;
  source?: (request: ModelRequest) => string | Promise<string>;
}

/** A recorded answer as the provider sent it: renamed tool-call ids get theirs back (decision 13). */
function recordedAnswer(message: MessageRecord): ModelResult {
  const renamed = (message.metadata['renamed_tool_call_ids'] ?? {}) as JsonObject;
  const parts = message.content.map((part): ContentPart => {
    if (part.type !== 'tool_call') return part;
    const original = renamed[part.id];
    return typeof original === 'string' ? { ...part, id: original } : part;
  });
  const outputData = message.metadata['output_data'];
  const model = message.metadata['model'];
  return {
    parts,
    usage: { inputTokens: 0, outputTokens: 0 },
    ...(typeof model === 'string' ? { model } : {}),
    finishReason: parts.some((part) => part.type === 'tool_call') ? 'tool-calls' : 'stop',
    ...(outputData !== undefined && outputData !== null ? { outputData } : {}),
    ...(message.providerMessageId ? { providerMessageId: message.providerMessageId } : {}),
  };
}

export class ReplayModel implements ModelClient {
  /** Every answered call: the asking turn, the recorded turn and the answer's position in it. */
  readonly calls: { turnId: string; sourceTurnId: string; index: number }[] = [];
  readonly #store: Store;
  readonly #source: (request: ModelRequest) => string | Promise<string>;
  readonly #answers = new Map<string, Promise<MessageRecord[]>>();

  constructor(options: ReplayModelOptions) {
    if (!options?.store) throw new ArgumentError('ReplayModel needs { store }');
    const { turnId, source } = options;
    if ((turnId === undefined) === (source === undefined))
      throw new ArgumentError('ReplayModel needs exactly one of turnId and source');
    if (turnId !== undefined && (typeof turnId !== 'string' || turnId === ''))
      throw new ArgumentError('ReplayModel: turnId must be a turn id');
    this.#store = options.store;
    this.#source = source ?? (() => turnId!);
  }

  async chat(request: ModelRequest, _options: ModelCallOptions): Promise<ModelResult> {
    const purpose = request.metadata.purpose;
    if (purpose)
      throw new ModelError(`ReplayModel answers a turn's model steps only, not its ${purpose} calls`, {
        retryable: false,
      });
    const sourceTurnId = await this.#source(request);
    const answers = await this.#recorded(sourceTurnId);
    // The step reserved its iteration before it called, once per step key (`reserveIteration`).
    const index = Math.max(0, iterationsOf(await this.#store.loadTurn(request.metadata.turnId)) - 1);
    const message = answers[index];
    if (!message)
      throw new ModelError(
        `ReplayModel: recorded turn ${sourceTurnId} has ${answers.length} answer(s); this is model call ${index + 1} of turn ${request.metadata.turnId}`,
        { retryable: false },
      );
    this.calls.push({ turnId: request.metadata.turnId, sourceTurnId, index });
    return recordedAnswer(message);
  }

  /** The recorded turn's answers in order (its assistant messages), read once per turn. */
  #recorded(turnId: string): Promise<MessageRecord[]> {
    let answers = this.#answers.get(turnId);
    if (!answers) {
      answers = this.#store.loadTurn(turnId).then(async (turn) =>
        (
          await this.#store.listMessages(turn.conversationId, {
            turnId,
            afterSequence: turn.contextMessageSequence,
          })
        ).filter((message) => message.role === 'assistant' && message.kind !== 'context_summary'),
      );
      answers.catch(() => this.#answers.delete(turnId));
      this.#answers.set(turnId, answers);
    }
    return answers;
  }
}
