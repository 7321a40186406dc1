/** Join edges between turns (spec §5.6): adding waits, the cycle test, readiness, deadlines. */
import { ArgumentError, ToolError } from '../errors.js';
import { rootConversationId } from './tree.js';
import { TERMINAL_TURN_STATUSES, TURN_STATUSES } from './types.js';
import type { Json, Store, TurnRecord, WaitRecord } from './types.js';

const finished = (turn: TurnRecord) => TERMINAL_TURN_STATUSES.includes(turn.status);
const UNFINISHED = TURN_STATUSES.filter((status) => !TERMINAL_TURN_STATUSES.includes(status));

/**
 * `wait_reachable?(target, waiter)`: whether `waiter` is reachable from `target` through wait
 * edges. A finished target reaches nothing; a target in the waiter's conversation reaches it
 * (a conversation is a serial lane); otherwise follow the waits of every unfinished turn of
 * the target's conversation, visiting each conversation once. This deliberately rejects some
 * orderings that could have worked.
 */
export async function waitReachable(
  store: Store,
  target: TurnRecord,
  waiter: TurnRecord,
  visited: Set<string> = new Set(),
): Promise<boolean> {
  if (finished(target)) return false;
  if (target.conversationId === waiter.conversationId) return true;
  if (visited.has(target.conversationId)) return false;
  visited.add(target.conversationId);
  const lane = await store.listTurns({ conversationId: target.conversationId, status: UNFINISHED });
  for (const turn of lane) {
    for (const edge of await store.listWaits({ turnId: turn.id })) {
      if (await waitReachable(store, await store.loadTurn(edge.targetTurnId), waiter, visited)) return true;
    }
  }
  return false;
}

/** `ready?`: every wait target of the turn is terminal (`stale` is not). */
export async function waitsReady(store: Store, turnId: string): Promise<boolean> {
  for (const edge of await store.listWaits({ turnId })) {
    if (!finished(await store.loadTurn(edge.targetTurnId))) return false;
  }
  return true;
}

/**
 * Whether the root's timeout has passed (spec §5.6): `budget_limits.timeout` seconds of the
 * root (key absent → `defaultTimeout`; explicit null → never) from root `submittedAt ||
 * startedAt`. A root that has neither has not started its clock.
 */
export async function deadlineExceeded(
  store: Store,
  turn: TurnRecord,
  options: { defaultTimeout: number | null; now?: Date },
): Promise<boolean> {
  const root = turn.rootTurnId === turn.id ? turn : await store.loadTurn(turn.rootTurnId);
  const limits = root.options['budget_limits'];
  const configured: Json | undefined =
    limits !== null && typeof limits === 'object' && !Array.isArray(limits) && 'timeout' in limits
      ? limits['timeout']
      : undefined;
  const timeout = configured === undefined ? options.defaultTimeout : configured;
  if (typeof timeout !== 'number') return false;
  const start = root.submittedAt ?? root.startedAt;
  if (start === null) return false;
  return (options.now ?? new Date()).getTime() >= Date.parse(start) + timeout * 1000;
}

/**
 * `Background.wait` steps 2–3 (authorization is the caller's, first). In the global graph
 * transaction and the root lock, so two opposite edges added at once can never both pass
 * the cycle test. Edges are created idempotently; with `transition`, a submitted turn that
 * is not ready becomes `waiting`.
 */
export async function addWaits(
  store: Store,
  input: { turnId: string; targetTurnIds: readonly string[]; transition?: boolean },
): Promise<WaitRecord[]> {
  const root = await rootConversationId(store, await store.loadTurn(input.turnId));
  return store.atomicGraph(() =>
    store.atomic(root, async () => {
      const waiter = await store.loadTurn(input.turnId);
      if (input.transition && waiter.status !== 'pending')
        throw new ArgumentError('only pending turns can wait');
      const edges: WaitRecord[] = [];
      for (const targetId of input.targetTurnIds) {
        if (targetId === waiter.id) throw new ToolError('a turn cannot wait for itself');
        const target = await store.loadTurn(targetId);
        if (!finished(target)) {
          if (target.submittedAt === null) throw new ToolError('wait targets must be submitted');
          if (target.conversationId === waiter.conversationId) {
            throw new ToolError('cannot wait for unfinished work in the same conversation');
          }
          if (await waitReachable(store, target, waiter)) throw new ToolError('wait would create a cycle');
        }
        edges.push(await store.createWait({ turnId: waiter.id, targetTurnId: target.id }));
      }
      if (input.transition && waiter.submittedAt !== null && !(await waitsReady(store, waiter.id))) {
        await store.updateTurn(waiter.id, { status: 'waiting' });
      }
      return edges;
    }),
  );
}
