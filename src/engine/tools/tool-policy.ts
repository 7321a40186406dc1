/**
 * The agent's `toolPolicy` (TurnKit's later `tool_policy`, decision 38): asked once per call,
 * before any approval and before the call runs. A block is stored in the transaction that
 * creates the call's execution row, with the call's one result and its `tool_policy_blocked`
 * event; a retried activity finds the row and never asks the policy again.
 */
import type { ToolExecutionRecord } from '../../store/types.js';
import { turnEvent } from '../step/events.js';
import type { TurnTx } from '../step/turn-step.js';
import { contextOf, principalOf } from '../step/turn-state.js';
import { callHistory } from '../model/call-history.js';
import type { ToolExecution } from './tool-execution.js';

/** The policy's answer as the runner acts on it: a block carries what the model will read. */
export type PolicyVerdict = { block: false } | { block: true; reason: string; error?: string };

export const ALLOWED: PolicyVerdict = { block: false };

/**
 * Asks the policy about this call (outside any transaction: it is the application's code).
 * A policy that throws or answers anything but `'allow'` or `{ block: reason }` blocks the
 * call: a broken guard must not let a call through, and one call is all it costs the turn.
 * What went wrong goes to the event and the log; the model reads only that it was blocked.
 */
export async function askToolPolicy(run: ToolExecution): Promise<PolicyVerdict> {
  const policy = run.agent.toolPolicy;
  const { tool, call, turn, agent } = run;
  if (!policy || !tool || call.arguments_error) return ALLOWED;
  let decision: unknown;
  try {
    decision = await policy(
      {
        id: call.id,
        name: call.name,
        arguments: structuredClone(call.arguments),
        kind: tool.kind,
        readOnly: tool.readOnly,
      },
      {
        agent: agent.name,
        principal: principalOf(turn),
        context: contextOf(turn),
        turn: structuredClone(turn),
        history: () => callHistory(run.store, turn, call.id),
      },
    );
  } catch (error) {
    return broken(run, `it threw: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (decision === 'allow') return ALLOWED;
  const reason = (decision as { block?: unknown } | null)?.block;
  if (typeof reason === 'string') return { block: true, reason };
  return broken(run, `it returned ${describe(decision)}, not 'allow' or { block: reason }`);
}

function broken(run: ToolExecution, error: string): PolicyVerdict {
  run.runtime.logger.warn(`turnkit: the tool policy of ${run.agent.name} blocked ${run.call.name}: ${error}`);
  return { block: true, reason: 'the tool policy could not decide', error };
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  try {
    return JSON.stringify(value).slice(0, 200);
  } catch {
    return typeof value;
  }
}

/** The message a blocked call's one result carries. */
function blockedMessage(reason: string): string {
  return reason.trim() === '' ? 'blocked by policy' : `blocked by policy: ${reason}`;
}

/**
 * In the block that creates the call's row: the row fails with "blocked by policy: <reason>"
 * (its one result), and `tool_policy_blocked` is written in the same transaction.
 */
export async function closeBlocked(
  tx: TurnTx,
  run: ToolExecution,
  row: ToolExecutionRecord,
  verdict: Extract<PolicyVerdict, { block: true }>,
): Promise<ToolExecutionRecord> {
  const { id, name } = run.call;
  tx.record(
    turnEvent('tool_policy_blocked', {
      id,
      name,
      reason: verdict.reason,
      principal: principalOf(run.turn),
      ...(verdict.error ? { policy_error: verdict.error } : {}),
    }),
  );
  const failed = { message: blockedMessage(verdict.reason), details: { policy_blocked: true } };
  return (await run.close(tx, row, 'failed', failed)) ?? row;
}
