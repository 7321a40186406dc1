/**
 * The reading side of a run's live stream: `run.stream({ after })`. Pull-based: the store is
 * read only when the caller asks for the next part, so a slow reader holds no buffer and never
 * slows the turn. PostgreSQL wakes readers (`LISTEN`); SQLite and memory are polled.
 */
import { StreamCursorError } from '../errors.js';
import type { Json, JsonObject, Store, StreamPartRecord, TurnStatus } from '../store/types.js';
import { TERMINAL_TURN_STATUSES } from '../store/types.js';

interface PartBase {
  /** Pass it as `after` to resume right after this part. Totally ordered over the run's tree. */
  cursor: string;
  /** The turn the part belongs to: the run's own, or a sub-agent's. */
  turnId: string;
  /** The model step key, for step and delta parts. */
  step: string | null;
}

/** Where a sub-agent's turn comes from. */
export interface SubAgentOrigin {
  agentName: string;
  parentTurnId: string | null;
  /** The parent's tool call that started it (a sub-agent tool, or `launch_agent`). */
  toolCallId: string | null;
}

/** One part of a run's live stream. */
export type RunStreamPart = PartBase &
  (
    | { type: 'text.delta'; text: string }
    | { type: 'reasoning.delta'; text: string }
    | { type: 'step.started'; model: string | null }
    /** What this step streamed so far is void: an attempt died; the step streams again. */
    | { type: 'step.restarted' }
    | { type: 'step.finished'; finishReason: string | null; usage: Json }
    | { type: 'tool.call'; toolCallId: string; toolName: string; arguments: JsonObject }
    | {
        type: 'tool.result';
        toolCallId: string;
        toolName: string | null;
        status: 'completed' | 'failed' | 'interrupted' | 'skipped';
        output: Json;
        error: string | null;
      }
    | {
        type: 'status';
        status: TurnStatus;
        /** On a sub-agent's `running` parts: the agent, and the turn and tool call that started it. */
        subAgent?: SubAgentOrigin;
      }
    /** The last part: the run's turn ended with this status. */
    | { type: 'finish'; status: TurnStatus }
  );

export interface RunStreamOptions {
  /** A part's cursor: the stream starts right after it (no gap, no duplicate). */
  after?: string;
  /** Stops the stream (it ends cleanly). */
  signal?: AbortSignal;
  /** Poll interval where the store has no push (SQLite, memory); default 20 ms. */
  pollMs?: number;
}

const PAGE = 256;
/** With push, a slow poll still covers a lost notification. */
const PUSH_POLL_MS = 1_000;
/** How often an idle reader looks at the run's status. */
const STATUS_EVERY_MS = 200;
/** A run terminal this long without its `finish` part (a crash between commit and event) ends anyway. */
const FINISH_GRACE_MS = 2_000;

const str = (value: Json | undefined): string | null => (typeof value === 'string' ? value : null);

function toRunStreamPart(row: StreamPartRecord): RunStreamPart {
  const base: PartBase = { cursor: String(row.sequence), turnId: row.turnId, step: row.step };
  const p = row.payload;
  switch (row.type) {
    case 'text.delta':
    case 'reasoning.delta':
      return { ...base, type: row.type, text: str(p['text']) ?? '' };
    case 'step.started':
      return { ...base, type: 'step.started', model: str(p['model']) };
    case 'step.restarted':
      return { ...base, type: 'step.restarted' };
    case 'step.finished':
      return {
        ...base,
        type: 'step.finished',
        finishReason: str(p['finish_reason']),
        usage: p['usage'] ?? null,
      };
    case 'tool.call':
      return {
        ...base,
        type: 'tool.call',
        toolCallId: str(p['tool_call_id']) ?? '',
        toolName: str(p['name']) ?? '',
        arguments: (p['arguments'] ?? {}) as JsonObject,
      };
    case 'tool.result':
      return {
        ...base,
        type: 'tool.result',
        toolCallId: str(p['tool_call_id']) ?? '',
        toolName: str(p['name']),
        status: (str(p['status']) ?? 'completed') as 'completed',
        output: p['output'] ?? null,
        error: str(p['error']),
      };
    case 'status': {
      const status = (str(p['status']) ?? 'running') as TurnStatus;
      const agentName = str(p['agent']);
      if (agentName === null) return { ...base, type: 'status', status };
      const subAgent = {
        agentName,
        parentTurnId: str(p['parent_turn_id']),
        toolCallId: str(p['tool_call_id']),
      };
      return { ...base, type: 'status', status, subAgent };
    }
    case 'finish':
      return { ...base, type: 'finish', status: (str(p['status']) ?? 'running') as TurnStatus };
  }
}

