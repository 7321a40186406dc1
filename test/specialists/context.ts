/** A ToolContext for calling specialist tools directly, outside a turn. */
import type { ToolContext, ToolDefinition } from '../../src/agents/tool.js';
import { validateToolArguments } from '../../src/agents/tool.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { checkTreeSpend } from '../../src/engine/step/charge.js';
import { addUsage, costFromUsage } from '../../src/models/cost.js';
import { DEFAULT_LIMITS } from '../../src/agents/agent.js';
import type { CostConfig } from '../../src/models/cost.js';
import type {
  EventRecord,
  JsonObject,
  Store,
  ToolExecutionRecord,
  TurnRecord,
} from '../../src/store/types.js';

/** Events a direct-call context was asked to emit, by turn id. */
export const emitted: Pick<EventRecord, 'turnId' | 'type' | 'payload'>[] = [];

/**
 * Outside a runner there is no tools phase to close, so a message asked for after the results
 * is appended at once; usage goes through `cost` like the runtime's.
 */
export async function toolContext(
  store: Store = new MemoryStore(),
  cost: CostConfig = {},
): Promise<ToolContext> {
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
    recordUsage: async (usage, model) => {
      const charged = costFromUsage(usage, model, cost);
      const fresh = await store.loadTurn(turn.id);
      await store.updateTurn(turn.id, {
        usage: addUsage(fresh.usage, usage, charged),
        cost: (fresh.cost ?? 0) + (charged.total ?? 0),
      });
      return charged.total;
    },
    checkSpend: () => checkTreeSpend(store, turn.id, DEFAULT_LIMITS),
    appendAfterResults: async (message) =>
      (await store.appendMessage({ ...message, conversationId: conversation.id, turnId: turn.id })).id,
    emit: async (type, payload) => {
      emitted.push({ turnId: turn.id, type, payload });
    },
    history: async () => [],
  };
}

/** Validates like the tool runner, then executes. */
export async function call(tool: ToolDefinition, args: JsonObject, context?: ToolContext): Promise<unknown> {
  return tool.execute(await validateToolArguments(tool, args), context ?? (await toolContext()));
}
