/**
 * The writing side of a run's live stream (`turnkit_stream_parts`, read by `run.stream()`).
 * Deltas are written by the model activity in small batches, never into Temporal history;
 * every other part is written in the transaction of the write it reports, or with its event.
 */
import type { ModelDelta, ModelResult } from '../../models/types.js';
import type {
  ContentPart,
  Json,
  JsonObject,
  NewStreamPart,
  Store,
  StreamPartType,
  TurnRecord,
} from '../../store/types.js';

/** A batch is written once it is this old… */
const DELTA_BATCH_MS = 50;
/** …or this long, whichever comes first. */
const DELTA_BATCH_CHARS = 256;

type StreamTurn = Pick<TurnRecord, 'id' | 'rootTurnId'>;

/**
 * The parts that open one attempt of a model step: a `step.restarted` part first when an
 * earlier attempt may have streamed (its deltas are left out from now on), then
 * `step.started`, whose sequence is the attempt id the deltas carry.
 */
export function stepStartedParts(
  turn: StreamTurn,
  step: string,
  retry: boolean,
  payload: JsonObject,
): NewStreamPart[] {
  const base = { rootTurnId: turn.rootTurnId, turnId: turn.id, step };
  return [
    ...(retry ? [{ ...base, type: 'step.restarted' as const, payload: {} }] : []),
    { ...base, type: 'step.started', payload },
  ];
}

/** The parts a committed response adds: its tool calls (with their final ids) and the step's end. */
export function stepFinishedParts(
  turn: StreamTurn,
  step: string,
  parts: readonly ContentPart[],
  result: ModelResult,
  usage: Json,
): NewStreamPart[] {
  const base = { rootTurnId: turn.rootTurnId, turnId: turn.id, step };
  const calls = parts.flatMap((part) =>
    part.type === 'tool_call'
      ? [
          {
            ...base,
            type: 'tool.call' as const,
            payload: { tool_call_id: part.id, name: part.name, arguments: part.arguments },
          },
        ]
      : [],
  );
  return [
    ...calls,
    {
      ...base,
      type: 'step.finished',
      payload: { finish_reason: result.finishReason ?? null, usage },
    },
  ];
}

const RETRY_MIN_MS = 200;
const RETRY_MAX_MS = 5_000;

/**
 * Batches a model attempt's deltas: at most one write per `DELTA_BATCH_MS` (the first delta
 * after a quiet spell goes out at once, later ones wait for the window), or sooner once
 * `DELTA_BATCH_CHARS` are waiting; consecutive deltas of one kind become one part, one write
 * is in flight at a time, and a failed write keeps its text for the next one, tried after a
 * back-off (200 ms doubling to 5 s; one warning per outage). Writing never
 * blocks the provider's stream; the committed message stays the source of truth, so a batch
 * the store never took is logged, not fatal.
 */
export class DeltaWriter {
  #pending: { type: StreamPartType; text: string }[] = [];
  #chars = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #writing: Promise<void> | null = null;
  #lastWrite = -Infinity;
  #timerDue = 0;
  #closed = false;
  /** Failed writes in a row, and when the next may be tried: a store that is down is not hammered. */
  #failures = 0;
  #retryAt = -Infinity;

  constructor(
    private readonly store: Store,
    private readonly turn: StreamTurn,
    private readonly step: string,
    private readonly attempt: number,
    private readonly logger: Pick<Console, 'warn'>,
  ) {}

  push(delta: ModelDelta): void {
    if (typeof delta?.text !== 'string' || delta.text === '') return;
    const type: StreamPartType = delta.type === 'reasoning' ? 'reasoning.delta' : 'text.delta';
    const last = this.#pending[this.#pending.length - 1];
    if (last?.type === type) last.text += delta.text;
    else this.#pending.push({ type, text: delta.text });
    this.#chars += delta.text.length;
    this.#schedule();
  }

  /** Writes what is left, with one last try; never throws. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#clearTimer();
    if (this.#writing) await this.#writing;
    if (this.#pending.length > 0) await this.#flush();
    if (this.#pending.length > 0)
      this.logger.warn(`turnkit: ${this.#chars} streamed characters of ${this.turn.id} were not written`);
    this.#pending = [];
  }

  /**
   * What is still waiting, as parts, without writing it: the model step stores them with the
   * response, in its transaction (an answer that came at once costs no write of its own).
   */
  async drain(): Promise<NewStreamPart[]> {
    this.#closed = true;
    this.#clearTimer();
    if (this.#writing) await this.#writing;
    const parts = this.#parts(this.#pending);
    this.#pending = [];
    return parts;
  }

  /**
   * Writes when the window allows (or enough is waiting), else when it opens. Deltas that
   * arrive in the same turn of the event loop go out together.
   */
  #schedule(): void {
    if (this.#closed || this.#writing || this.#pending.length === 0) return;
    const now = performance.now();
    const ready = this.#chars >= DELTA_BATCH_CHARS ? now : Math.max(now, this.#lastWrite + DELTA_BATCH_MS);
    const due = Math.max(ready, this.#retryAt);
    if (this.#timer && this.#timerDue <= due) return;
    this.#clearTimer();
    this.#timerDue = due;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.#flush();
    }, due - now);
  }

  #parts(batch: readonly { type: StreamPartType; text: string }[]): NewStreamPart[] {
    const base = {
      rootTurnId: this.turn.rootTurnId,
      turnId: this.turn.id,
      step: this.step,
      attempt: this.attempt,
    };
    return batch.map((delta) => ({ ...base, type: delta.type, payload: { text: delta.text } }));
  }

  #clearTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #flush(): Promise<void> {
    const batch = this.#pending;
    this.#pending = [];
    this.#chars = 0;
    if (batch.length === 0) return Promise.resolve();
    this.#lastWrite = performance.now();
    const base = {
      rootTurnId: this.turn.rootTurnId,
      turnId: this.turn.id,
      step: this.step,
      attempt: this.attempt,
    };
    this.#writing = this.store
      .appendStreamParts(batch.map((delta) => ({ ...base, type: delta.type, payload: { text: delta.text } })))
      .then(
        () => {
          this.#failures = 0;
          this.#retryAt = -Infinity;
        },
        (error: unknown) => {
          // Kept for the next write, ahead of what came since.
          this.#pending = [...batch, ...this.#pending];
          this.#chars += batch.reduce((sum, delta) => sum + delta.text.length, 0);
          this.#failures += 1;
          this.#retryAt =
            performance.now() + Math.min(RETRY_MIN_MS * 2 ** (this.#failures - 1), RETRY_MAX_MS);
          if (this.#failures === 1)
            this.logger.warn(`turnkit: stream deltas of ${this.turn.id} not written yet:`, error);
        },
      )
      .finally(() => {
        this.#writing = null;
        this.#schedule();
      });
    return this.#writing;
  }
}