/** Parses `after`: the cursor of a part of this run, else a StreamCursorError. */
async function startAfter(store: Store, rootTurnId: string, after: string | undefined): Promise<number> {
  if (after === undefined) return 0;
  const sequence = typeof after === 'string' && /^[1-9]\d{0,15}$/.test(after) ? Number(after) : NaN;
  if (!Number.isSafeInteger(sequence) || !(await store.hasStreamPart(rootTurnId, sequence))) {
    throw new StreamCursorError(
      `no part of run ${rootTurnId} has the cursor ${JSON.stringify(after)}: pass a cursor this run's stream gave, or none to read from the start`,
      { details: { rootTurnId, cursor: after } },
    );
  }
  return sequence;
}

/** Whether the part at `sequence` ends `turnId`'s stream: the root's `finish`, or the turn's terminal status. */
async function endsAt(store: Store, rootTurnId: string, turnId: string, sequence: number): Promise<boolean> {
  const [row] = await store.listStreamParts(rootTurnId, { afterSequence: sequence - 1, limit: 1 });
  if (row?.sequence !== sequence) return false;
  if (row.type === 'finish') return row.turnId === rootTurnId;
  if (row.type !== 'status' || row.turnId !== turnId || turnId === rootTurnId) return false;
  return TERMINAL_TURN_STATUSES.includes(str(row.payload['status']) as TurnStatus);
}

/** Wakes a sleeping reader; a wake that comes while it reads is kept for its next sleep. */
class Waker {
  #woken = false;
  #resolve: (() => void) | null = null;

  wake = (): void => {
    this.#woken = true;
    this.#resolve?.();
  };

  async sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
    if (this.#woken || signal?.aborted) {
      this.#woken = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.#resolve = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done);
      this.#resolve = done;
    });
    this.#woken = false;
  }
}

/**
 * Whether a part's turn is `turnId` or below it: a handle on a turn below the root (a run
 * attached with `parentRun`, a sub-agent's handle) sees its own subtree only.
 */
function subtreeFilter(store: Store, turnId: string): (partTurnId: string) => Promise<boolean> {
  const inside = new Set([turnId]);
  const outside = new Set<string>();
  return async (partTurnId) => {
    const path: string[] = [];
    let current: string | null = partTurnId;
    while (current !== null && !inside.has(current) && !outside.has(current)) {
      path.push(current);
      current = (await store.loadTurn(current)).parentTurnId;
    }
    const member = current !== null && inside.has(current);
    for (const id of path) (member ? inside : outside).add(id);
    return member;
  };
}

/**
 * The parts of `turnId`'s subtree (default: the whole run rooted at `rootTurnId`), until its
 * `finish`: the root's `finish` part, or for a turn below the root its own terminal status.
 */
export async function* readRunStream(
  store: Store,
  rootTurnId: string,
  options: RunStreamOptions = {},
  turnId: string = rootTurnId,
): AsyncGenerator<RunStreamPart, void, undefined> {
  const visible = turnId === rootTurnId ? null : subtreeFilter(store, turnId);
  let after = await startAfter(store, rootTurnId, options.after);
  // A reader that resumes past its end (an `EventSource` reconnecting after `finish`) gets nothing.
  if (after > 0 && (await endsAt(store, rootTurnId, turnId, after))) return;
  const waker = new Waker();
  const unwatch = store.watchStream ? await store.watchStream(rootTurnId, waker.wake) : null;
  const pollMs = unwatch ? PUSH_POLL_MS : Math.max(1, options.pollMs ?? 20);
  let statusAt = 0;
  let terminalSince: number | null = null;
  try {
    while (!options.signal?.aborted) {
      const rows = await store.listStreamParts(rootTurnId, { afterSequence: after, limit: PAGE });
      for (const row of rows) {
        // A reader stopped while the page was read yields nothing more.
        if (options.signal?.aborted) return;
        after = row.sequence;
        if (visible && !(await visible(row.turnId))) continue;
        const part = toRunStreamPart(row);
        yield part;
        if (part.type === 'finish' && row.turnId === rootTurnId) return;
        if (
          visible &&
          part.type === 'status' &&
          row.turnId === turnId &&
          TERMINAL_TURN_STATUSES.includes(part.status)
        ) {
          yield { ...part, type: 'finish', status: part.status };
          return;
        }
      }
      if (rows.length === PAGE) continue;
      if (rows.length === 0 && Date.now() - statusAt >= STATUS_EVERY_MS) {
        statusAt = Date.now();
        const root = await store.loadTurn(turnId);
        if (TERMINAL_TURN_STATUSES.includes(root.status)) {
          terminalSince ??= Date.now();
          if (Date.now() - terminalSince >= FINISH_GRACE_MS) {
            // Its `finish` part was lost with a crash: end as the store says the run ended.
            yield {
              cursor: String(after),
              turnId,
              step: null,
              type: 'finish',
              status: root.status,
            };
            return;
          }
        }
      }
      await waker.sleep(terminalSince === null ? pollMs : Math.min(pollMs, STATUS_EVERY_MS), options.signal);
    }
  } finally {
    unwatch?.();
  }
}
