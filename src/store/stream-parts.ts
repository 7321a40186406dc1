/**
 * Shared rules of the live stream table (`turnkit_stream_parts`): validation of new parts,
 * and the fan-out of one listening connection to every reader of a process.
 */
import { ArgumentError } from '../errors.js';
import { nowIso } from './records.js';
import type { JsonObject, NewStreamPart, StreamPartRecord } from './types.js';
import { STREAM_PART_TYPES } from './types.js';

/** The PostgreSQL notification channel; the payload is the root turn id. */
export const STREAM_CHANNEL = 'turnkit_stream';

/** A new part as stored (everything but the sequence), after validation. */
export function buildStreamPart(part: NewStreamPart): Omit<StreamPartRecord, 'sequence'> {
  if (!part || typeof part.rootTurnId !== 'string' || typeof part.turnId !== 'string')
    throw new ArgumentError('a stream part needs rootTurnId and turnId');
  if (!(STREAM_PART_TYPES as readonly string[]).includes(part.type))
    throw new ArgumentError(`unknown stream part type ${JSON.stringify(part.type)}`);
  const payload = part.payload ?? {};
  if (typeof payload !== 'object' || Array.isArray(payload))
    throw new ArgumentError('a stream part payload must be a JSON object');
  return {
    rootTurnId: part.rootTurnId,
    turnId: part.turnId,
    step: part.step ?? null,
    attempt: part.attempt ?? null,
    type: part.type,
    payload: JSON.parse(JSON.stringify(payload)) as JsonObject,
    createdAt: nowIso(),
  };
}

/**
 * Readers of this process waiting for parts, by root. The listening connection opens with the
 * first reader and closes with the last; one that dies is opened again (readers also poll
 * slowly, so a lost notification only costs latency).
 */
export class StreamWatchers {
  readonly #waiting = new Map<string, Set<() => void>>();
  #listening: Promise<() => Promise<void>> | null = null;

  constructor(
    private readonly listen: (
      onPayload: (root: string) => void,
      onLost: () => void,
    ) => Promise<() => Promise<void>>,
  ) {}

  async watch(rootTurnId: string, wake: () => void): Promise<() => void> {
    let set = this.#waiting.get(rootTurnId);
    if (!set) this.#waiting.set(rootTurnId, (set = new Set()));
    set.add(wake);
    try {
      await this.#open();
    } catch {
      // No push for now: the reader's slow poll covers it.
    }
    return () => {
      set.delete(wake);
      if (set.size === 0) this.#waiting.delete(rootTurnId);
      if (this.#waiting.size === 0) void this.close();
    };
  }

  #open(): Promise<() => Promise<void>> {
    this.#listening ??= this.listen(
      (root) => {
        for (const waiter of this.#waiting.get(root) ?? []) waiter();
      },
      // The connection died (a server restart): every waiting reader looks for what it may
      // have missed, and the connection is opened again a second later while any wait.
      () => {
        this.#listening = null;
        for (const set of this.#waiting.values()) for (const waiter of set) waiter();
        setTimeout(() => {
          if (this.#waiting.size > 0) this.#open().catch(() => undefined);
        }, 1_000).unref();
      },
    ).catch((error: unknown) => {
      this.#listening = null;
      throw error;
    });
    return this.#listening;
  }

  async close(): Promise<void> {
    const listening = this.#listening;
    this.#listening = null;
    if (!listening) return;
    try {
      await (
        await listening
      )();
    } catch {
      // Already gone.
    }
  }
}
