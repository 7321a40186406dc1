import { AuthorizationError, storedErrorClass } from '../../errors.js';
import { TERMINAL_TURN_STATUSES } from '../../store/types.js';
import type { TurnRecord } from '../../store/types.js';
import { rootConversationId, subtreeOf } from '../../store/tree.js';
import type { CancelDescendants, CancelRequest } from '../../contract/cancel-request.js';
import { signedCancelParams } from '../../contract/cancel-request.js';
import type { Runtime } from '../runtime.js';
import { verifyOnce } from '../controls/signature-use.js';
import { principalOf } from '../step/turn-state.js';
import type { CallbackVerdict } from './callback.js';
import { callbackVerdict, emitCallback } from './callback.js';
import { mergeNotices, repeatedNotice, terminalNotice } from './notice.js';
import { emitInterrupted, writeTerminalRows } from './terminal-write.js';
import type { TerminalWrite } from './terminal-write.js';
import type { TerminalNotice } from '../../contract/digests.js';

export type { CancelDescendants, CancelRequest } from '../../contract/cancel-request.js';

/**
 * Authorizes `:cancel`; a denial is recorded as an event and reported, nothing is cancelled.
 * A finished turn has nothing to cancel: `finished`, no check and no event. Its workflow may
 * still stop what it runs (a cascade committed in the store signals each child so that its
 * in-flight model call or tool is aborted); the store is not written again. The signature
 * covers `descendants` too and is good once (`use`: signature-use.ts; a client checking
 * before it sends passes none). `native`: Temporal's own cancellation request (`temporal
 * workflow cancel`, the UI's Cancel), which reaches the policy unsigned, `verification: 'temporal'`.
 */
export async function authorizeCancel(
  runtime: Runtime,
  input: { turnId: string; use?: string; native?: boolean } & CancelRequest,
): Promise<{ allowed: boolean; reason?: string; finished?: boolean }> {
  const turn = await runtime.store.loadTurn(input.turnId);
  if (TERMINAL_TURN_STATUSES.includes(turn.status)) return { allowed: true, finished: true };
  const request = { turnId: turn.id, action: 'cancel', principal: input.principal };
  try {
    await verifyOnce(
      runtime,
      { ...request, params: signedCancelParams(input) },
      input.native ? null : (input.signature ?? null),
      input.use,
      (verification) => {
        const reason = input.native ? 'temporal' : verification.reason;
        return runtime.authorize('cancel', input.principal, {
          turn: turn.id,
          conversation: turn.conversationId,
          owner: principalOf(turn),
          descendants: input.descendants,
          verified: verification.verified,
          ...(reason ? { verification: reason } : {}),
        });
      },
    );
    return { allowed: true };
  } catch (error) {
    if (!(error instanceof AuthorizationError)) throw error;
    await runtime.emit(turn, 'cancel.denied', {
      descendants: input.descendants,
      error: error.message,
      ...(input.native ? { verification: 'temporal' } : {}),
    });
    return { allowed: false, reason: error.message };
  }
}

/** Records a cancel request that was rejected before authorization (malformed payload). */
export async function rejectCancel(
  runtime: Runtime,
  input: { turnId: string; reason: string },
): Promise<void> {
  const turn = await runtime.store.loadTurn(input.turnId);
  await runtime.emit(turn, 'cancel.rejected', { reason: input.reason });
}

const CANCELLED = {
  status: 'cancelled',
  error: { class: storedErrorClass('Cancelled'), message: 'cancelled by application' },
} as const;

/**
 * Cancels the turn and, with `cascade`, every transitive child (spec §5.9), under the root
 * lock on the unfenced store: open executions become `interrupted`, every tool call gets its
 * one result, the status becomes `cancelled` and the claim token is cleared, so any late
 * write of the old owner raises LostClaim.
 */
export async function cancelTurn(
  runtime: Runtime,
  input: { turnId: string; descendants: CancelDescendants },
): Promise<{ status: string; cancelled: string[]; notice: TerminalNotice }> {
  const store = runtime.store;
  const target = await store.loadTurn(input.turnId);
  const root = await rootConversationId(store, target);
  const rowsToCancel = async (): Promise<TurnRecord[]> => {
    const rows: TurnRecord[] = [await store.loadTurn(target.id)];
    if (input.descendants === 'cascade') {
      const tree = await store.listTurns({ rootTurnId: target.rootTurnId });
      rows.push(...subtreeOf(tree, target.id).filter((row) => row.id !== target.id));
    }
    return rows.filter((row) => !TERMINAL_TURN_STATUSES.includes(row.status));
  };
  // The policy's word on each completion callback is asked before the transaction; a child
  // created meanwhile is asked about too, and the transaction runs again.
  const verdicts = new Map<string, CallbackVerdict>();
  let cancelled: TerminalWrite[] | null = null;
  while (cancelled === null) {
    for (const row of await rowsToCancel())
      if (!verdicts.has(row.id)) verdicts.set(row.id, await callbackVerdict(runtime, row));
    cancelled = await store.atomic(root, async () => {
      const rows = await rowsToCancel();
      if (rows.some((row) => !verdicts.has(row.id))) return null;
      const done: TerminalWrite[] = [];
      for (const row of rows) {
        const written = await writeTerminalRows(
          store,
          row.id,
          CANCELLED,
          'turn was cancelled',
          verdicts.get(row.id)!,
        );
        // Appended with this transaction; listeners hear of it after the commit.
        await emitInterrupted(runtime, written);
        done.push(written);
      }
      return done;
    });
  }
  const notices: TerminalNotice[] = [];
  for (const { turn, callback } of cancelled) {
    await runtime.emit(turn, 'turn.cancelled', { descendants: input.descendants });
    await emitCallback(runtime, turn, callback);
    notices.push(await terminalNotice(store, turn, callback.delivery));
  }
  // Run again after its worker died past the commit: whoever must hear of it hears again.
  const repeated = cancelled.length === 0 ? await repeatedNotice(runtime, target.id) : null;
  if (repeated) notices.push(repeated);
  return {
    status: (await store.loadTurn(target.id)).status,
    cancelled: cancelled.map(({ turn }) => turn.id),
    notice: mergeNotices(notices),
  };
}
