import { ArgumentError, ToolError } from '../errors.js';
import { rootConversationId } from './tree.js';
import { TERMINAL_TURN_STATUSES } from './types.js';
import type { Store, TurnRecord, WaitRecord } from './types.js';

const finished = (turn: TurnRecord) => TERMINAL_TURN_STATUSES.includes(turn.status);

/**
 * Whether `waiter` is reachable from `target` through wait edges (spec §5.6): a finished
 * target reaches nothing; a target in the waiter's conversation reaches it (the conversation
 * is a serial lane); otherwise follow the waits of every unfinished turn of the target's
 * conversation.
 */
async function reaches(
  store: Store,
  target: TurnRecord,
  waiter: TurnRecord,
  visited: Set<string>,
): Promise<boolean> {
  if (finished(target)) return false;
  if (target.conversationId === waiter.conversationId) return true;
  if (visited.has(target.conversationId)) return false;
  visited.add(target.conversationId);
  const lane = await store.listTurns({
    conversationId: target.conversationId,
    status: ['pending', 'waiting', 'running'],
  });
  for (const turn of lane) {
    for (const edge of await store.listWaits({ turnId: turn.id })) {
      if (await reaches(store, await store.loadTurn(edge.targetTurnId), waiter, visited)) return true;
    }
  }
  return false;
}

/** Every wait target of the turn is terminal. */
export async function waitsReady(store: Store, turnId: string): Promise<boolean> {
  for (const edge of await store.listWaits({ turnId })) {
    if (!finished(await store.loadTurn(edge.targetTurnId))) return false;
  }
  return true;
}

/**
 * Adds wait edges from `turnId` to each target in one globally serialized graph transaction,
 * so two opposite edges added at once can never both succeed. Authorization is the caller's.
 */
export async function addWaits(
  store: Store,
  input: { turnId: string; targetTurnIds: readonly string[]; transition?: boolean },
): Promise<WaitRecord[]> {
  const initial = await store.loadTurn(input.turnId);
  const root = await rootConversationId(store, initial);
  return store.atomicGraph(() =>
    store.atomic(root, async () => {
      const waiter = await store.loadTurn(input.turnId);
      if (input.transition && waiter.status !== 'pending')
        throw new ArgumentError('only pending turns can wait');
      const edges: WaitRecord[] = [];
      for (const targetId of input.targetTurnIds) {
        if (targetId === waiter.id) throw new ToolError('a turn cannot wait for itself');
        const target = await store.loadTurn(targetId);
        if (!finished(target) && target.submittedAt === null)
          throw new ToolError('wait targets must be submitted');
        if (!finished(target) && target.conversationId === waiter.conversationId) {
          throw new ToolError('cannot wait for unfinished work in the same conversation');
        }
        if (await reaches(store, target, waiter, new Set())) throw new ToolError('wait would create a cycle');
        edges.push(await store.createWait({ turnId: waiter.id, targetTurnId: target.id }));
      }
      if (input.transition && waiter.submittedAt !== null && !(await waitsReady(store, waiter.id))) {
        await store.updateTurn(waiter.id, { status: 'waiting' });
      }
      return edges;
    }),
  );
}
