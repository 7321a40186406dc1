/**
 * What a parent turn reads of a sub-agent's turn: whether it ended, and its result. The
 * claim (a parent resumed after its children), the tools phase (a child found finished on
 * re-dispatch) and the callback all read a child this way.
 */
import { TERMINAL_TURN_STATUSES } from '../../store/types.js';
import type { JsonObject, TurnRecord } from '../../store/types.js';

/** What a parent reads of a child turn (TurnKit's SubAgentTool.result): nil keys dropped. */
export function subAgentResult(child: TurnRecord): JsonObject {
  const result: JsonObject = {
    conversation_id: child.conversationId,
    turn_id: child.id,
    status: child.status,
    result: child.outputText,
  };
  if (child.outputData !== null && child.outputData !== undefined) result['output_data'] = child.outputData;
  if (child.error) result['error'] = child.error;
  if (result['result'] === null) delete result['result'];
  return result;
}

export function isFinished(turn: TurnRecord): boolean {
  return TERMINAL_TURN_STATUSES.includes(turn.status);
}
