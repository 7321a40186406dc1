/**
 * The agent's `toolPolicy` (TurnKit's later `tool_policy`, decision 38): asked once per call,
 * before any approval and before the call runs. A block is stored in the transaction that
 * creates the call's execution row, with the call's one result and its `tool_policy_blocked`
 * event; a retried activity finds the row and never asks the policy again. A decision only:
 * the pipeline (`tool-call.ts`) writes the block.
 */
import { turnEvent } from '../step/events.js';
import { contextOf, principalOf } from '../step/turn-state.js';
import type { CallView, Verdict } from './verdict.js';
import { failWith, RUN } from './verdict.js';

/**
 * Asks the policy about this call (outside any transaction: it is the application's code).
 * A policy that throws or answers anything but `'allow'` or `{ block: reason }` blocks the
 * call: a broken guard must not let a call through, and one call is all it costs the turn.
 * What went wrong goes to the event and the log; the model reads only that it was blocked.
 */
export async function askToolPolicy(view: CallView): Promise<Verdict> {
  const policy = view.agent.toolPolicy;
  const { tool, call, turn, agent } = view;
  if (!policy || !tool || call.arguments_error) return RUN;
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
        history: () => view.history(),
      },
    );
  } catch (error) {
    return broken(view, `it threw: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (decision === 'allow') return RUN;
  const reason = (decision as { block?: unknown } | null)?.block;
  if (typeof reason === 'string') return blocked(view, reason);
  return broken(view, `it returned ${describe(decision)}, not 'allow' or { block: reason }`);
}

function broken(view: CallView, error: string): Verdict {
  view.warn(`turnkit: the tool policy of ${view.agent.name} blocked ${view.call.name}: ${error}`);
  return blocked(view, 'the tool policy could not decide', error);
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
 * The row fails with "blocked by policy: <reason>" (its one result), and `tool_policy_blocked`
 * commits in the same transaction.
 */
function blocked(view: CallView, reason: string, error?: string): Verdict {
  const { id, name } = view.call;
  const event = turnEvent('tool_policy_blocked', {
    id,
    name,
    reason,
    principal: principalOf(view.turn),
    ...(error ? { policy_error: error } : {}),
  });
  return failWith(blockedMessage(reason), { policy_blocked: true }, { events: [event] });
}
