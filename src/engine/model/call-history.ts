/**
 * What a tool call was made from (`ToolContext.history`, the AI SDK's `messages`): the turn's
 * history projected as the model read it, up to the response that holds the call.
 */
import type { ModelMessage } from '../../models/types.js';
import type { Store, TurnRecord } from '../../store/types.js';
import { modelHistory, projectMessages } from './model-request.js';

export async function callHistory(
  store: Store,
  turn: TurnRecord,
  toolCallId: string,
): Promise<ModelMessage[]> {
  const history = await modelHistory(store, turn);
  const response = history.findIndex((message) =>
    message.content.some((part) => part.type === 'tool_call' && part.id === toolCallId),
  );
  return projectMessages(response < 0 ? history : history.slice(0, response));
}
