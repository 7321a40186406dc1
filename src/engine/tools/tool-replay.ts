/**
 * Tool replay (decision 48): a turn built with `toolReplay` answers its tool calls with the
 * results a recorded turn's executions got, so an evaluation of a changed prompt or model
 * causes no side effects. The recorded rows are read here, in the tool activity: nothing of
 * the recorded run travels through Temporal history.
 */
import { canonicalJson } from '../../store/records.js';
import type { JsonObject, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import type { ToolDefinition } from '../../agents/tool.js';
import { TOOL_REPLAY_OPTION } from '../step/turn-options.js';
import type { CallView, Decided } from './verdict.js';
import { failWith } from './verdict.js';

/** The recorded turn this turn replays its tools from, if it was built with `toolReplay`. */
export function toolReplaySource(turn: TurnRecord): string | null {
  const option = turn.options[TOOL_REPLAY_OPTION];
  if (!option || typeof option !== 'object' || Array.isArray(option)) return null;
  const turnId = (option as JsonObject)['turn_id'];
  return typeof turnId === 'string' && turnId !== '' ? turnId : null;
}

const sameCall = (a: Pick<ToolExecutionRecord, 'toolName' | 'arguments'>, name: string, args: string) =>
  a.toolName === name && canonicalJson(a.arguments) === args;

/**
 * Answers the call from the recorded run: the n-th call with this name and these arguments
 * gets the n-th recorded one's outcome (completed with its result, or failed with its error).
 * A call nobody recorded fails with `replay_divergence`, which the evaluation reports; the
 * engine's coordination tools (messages, launched agents, waits) are never replayed, since
 * their recorded results name rows of the recorded run. A decision: it reads, the pipeline
 * closes the call with what it answers.
 */
export async function replayVerdict(
  view: CallView,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  sourceTurnId: string,
): Promise<Decided> {
  if (tool.kind !== 'ordinary' && tool.kind !== 'subAgent')
    return failWith(`replay: ${tool.name} is a coordination tool, which replay does not run`, {
      class: 'ToolError',
      replay_divergence: true,
    });
  const args = canonicalJson(view.call.arguments);
  const recorded = (await view.executionsOf(sourceTurnId, tool.name)).filter(
    (row) => sameCall(row, tool.name, args) && (row.status === 'completed' || row.status === 'failed'),
  );
  // Ids sort in creation order (decision 9): the calls of this turn made before this one.
  const earlier = (await view.executionsOf(view.turn.id, tool.name)).filter(
    (row) => row.id < execution.id && sameCall(row, tool.name, args),
  ).length;
  const match = recorded[earlier];
  if (!match)
    return failWith(
      recorded.length === 0
        ? `replay divergence: the recorded run has no call of ${tool.name} with these arguments`
        : `replay divergence: the recorded run called ${tool.name} with these arguments ${recorded.length} time(s), this is call ${earlier + 1}`,
      { class: 'ToolError', replay_divergence: true, source_turn_id: sourceTurnId },
    );
  if (match.status === 'failed')
    return failWith(match.error?.message ?? 'failed', {
      ...((match.error?.details as JsonObject | undefined) ?? {}),
      replayed_from: match.id,
    });
  const result =
    match.result && typeof match.result === 'object' && !Array.isArray(match.result)
      ? (match.result as JsonObject)
      : { value: match.result };
  return { kind: 'close', closing: { status: 'completed', payload: result } };
}
