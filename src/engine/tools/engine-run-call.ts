/**
 * Calls the engine runs itself instead of a tool's `execute`: a sub-agent (its child turn) and
 * the coordination tools. Their rows start `pending` and never take the running claim; what
 * the workflow must do next (await a child, start one, wake a lane) rides on the outcome.
 */
import { isLaunchAgentTool } from '../../agents/coordination.js';
import type { ToolDefinition } from '../../agents/tool.js';
import { ToolError } from '../../errors.js';
import type { JsonObject, ToolExecutionRecord } from '../../store/types.js';
import { TERMINAL_TURN_STATUSES } from '../../contract/turn-statuses.js';
import type { ToolCallOutcome } from '../../contract/digests.js';
import type { CoordinationOutcome } from './coordination.js';
import { launchAgent, sendMessageCall, waitForCall } from './coordination.js';
import { delegate } from './delegation.js';
import { isFinished, subAgentResult } from '../step/sub-agents.js';
import type { ToolExecution } from './tool-execution.js';

/** Tool kinds the engine runs itself. */
export const ENGINE_RUN_KINDS = new Set(['subAgent', 'launchAgent', 'waitFor', 'sendMessage']);

/**
 * What an engine-run call came to: the result that closes it (none while the workflow awaits
 * a child or a wait), and what the workflow must do next.
 */
export interface EngineRun {
  result?: JsonObject;
  report: Partial<ToolCallOutcome>;
}

/** A sub-agent call: its child turn is created (or found); the workflow runs and awaits it. */
export async function delegateCall(
  run: ToolExecution,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
): Promise<EngineRun> {
  const child = await delegate(run.runtime, run.store, run.turn, tool, execution, run.call.arguments);
  if (isFinished(child)) return { result: subAgentResult(child), report: {} };
  return { report: { waiting: true, childTurnId: child.id, childConversationId: child.conversationId } };
}

/** launch_agent, send_message, wait_for. */
export async function coordinationCall(
  run: ToolExecution,
  execution: ToolExecutionRecord,
): Promise<EngineRun> {
  const outcome = await coordinate(run, execution);
  if (outcome.kind === 'waiting') return { report: { waiting: true, waitTargets: outcome.targets } };
  if (outcome.kind === 'launched') {
    const { child } = outcome;
    const launched = { turnId: child.id, agent: child.agentName, conversationId: child.conversationId };
    return { result: outcome.payload, report: { launched } };
  }
  if (outcome.kind === 'sent')
    return { result: outcome.payload, report: { wakeLanes: [outcome.destinationConversationId] } };
  return { result: outcome.payload, report: {} };
}

/** Runs a coordination tool (launch_agent, send_message, wait_for) for this execution. */
function coordinate(run: ToolExecution, execution: ToolExecutionRecord): Promise<CoordinationOutcome> {
  const { runtime, store, turn, tool, call } = run;
  if (tool && isLaunchAgentTool(tool))
    return launchAgent(runtime, store, turn, tool, execution, call.arguments);
  if (tool?.kind === 'sendMessage')
    return sendMessageCall(runtime, store, turn, tool, execution, call.arguments);
  if (tool?.kind === 'waitFor') return waitForCall(runtime, store, turn, tool, call.arguments);
  throw new ToolError(`${call.name}: this ${tool?.kind ?? 'unknown'} tool cannot run here`);
}

/**
 * What a coordination call's workflow acts on, reported again by the retry of an attempt
 * that committed and died before it reported (issue 27): the workflow wakes a `send_message`
 * destination's lane, and starts a `launch_agent` child, only from the outcome. A second wake
 * is harmless; a child still open is reported again (a second start of its running workflow
 * is refused by Temporal and ignored), one that ended is not.
 */
export async function reportedAgain(
  run: ToolExecution,
  existing: ToolExecutionRecord,
): Promise<Pick<ToolCallOutcome, 'wakeLanes' | 'launched'>> {
  if (!run.tool || existing.status !== 'completed') return {};
  const result = (existing.result ?? {}) as JsonObject;
  if (run.tool.kind === 'sendMessage' && typeof result['destination_conversation_id'] === 'string')
    return { wakeLanes: [result['destination_conversation_id']] };
  if (isLaunchAgentTool(run.tool) && typeof result['turn_id'] === 'string') {
    // A child that already ended had its workflow: starting one again would run it twice.
    const child = await run.store.loadTurn(result['turn_id']);
    if (TERMINAL_TURN_STATUSES.includes(child.status)) return {};
    return { launched: { turnId: child.id, agent: child.agentName, conversationId: child.conversationId } };
  }
  return {};
}
