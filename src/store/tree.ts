/** Turn-tree lookups and the lane claim (spec §5.3, §5.12), built on Store primitives. */
import { nowIso } from './records.js';
import type { Store, TurnRecord } from './types.js';
import { BUSY_TURN_STATUSES } from './types.js';

/** The conversation of the turn's root turn: the lock every write of the tree serializes on. */
export async function rootConversationId(store: Store, turn: TurnRecord): Promise<string> {
  if (turn.rootTurnId === turn.id) return turn.conversationId;
  return (await store.loadTurn(turn.rootTurnId)).conversationId;
}

/** `turnId` and its transitive children among `tree` (the turns of one root), parents first. */
export function subtreeOf(tree: readonly TurnRecord[], turnId: string): TurnRecord[] {
  const ids = new Set([turnId]);
  const rows = tree.filter((row) => row.id === turnId);
  for (let grew = true; grew;) {
    grew = false;
    for (const row of tree) {
      if (row.parentTurnId && ids.has(row.parentTurnId) && !ids.has(row.id)) {
        ids.add(row.id);
        rows.push(row);
        grew = true;
      }
    }
  }
  return rows;
}

type LaneRefusal = 'not_pending' | 'lane_busy';
export type LaneClaim =
  { claimed: true; turn: TurnRecord } | { claimed: false; reason: LaneRefusal; turn: TurnRecord };

/**
 * Whether the conversation's lane (`lane`, its open turns) lets `turn` start (spec §5.3 step
 * 3). Inline turns are not in a lane. A background turn may start only when no other turn of
 * its conversation is running or waiting and it is the oldest submitted pending turn there.
 * Read the lane under the turn's conversation lock, or the answer is stale before it is used.
 */
function laneAdmits(lane: readonly TurnRecord[], turn: TurnRecord): boolean {
  if (lane.some((other) => other.id !== turn.id && BUSY_TURN_STATUSES.includes(other.status))) return false;
  const oldest = lane.find((other) => other.status === 'pending' && other.submittedAt !== null);
  return oldest === undefined || oldest.id === turn.id;
}

/**
 * A lane turn starts with every earlier turn's work in view (decision 52): the conversation's
 * newest message sequence when it starts (`latest`) is kept as `options.earlier_turns_through`,
 * and what the turns ahead of it wrote up to there (results, answers, repairs, cancels) joins
 * its snapshot. The lane admits it only when no other turn of its conversation is busy, so
 * those turns have written everything by then. Only on the first claim: a started turn keeps
 * what it saw. An inline turn is in no lane and keeps its snapshot alone.
 */
function earlierTurnsAtStart(turn: TurnRecord, latest: number): TurnRecord['options'] | undefined {
  if (turn.submittedAt === null || turn.startedAt !== null) return undefined;
  if (latest <= turn.contextMessageSequence) return undefined;
  return { ...turn.options, [EARLIER_TURNS_THROUGH]: latest };
}

/** The turn option that holds how far a lane turn sees its earlier turns' messages. */
export const EARLIER_TURNS_THROUGH = 'earlier_turns_through';

/**
 * Claims a pending turn for `claimToken` (spec §5.3 steps 1, 3 and 5; waits and join input,
 * steps 2 and 4, are the engine's). Under the root lock then the turn's conversation lock:
 * reload, refuse unless pending, refuse unless the lane admits it, then CAS pending → running
 * with startedAt kept, heartbeatAt now and the token. A retry with the token that already
 * owns the running turn gets the same claim back. Hooks, in the claim's transaction:
 * `prepare` may return the options the claim writes (given those it would write), so that
 * what the turn's first step reserves goes in the claim's one update; `started` runs when
 * this call moved the turn to running (its events commit with the claim).
 */
export async function claimInLane(
  store: Store,
  turnId: string,
  claimToken: string,
  loaded?: TurnRecord,
  hooks: {
    prepare?: (
      turn: TurnRecord,
      options: TurnRecord['options'],
    ) => Promise<TurnRecord['options'] | undefined>;
    started?: (turn: TurnRecord) => Promise<void>;
  } = {},
): Promise<LaneClaim> {
  // The caller's unlocked read, if it has one: only the root and the conversation come from it.
  const initial = loaded ?? (await store.loadTurn(turnId));
  const root = await rootConversationId(store, initial);
  return store.atomic(root, () =>
    store.atomic(initial.conversationId, async (): Promise<LaneClaim> => {
      const turn = await store.loadTurn(turnId);
      if (turn.status === 'running' && turn.claimToken === claimToken) return { claimed: true, turn };
      if (turn.status !== 'pending') return { claimed: false, reason: 'not_pending', turn };
      // One read for the lane and the newest message (an inline turn is in no lane).
      const lane = turn.submittedAt === null ? null : await store.listLane(turn.conversationId);
      if (lane && !laneAdmits(lane.turns, turn)) return { claimed: false, reason: 'lane_busy', turn };
      const earlier = lane ? earlierTurnsAtStart(turn, lane.latestMessageSequence) : undefined;
      const options = (await hooks.prepare?.(turn, earlier ?? turn.options)) ?? earlier;
      const now = nowIso();
      const claimed = await store.claimTurn(turnId, {
        from: 'pending',
        to: 'running',
        claimToken,
        startedAt: turn.startedAt ?? now,
        heartbeatAt: now,
        ...(options ? { options } : {}),
      });
      if (!claimed) return { claimed: false, reason: 'not_pending', turn: await store.loadTurn(turnId) };
      await hooks.started?.(claimed);
      return { claimed: true, turn: claimed };
    }),
  );
}
