/**
 * Following a run for a streaming door: its own turn's stream parts (a sub-agent's stay inside
 * it), until the turn finishes or a call of its tree awaits approval. The stream says nothing
 * when a call starts to wait, so a quiet stream is watched for pending approvals.
 */
import type { PendingApproval } from '../client/controls.js';
import type { RunHandle } from '../client/run-handle.js';
import type { RunStreamPart } from '../client/run-stream.js';
import type { TurnKitClient } from '../client/turnkit-client.js';
import type { TurnRecord } from '../store/types.js';
import { servedRun } from './served-run.js';

/** How often a followed run is checked for a call awaiting approval. */
const APPROVAL_POLL_MS = 250;

export type Followed =
  | { type: 'part'; part: RunStreamPart }
  /** Calls await approval: the run stops here; `cursor` is where a follower resumes. */
  | { type: 'input_required'; approvals: PendingApproval[]; cursor: string | undefined }
  | { type: 'finished'; turn: TurnRecord; cursor: string | undefined };

export interface FollowOptions {
  /** The cursor to resume after (a previous follower's). */
  after?: string | undefined;
  /** Calls just decided: awaiting no longer, whatever the store says yet. */
  decided?: readonly string[];
  signal: AbortSignal;
}

/** The run's parts, then why it stopped; nothing more once `signal` aborts. */
export async function* followTurn(
  client: TurnKitClient,
  run: RunHandle,
  options: FollowOptions,
): AsyncGenerator<Followed, void, undefined> {
  const decided = options.decided ?? [];
  const quiet = new AbortController();
  const stop = () => quiet.abort();
  options.signal.addEventListener('abort', stop);
  let pending: PendingApproval[] = [];
  const watcher = (async () => {
    while (!quiet.signal.aborted) {
      await new Promise((resolve) => setTimeout(resolve, APPROVAL_POLL_MS));
      const state = await servedRun(client, await run.turn()).catch(() => null);
      const waiting = state?.approvals.filter((a) => !decided.includes(a.toolCallId)) ?? [];
      if (waiting.length > 0) {
        pending = waiting;
        quiet.abort();
      }
    }
  })();
  let cursor = options.after;
  let finished = false;
  try {
    const parts = run.stream({ ...(options.after ? { after: options.after } : {}), signal: quiet.signal });
    for await (const part of parts) {
      cursor = part.cursor;
      if (part.type === 'finish') {
        finished = true;
        break;
      }
      if (part.turnId === run.turnId) yield { type: 'part', part };
    }
  } finally {
    quiet.abort();
    options.signal.removeEventListener('abort', stop);
    await watcher;
  }
  if (options.signal.aborted) return;
  if (finished) yield { type: 'finished', turn: await run.turn(), cursor };
  else yield { type: 'input_required', approvals: pending, cursor };
}
