/**
 * The claim fence (TurnKit's ExecutionStore, spec §5.4): a turn's owner may write only while
 * the row still carries its claim token and, for store steps, while no newer workflow task
 * of its run has written (the task mark). The check is made under the root conversation's
 * lock, which every revocation (cancel, reconcile, completion, reset) holds.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { LostClaim, StaleTask } from '../../errors.js';
import type { JsonObject, Store, TurnRecord } from '../../store/types.js';

export interface Fence {
  turnId: string;
  claimToken: string;
  rootConversationId: string;
  /**
   * The history length of the workflow task whose local activity writes (store steps only).
   * The highest one seen under the token is kept in the turn's state (`task_mark`); a write
   * from an older task of the same run, one a newer task has overtaken, raises StaleTask.
   */
  taskHistoryLength?: number | undefined;
}

/** Stored in `options.state.task_mark` as `{ token, progress }`, the keys rows already carry. */
function taskMarkOf(turn: TurnRecord): { token: string; taskHistoryLength: number } | null {
  const state = turn.options['state'];
  const mark = state && typeof state === 'object' && !Array.isArray(state) ? state['task_mark'] : null;
  if (!mark || typeof mark !== 'object' || Array.isArray(mark)) return null;
  const { token, progress } = mark;
  return typeof token === 'string' && typeof progress === 'number'
    ? { token, taskHistoryLength: progress }
    : null;
}

/**
 * Raises StaleTask when a newer workflow task of the run holding `claimToken` has already
 * written to `turn`; returns whether this task is newer than any that wrote (so it should
 * raise the mark). Call it under the turn's root lock.
 */
export function checkTaskMark(turn: TurnRecord, claimToken: string, taskHistoryLength: number): boolean {
  const mark = taskMarkOf(turn);
  const current = mark?.token === claimToken ? mark.taskHistoryLength : -1;
  if (current > taskHistoryLength) {
    throw new StaleTask(
      `a newer workflow task of this run has moved turn ${turn.id} on (history ${current} > ${taskHistoryLength})`,
    );
  }
  return current < taskHistoryLength;
}

/** The `task_mark` state key that raises the mark to this fence's task. */
export function taskMark(fence: Fence): JsonObject {
  return { token: fence.claimToken, progress: fence.taskHistoryLength ?? -1 };
}

/**
 * The fence check on the row read under the root lock: LostClaim once the token changed,
 * StaleTask for an overtaken workflow task. Returns whether the task mark must be raised.
 */
export function checkFence(turn: TurnRecord, fence: Fence): boolean {
  if (turn.claimToken !== fence.claimToken) throw new LostClaim('turn ownership was revoked');
  if (fence.taskHistoryLength === undefined) return false;
  return checkTaskMark(turn, fence.claimToken, fence.taskHistoryLength);
}

/**
 * Store methods that pass through a fenced view unchecked: the reads, and two writes. Events
 * and stream parts describe what already committed (a zombie attempt's deltas are left out by
 * their attempt instead); `reconcileStaleTurns` maintains other turns under their own locks.
 * Every other method is a write and is fenced, so a method added to Store is fenced by default.
 */
const UNFENCED: ReadonlySet<string> = new Set<keyof Store>([
  'backend',
  'loadConversation',
  'listForks',
  'latestMessageSequence',
  'loadMessage',
  'listMessages',
  'loadTurn',
  'loadTurnWithWaits',
  'listTurns',
  'listLane',
  'listSubmittedTurns',
  'listActionableTurns',
  'listStaleInlineTurns',
  'busyConversation',
  'nextDeliveryTrigger',
  'afterTurnEnd',
  'loadDelivery',
  'listDeliveries',
  'listWaits',
  'loadToolExecution',
  'listToolExecutions',
  'countToolExecutions',
  'budgetUsage',
  'appendEvent',
  'appendEvents',
  'listEvents',
  'appendStreamParts',
  'listStreamParts',
  'hasStreamPart',
  'watchStream',
  'reconcileStaleTurns',
]);

/** A fenced view: the store, the fence, and the view's own `atomic`. */
export type FencedView = Store & { readonly base: Store; readonly fence: Fence };

/**
 * A `Store` bound to one turn's claim (for `ToolContext.store`, which is public API): every
 * write runs under the root lock after the fence check; reads pass through. Writes inside a
 * block this view already checked join it without a second check, since the root lock is held
 * since the check; work that outlives the block finds it closed and checks again.
 */
export function fencedView(base: Store, fence: Fence): FencedView {
  const checked = new AsyncLocalStorage<{ open: boolean }>();
  const atomic = <T>(_conversationId: string | null, fn: () => Promise<T>): Promise<T> => {
    if (checked.getStore()?.open) return base.atomic(fence.rootConversationId, fn);
    return base.atomic(fence.rootConversationId, async () => {
      const turn = await base.loadTurn(fence.turnId);
      if (checkFence(turn, fence)) {
        const state = { ...(turn.options['state'] as JsonObject | undefined), task_mark: taskMark(fence) };
        await base.updateTurn(turn.id, { options: { ...turn.options, state } });
      }
      const block = { open: true };
      try {
        return await checked.run(block, fn);
      } finally {
        block.open = false;
      }
    });
  };
  const own: Record<string, unknown> = {
    base,
    fence,
    atomic,
    atomicGraph: <T>(fn: () => Promise<T>) => base.atomicGraph(() => atomic(null, fn)),
    // The base store belongs to whoever opened it.
    close: () => Promise.resolve(),
  };
  return new Proxy(base, {
    get(target, property) {
      if (typeof property === 'string' && property in own) return own[property];
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      const method = (value as (...args: unknown[]) => Promise<unknown>).bind(target);
      if (typeof property !== 'string' || UNFENCED.has(property)) return method;
      return (...args: unknown[]) => atomic(null, () => method(...args));
    },
  }) as FencedView;
}
