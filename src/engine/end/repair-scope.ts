/**
 * What `turnkit repair` looks at (audit finding 24): the store's unfinished submitted turns, a
 * page at a time, and Temporal's evidence that this namespace runs the store's workflows.
 */
import { LANE_TURN_STATUSES } from '../../store/types.js';
import type { TurnRecord } from '../../store/types.js';
import { TURNKIT_CONVERSATION_ID } from '../../workflows/contract.js';
import type { Runtime } from '../runtime.js';
import type { RepairContext } from './repair.js';

/**
 * Whether Temporal knows some other workflow of the store: any workflow here tagged with one of
 * the conversations of `missing` (a finished turn's, or the lane's), found by one visibility
 * query of one result. Conversation ids are unique to the store, so a store in use is confirmed
 * while its workflows are within the namespace's retention; the wrong namespace never is (there
 * the search attribute may not even exist, and the query fails: not confirmed).
 */
export async function storeSeenHere(
  context: RepairContext,
  missing: readonly TurnRecord[],
): Promise<boolean> {
  const conversations = [...new Set(missing.map((turn) => turn.conversationId))]
    .filter((id) => /^[\w.:-]+$/.test(id))
    .slice(0, 50);
  if (conversations.length === 0) return false;
  const query = `${TURNKIT_CONVERSATION_ID.name} IN (${conversations.map((id) => `'${id}'`).join(', ')})`;
  try {
    for await (const _workflow of context.temporal.workflow.list({ query, pageSize: 1 })) return true;
  } catch {
    return false;
  }
  return false;
}

/** Every submitted turn of the store that is not finished, `pageSize` rows at a time, oldest first. */
export async function* unfinishedSubmittedTurns(
  runtime: Runtime,
  pageSize: number,
): AsyncGenerator<TurnRecord[]> {
  let after: { createdAt: string; id: string } | undefined;
  for (;;) {
    const rows = await runtime.store.listTurns({
      status: [...LANE_TURN_STATUSES],
      limit: pageSize,
      ...(after ? { after } : {}),
    });
    const page = rows.filter((turn) => turn.submittedAt !== null);
    if (page.length > 0) yield page;
    if (rows.length < pageSize) return;
    const last = rows.at(-1)!;
    after = { createdAt: last.createdAt, id: last.id };
  }
}
