/**
 * The engine side of the coordination tools (spec §7.1–7.3). Each handler is re-run as is
 * on a retry or a resume: it finds the child it created, the delivery under its key, or the
 * wait edges it added, and never creates a second.
 */
import type { LaunchAgentTool } from '../../agents/coordination.js';
import type { ToolDefinition } from '../../agents/tool.js';
import { validateToolArguments } from '../../agents/tool.js';
import { RecordNotFound, ToolError } from '../../errors.js';
import { canonicalJson } from '../../store/records.js';
import type { JsonObject, Store, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import { addWaits } from '../../store/wait-graph.js';
import { childTurn } from './delegation.js';
import { isFinished, subAgentResult } from '../step/sub-agents.js';
import { sendMessage } from '../lane/send-message.js';
import type { Runtime } from '../runtime.js';
import { principalOf } from '../step/turn-state.js';

export type CoordinationOutcome =
  | { kind: 'done'; payload: JsonObject }
  | { kind: 'launched'; payload: JsonObject; child: TurnRecord }
  | { kind: 'sent'; payload: JsonObject; destinationConversationId: string }
  | { kind: 'waiting'; targets: string[] };

/** `launch_agent`: a detached child turn in its own conversation, optionally calling back. */
export async function launchAgent(
  runtime: Runtime,
  store: Store,
  turn: TurnRecord,
  tool: LaunchAgentTool,
  execution: ToolExecutionRecord,
  args: JsonObject,
): Promise<CoordinationOutcome> {
  const { agent_name: name, task, callback } = await validateToolArguments(tool, args);
  const subAgent = tool.agents.find((agent) => agent.name === name);
  if (!subAgent) throw new ToolError(`unknown sub-agent: ${name}`);
  if (!runtime.agents.has(subAgent.name)) {
    throw new ToolError(`sub-agent ${subAgent.name} is not registered with this worker's agent registry`);
  }
  const principal = principalOf(turn);
  await runtime.authorize('launch_agent', principal, {
    turn: turn.id,
    agent: subAgent.name,
    arguments: { task, ...(callback === undefined ? {} : { callback }) },
  });
  if (callback) {
    await runtime.authorize('callback', principal, {
      turn: turn.id,
      destination_conversation: turn.conversationId,
    });
  }
  const child = await childTurn(
    store,
    turn,
    subAgent,
    execution,
    task,
    principal,
    callback ? { callbackConversationId: turn.conversationId } : {},
  );
  return { kind: 'launched', payload: subAgentResult(child), child };
}

/** `send_message`: one delivery per execution, under the key `message:<executionId>`. */
export async function sendMessageCall(
  runtime: Runtime,
  store: Store,
  turn: TurnRecord,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  args: JsonObject,
): Promise<CoordinationOutcome> {
  const { conversation_id: destination, text } = (await validateToolArguments(tool, args)) as {
    conversation_id: string;
    text: string;
  };
  // As for `wait_for`: a conversation of another principal gets the same answer as one that
  // does not exist, so a model can neither post into it nor learn that it exists.
  const unknown = () => new ToolError(`unknown conversation: ${destination}`);
  const target = await store.loadConversation(destination).catch((error: unknown) => {
    throw error instanceof RecordNotFound ? unknown() : error;
  });
  if (canonicalJson(target.metadata['principal'] ?? null) !== canonicalJson(principalOf(turn)))
    throw unknown();
  try {
    const delivery = await sendMessage(runtime, store, {
      sourceConversationId: turn.conversationId,
      destinationConversationId: destination,
      text,
      key: `message:${execution.id}`,
      sourceTurnId: turn.id,
      principal: principalOf(turn),
    });
    return {
      kind: 'sent',
      destinationConversationId: destination,
      payload: {
        delivery_id: delivery.id,
        key: delivery.key,
        destination_conversation_id: delivery.destinationConversationId,
        status: delivery.deliveredAt ? 'delivered' : 'pending',
      },
    };
  } catch (error) {
    if (error instanceof RecordNotFound) throw unknown();
    throw error;
  }
}

/**
 * `wait_for`: adds the wait edges (cycle-checked in the graph transaction) and reports
 * `waiting` until every target is finished; then returns their results. Targets that do
 * not exist and targets of another principal get the same answer, so nothing leaks.
 */
export async function waitForCall(
  runtime: Runtime,
  store: Store,
  turn: TurnRecord,
  tool: ToolDefinition,
  args: JsonObject,
): Promise<CoordinationOutcome> {
  const { turn_ids: ids } = (await validateToolArguments(tool, args)) as { turn_ids: string[] };
  const unique = [...new Set(ids)];
  const principal = canonicalJson(principalOf(turn));
  const targets: TurnRecord[] = [];
  for (const id of unique) {
    let target: TurnRecord;
    try {
      target = await store.loadTurn(id);
    } catch (error) {
      if (error instanceof RecordNotFound) throw new ToolError(`unknown turn: ${id}`);
      throw error;
    }
    if (target.id !== turn.id && canonicalJson(principalOf(target)) !== principal)
      throw new ToolError(`unknown turn: ${id}`);
    targets.push(target);
  }
  await runtime.authorize('wait', principalOf(turn), { turn: turn.id, targets: unique });
  await addWaits(store, { turnId: turn.id, targetTurnIds: unique, transition: false });
  const fresh = await Promise.all(unique.map((id) => store.loadTurn(id)));
  const open = fresh.filter((target) => !isFinished(target));
  if (open.length > 0) return { kind: 'waiting', targets: open.map((target) => target.id) };
  return { kind: 'done', payload: { results: fresh.map(subAgentResult) } };
}
