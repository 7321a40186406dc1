/**
 * A store bound to one turn's claim, for code that holds a `Store` (the store contract's
 * fencing cases, `ToolContext.store`). The fence itself lives with the unit of work every
 * activity opens: src/engine/step/fence.ts.
 */
import type { Fence, FencedView } from '../engine/step/fence.js';
import { fencedView } from '../engine/step/fence.js';
import { rootConversationId } from './tree.js';
import type { Store, TurnRecord } from './types.js';

export type FencedStore = FencedView;

async function forTurn(
  base: Store,
  turn: TurnRecord,
  claimToken: string,
  taskHistoryLength?: number,
): Promise<FencedView> {
  return fencedView(base, {
    turnId: turn.id,
    claimToken,
    rootConversationId: await rootConversationId(base, turn),
    taskHistoryLength,
  });
}

// A constructor that returns the view: `new` hands out the Proxy over the base store.
function construct(this: unknown, base: Store, fence: Fence): FencedView {
  return fencedView(base, fence);
}

/** `new FencedStore(base, fence)`, or `FencedStore.forTurn` to resolve the root conversation. */
export const FencedStore = Object.assign(
  construct as unknown as new (base: Store, fence: Fence) => FencedView,
  { forTurn },
);
