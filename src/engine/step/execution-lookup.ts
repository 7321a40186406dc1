import type { Store, ToolExecutionRecord } from '../../store/types.js';

// A long turn holds thousands of tool executions: each step reads only the ones it names, so
// its cost stays that of the step, not of the turn (decision 32).

/** The turn's execution of one tool call, if any. */
export async function findToolExecution(
  store: Store,
  turnId: string,
  toolCallId: string,
): Promise<ToolExecutionRecord | undefined> {
  const [execution] = await store.listToolExecutions({ turnId, toolCallIds: [toolCallId] });
  return execution;
}

/** The turn's executions of the given calls (those that have one), in creation order. */
export function executionsOfCalls(
  store: Store,
  turnId: string,
  calls: readonly { id: string }[],
): Promise<ToolExecutionRecord[]> {
  return store.listToolExecutions({ turnId, toolCallIds: calls.map((call) => call.id) });
}
