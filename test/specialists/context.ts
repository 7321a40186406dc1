/** A ToolContext for calling specialist tools directly, outside a turn. */
import type { ToolContext, ToolDefinition } from '../../src/agents/tool.js';
import { validateToolArguments } from '../../src/agents/tool.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { JsonObject, Store, ToolExecutionRecord, TurnRecord } from '../../src/store/types.js';

export async function toolContext(store: Store = new MemoryStore()): Promise<ToolContext> {
  const conversation = await store.createConversation({ agentName: 'tester' });
  const turn: TurnRecord = await store.createTurn({
    conversationId: conversation.id,
    agentName: 'tester',
    status: 'running',
  });
  const execution: ToolExecutionRecord = await store.createToolExecution({
    turnId: turn.id,
    toolCallId: 'call_1',
    toolName: 'tool',
    status: 'running',
  });
  return {
    idempotencyKey: `turnkit:tool:${execution.id}`,
    signal: new AbortController().signal,
    principal: null,
    context: { tenant: 'acme' },
    turn,
    execution,
    store,
    heartbeat: () => undefined,
  };
}

/** Validates like the tool runner, then executes. */
export async function call(tool: ToolDefinition, args: JsonObject, context?: ToolContext): Promise<unknown> {
  return tool.execute(validateToolArguments(tool, args), context ?? (await toolContext()));
}
