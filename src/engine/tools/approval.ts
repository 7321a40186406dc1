/**
 * A call whose tool `needsApproval` (TurnKit 0.7 approvals): asked once when first
 * dispatched, held `awaiting_approval` while the workflow waits holding nothing, then run or
 * given its one rejection when dispatched again with the person's decision. Decisions only:
 * the pipeline (`tool-call.ts`) writes what they answer.
 */
import { validateToolArguments } from '../../agents/tool.js';
import { APPROVAL_TIMED_OUT, principalName } from '../../contract/control-request.js';
import type { ApprovalDecision } from '../../contract/activities.js';
import { turnEvent } from '../step/events.js';
import { contextOf, principalOf } from '../step/turn-state.js';
import type { CallView, Verdict } from './verdict.js';
import { errorDetails, failWith, RUN } from './verdict.js';

const HOLD: Verdict = { kind: 'hold' };

/**
 * Asks the tool's `needsApproval` about this call, once, when it is first dispatched: with
 * the validated arguments (invalid ones fail later, unrun, needing no approval). If it throws,
 * the call fails with its message and the model reads it. A call that needs approval in a
 * turn that cannot wait for one (`approvals: false`) fails unrun.
 */
export async function askApproval(view: CallView, approvals: boolean | undefined): Promise<Verdict> {
  const { tool, call, turn } = view;
  if (!tool?.needsApproval || call.arguments_error) return RUN;
  let args: unknown;
  try {
    args = await validateToolArguments(tool, call.arguments);
  } catch {
    return RUN;
  }
  let needed: boolean;
  try {
    const context = {
      principal: principalOf(turn),
      context: contextOf(turn),
      turn,
      toolCallId: call.id,
      history: () => view.history(),
    };
    needed = (await tool.requiresApproval(args as never, context)) === true;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return failWith(
      `needsApproval of ${tool.name} failed: ${message}`,
      errorDetails(error, { approval_check_failed: true }),
    );
  }
  if (!needed) return RUN;
  if (approvals === false)
    return failWith('not executed: this call needs approval, which this turn cannot wait for');
  return HOLD;
}

/**
 * What a decision does to a call awaiting approval: none yet, it keeps waiting; rejected by a
 * person or the timeout, it fails unrun with "rejected by <who>: <reason>"; approved, it runs
 * (`tool_call.approved` goes out with its start).
 */
export function decideApproval(view: CallView, decision: ApprovalDecision | undefined): Verdict {
  const { id, name } = view.call;
  if (!decision) return HOLD;
  if (decision.decision !== 'rejected')
    return {
      kind: 'run',
      events: [turnEvent('tool_call.approved', { id, name, principal: decision.principal })],
    };
  const who = principalName(decision.principal);
  const message = decision.timedOut
    ? APPROVAL_TIMED_OUT
    : `rejected by ${who}${decision.reason ? `: ${decision.reason}` : ''}`;
  const rejected = turnEvent('tool_call.rejected', {
    id,
    name,
    principal: decision.principal,
    timed_out: decision.timedOut ?? false,
  });
  return failWith(
    message,
    { rejected: true, ...(decision.timedOut ? { timed_out: true } : {}) },
    { events: [rejected] },
  );
}
