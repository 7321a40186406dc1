import { AuthorizationError, storedErrorClass } from '../../errors.js';
import { TERMINAL_TURN_STATUSES } from '../../store/types.js';
import type { TurnRecord } from '../../store/types.js';
import { rootConversationId, subtreeOf } from '../../store/tree.js';
import type { CancelDescendants, CancelRequest } from '../../contract/cancel-request.js';
import { signedCancelParams } from '../../contract/cancel-request.js';
import type { Runtime } from '../runtime.js';
import { verifyOnce } from '../controls/signature-use.js';
import type { CallbackVerdict } from '../lane/lane-step.js';
import { callbackVerdict, completionCallback, mergeNotices } from '../lane/lane-step.js';
import {
  emitCallback,
  interruptToolExecutions,
  repairTranscript,
  repeatedNotice,
  terminalNotice,
} from './terminal-write.js';
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
  let cancelled: { row: TurnRecord; callback: Awaited<ReturnType<typeof completionCallback>> }[] | null =
    null;
  while (cancelled === null) {
    for (const row of await rowsToCancel())
      if (!verdicts.has(row.id)) verdicts.set(row.id, await callbackVerdict(runtime, row));
    cancelled = await store.atomic(root, async () => {
      const rows = await rowsToCancel();
      if (rows.some((row) => !verdicts.has(row.id))) return null;
      const done: { row: TurnRecord; callback: Awaited<ReturnType<typeof completionCallback>> }[] = [];
      for (const row of rows) {
        for (const execution of await interruptToolExecutions(store, row)) {
          // Appended with this transaction; listeners hear of it after the commit.
          await runtime.emit(row, 'tool_call.interrupted', {
            id: execution.toolCallId,
            name: execution.toolName,
            tool_execution_id: execution.id,
          });
        }
        await repairTranscript(store, row, 'turn was cancelled');
        const attrs = {
          status: 'cancelled' as const,
          claimToken: null,
          completedAt: new Date().toISOString(),
          error: { class: storedErrorClass('Cancelled'), message: 'cancelled by application' },
        };
        const fresh = await store.loadTurn(row.id);
        const callback = await completionCallback(store, { ...fresh, ...attrs }, verdicts.get(row.id)!);
        const options = callback.denied ? { ...fresh.options, callback_denied: callback.denied } : undefined;
        done.push({
          row: await store.updateTurn(row.id, { ...attrs, ...(options ? { options } : {}) }),
          callback,
        });
      }
      return done;
    });
  }
  const notices: TerminalNotice[] = [];
  for (const { row, callback } of cancelled) {
    await runtime.emit(row, 'turn.cancelled', { descendants: input.descendants });
    await emitCallback(runtime, row, callback);
    notices.push(await terminalNotice(store, row, callback.delivery));
  }
  // Run again after its worker died past the commit: whoever must hear of it hears again.
  const repeated = cancelled.length === 0 ? await repeatedNotice(runtime, target.id) : null;
  if (repeated) notices.push(repeated);
  return {
    status: (await store.loadTurn(target.id)).status,
    cancelled: cancelled.map(({ row }) => row.id),
    notice: mergeNotices(notices),
  };
}
