/**
 * A call's first dispatch, before its row exists (decision 85, step 5): whether it can run,
 * then the tool policy and approval; and whether anything before the block that creates the
 * row depends on the row (decision 89).
 */
import type { ToolCallInput } from '../../contract/activities.js';
import { askApproval } from './approval.js';
import { spendVerdict } from './budget-completion.js';
import { ENGINE_RUN_KINDS } from './engine-run-call.js';
import type { ToolExecution } from './tool-execution.js';
import { unrunnable } from './tool-failure.js';
import { askToolPolicy } from './tool-policy.js';
import { toolReplaySource } from './tool-replay.js';
import type { Closing, Verdict } from './verdict.js';

/**
 * Whether nothing before the block that creates the call's row depends on whether it has one
 * (decision 89): no budget completion decides it, and its first dispatch asks no one (no tool
 * policy, no approval; a replayed call asks neither). The row is then first looked for in that
 * block, under the lock, and a retry that finds it there decides it as before.
 */
export function asksNoOne(run: ToolExecution): boolean {
  if (spendVerdict(run, undefined).kind !== 'run') return false;
  if (unrunnable(run).kind !== 'run' || toolReplaySource(run.turn) !== null) return true;
  return !run.agent.toolPolicy && !run.tool?.needsApproval;
}

/**
 * Step 5 on a call's first dispatch: whether it can run, then the policy, then approval. Asked
 * only while the call has no row: the row records the decision, a retry finds it.
 */
export async function firstDispatch(run: ToolExecution, input: ToolCallInput): Promise<Verdict> {
  const runnable = unrunnable(run);
  if (runnable.kind !== 'run' || toolReplaySource(run.turn) !== null) return runnable;
  const policy = await askToolPolicy(run);
  return policy.kind !== 'run' ? policy : askApproval(run, input.approvals);
}

/** The status a new row starts in: held, left to the engine (pending), or running. */
export function rowStatus(run: ToolExecution, verdict: Verdict): 'awaiting_approval' | 'pending' | 'running' {
  if (verdict.kind === 'hold') return 'awaiting_approval';
  return ENGINE_RUN_KINDS.has(run.tool?.kind ?? 'ordinary') ? 'pending' : 'running';
}

export const closingOf = (verdict: Verdict): { closing?: Closing } =>
  verdict.kind === 'close' ? { closing: verdict.closing } : {};
