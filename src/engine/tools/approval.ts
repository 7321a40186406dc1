/**
 * A call whose tool `needsApproval` (TurnKit 0.7 approvals): asked once when first
 * dispatched, held `awaiting_approval` while the workflow waits holding nothing, then run or
 * given its one rejection when dispatched again with the person's decision.
 */
import { validateToolArguments } from '../../agents/tool.js';
import { nowIso } from '../../store/records.js';
import type { JsonObject, ToolExecutionRecord } from '../../store/types.js';
import { APPROVAL_TIMED_OUT, principalName } from '../../contract/control-request.js';
import type { ToolCallOutcome } from '../../contract/digests.js';
import type { ApprovalDecision } from '../../contract/activities.js';
import { turnEvent } from '../step/events.js';
import { contextOf, principalOf } from '../step/turn-state.js';
import type { ToolExecution } from './tool-execution.js';
import { errorDetails } from './tool-execution.js';
import { callHistory } from '../model/call-history.js';

/**
 * Asks the tool's `needsApproval` about this call, once, when it is first dispatched: with
 * the validated arguments (invalid ones fail later, unrun, needing no approval). If it throws,
 * the call fails with its message and the model reads it.
 */
export async function askApproval(
  run: ToolExecution,
): Promise<'hold' | 'run' | { error: string; details: JsonObject }> {
  const { tool, call, turn } = run;
  if (!tool?.needsApproval || call.arguments_error) return 'run';
  let args: unknown;
  try {
    args = await validateToolArguments(tool, call.arguments);
  } catch {
    return 'run';
  }
  try {
    const context = {
      principal: principalOf(turn),
      context: contextOf(turn),
      turn,
      toolCallId: call.id,
      history: () => callHistory(run.store, turn, call.id),
    };
    return (await tool.requiresApproval(args as never, context)) === true ? 'hold' : 'run';
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return {
      error: `needsApproval of ${tool.name} failed: ${message}`,
      details: errorDetails(error, { approval_check_failed: true }),
    };
  }
}

export function awaitingOutcome(run: ToolExecution, execution: ToolExecutionRecord): ToolCallOutcome {
  return {
    ...run.outcome(execution),
    awaitingApproval: true,
    approvalTimeoutMs: run.tool?.approvalTimeoutMs ?? null,
  };
}

/**
 * Where a decision leaves a call awaiting approval: `outcome`, settled (still undecided, it
 * keeps waiting; rejected by a person or the timeout, it failed unrun with "rejected by
 * <who>: <reason>"); `approved`, running now and to be run (a retry after a crash finds it
 * running, as any call); `closed`, closed meanwhile (steering, a cancel) with its own result.
 */
export type ApprovalStep =
  { outcome: ToolCallOutcome } | { approved: ToolExecutionRecord } | { closed: ToolExecutionRecord };

export async function decideApproval(
  run: ToolExecution,
  execution: ToolExecutionRecord,
  decision: ApprovalDecision | undefined,
): Promise<ApprovalStep> {
  if (!decision) return { outcome: awaitingOutcome(run, execution) };
  if (decision.decision === 'rejected') return { outcome: await reject(run, execution, decision) };
  const approved = await run.step.write(async (tx) => {
    const row = await tx.store.claimToolExecution(execution.id, {
      from: 'awaiting_approval',
      to: 'running',
      startedAt: nowIso(),
    });
    const { id, name } = run.call;
    if (row) tx.emit(turnEvent('tool_call.approved', { id, name, principal: decision.principal }));
    return row;
  });
  if (!approved) return { closed: await run.step.store.loadToolExecution(execution.id) };
  return { approved };
}

async function reject(
  run: ToolExecution,
  execution: ToolExecutionRecord,
  decision: ApprovalDecision,
): Promise<ToolCallOutcome> {
  const who = principalName(decision.principal);
  const message = decision.timedOut
    ? APPROVAL_TIMED_OUT
    : `rejected by ${who}${decision.reason ? `: ${decision.reason}` : ''}`;
  const rejected = turnEvent('tool_call.rejected', {
    id: run.call.id,
    name: run.call.name,
    principal: decision.principal,
    timed_out: decision.timedOut ?? false,
  });
  return run.outcome(
    await run.fail(
      execution,
      message,
      { rejected: true, ...(decision.timedOut ? { timed_out: true } : {}) },
      [rejected],
    ),
  );
}
