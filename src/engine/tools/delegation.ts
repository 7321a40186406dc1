import type { Agent } from '../../agents/agent.js';
import type { ToolDefinition } from '../../agents/tool.js';
import { validateToolArguments } from '../../agents/tool.js';
import { newId } from '../../ids.js';
import { rootConversationId } from '../../store/tree.js';
import type { Json, JsonObject, Store, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import { addWaits } from '../../store/wait-graph.js';
import { buildTurn } from '../lane/build-turn.js';
import type { Runtime } from '../runtime.js';
import { principalOf } from '../step/turn-state.js';

/**
 * Creates (or finds, on re-dispatch) the child turn of a sub-agent call, in its own
 * conversation that sees only the task, and the wait edge parent → child, in one graph
 * transaction: a crash or retry never creates a second child (BG-11). The child workflow
 * is started by the parent's workflow.
 */
export async function delegate(
  runtime: Runtime,
  store: Store,
  parent: TurnRecord,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  args: JsonObject,
): Promise<TurnRecord> {
  const { task } = (await validateToolArguments(tool, args)) as { task: string };
  const principal = principalOf(await store.loadTurn(parent.id));
  const subAgent: Agent = runtime.agents.resolve(tool.name);
  await runtime.authorize('launch_agent', principal, {
    turn: parent.id,
    agent: subAgent.name,
    arguments: { task },
  });
  // `wait` is authorized with the real child id (spec §4.8: `Background.wait`), before the graph
  // transaction: the id is chosen first (the existing child's, after a crash or retry), and a
  // denial writes neither the child nor the edge.
  let childId = (await store.listTurns({ parentToolExecutionId: execution.id }))[0]?.id ?? newId('turn');
  for (;;) {
    await runtime.authorize('wait', principal, { turn: parent.id, targets: [childId] });
    const authorized = childId;
    const child = await store.atomicGraph(async () => {
      const child = await childTurn(store, parent, subAgent, execution, task, principal, { id: authorized });
      // Another attempt created the child meanwhile, under another id: authorize that one.
      if (child.id !== authorized) return null;
      await addWaits(store, { turnId: parent.id, targetTurnIds: [child.id], transition: false });
      return child;
    });
    if (child) return child;
    childId = (await store.listTurns({ parentToolExecutionId: execution.id }))[0]!.id;
  }
}

/**
 * The child turn of a delegating execution: the one already created for it (a crash or a
 * retry never creates a second), or a new one in a new conversation that sees only the task,
 * with the lineage and the parent's principal. Under the root lock.
 */
export async function childTurn(
  store: Store,
  parent: TurnRecord,
  subAgent: Agent,
  execution: ToolExecutionRecord,
  task: string,
  principal: Json,
  options: { callbackConversationId?: string; id?: string } = {},
): Promise<TurnRecord> {
  const root = await rootConversationId(store, parent);
  return store.atomic(root, async () => {
    const existing = (await store.listTurns({ parentToolExecutionId: execution.id }))[0];
    if (existing) return existing;
    const lineage: JsonObject = {
      parent_conversation_id: parent.conversationId,
      parent_turn_id: parent.id,
      parent_tool_execution_id: execution.id,
      principal,
    };
    const conversation = await store.createConversation({
      agentName: subAgent.name,
      model: subAgent.model ?? null,
      metadata: lineage,
    });
    const message = await store.appendMessage({
      conversationId: conversation.id,
      role: 'user',
      content: task,
      metadata: lineage,
    });
    return buildTurn(store, subAgent, conversation.id, message, {
      ...(options.id ? { id: options.id } : {}),
      ...(options.callbackConversationId ? { callbackConversationId: options.callbackConversationId } : {}),
      principal,
      context: {},
      lineage: { parent, execution },
    });
  });
}
