/**
 * The effect of an ordinary tool call: its `execute`, in its telemetry span, with the
 * `ToolContext` it gets. What it returns or throws goes back to the pipeline (`tool-call.ts`).
 */
import type { ToolContext, ToolDefinition } from '../../agents/tool.js';
import { normalizeToolPayload, validateToolArguments } from '../../agents/tool.js';
import { newId } from '../../ids.js';
import type { Json, JsonObject, ToolExecutionRecord } from '../../store/types.js';
import { exhaustsAtLimit } from '../step/budget.js';
import { chargeCall, checkTreeSpend } from '../step/charge.js';
import { contextOf } from '../step/turn-state.js';
import { toolSpanAttributes } from '../telemetry/genai-spans.js';
import type { ToolCallHooks, ToolExecution } from './tool-execution.js';

/** Runs the tool in its `execute_tool` span: its normalized result. */
export async function runTool(
  run: ToolExecution,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  principal: Json,
  hooks: ToolCallHooks,
): Promise<JsonObject> {
  const telemetry = run.runtime.telemetry;
  const attributes = toolSpanAttributes(telemetry, run.turn, tool, execution, run.call.arguments);
  return telemetry.span(`execute_tool ${tool.name}`, attributes, async (span) => {
    const args = await validateToolArguments(tool, run.call.arguments);
    const result = normalizeToolPayload(
      await tool.execute(args, toolContext(run, execution, principal, hooks)),
    );
    if (telemetry.recordContent) span.set({ 'gen_ai.tool.call.result': JSON.stringify(result) });
    return result;
  });
}

/** What the tool's `execute` gets besides its arguments. */
function toolContext(
  run: ToolExecution,
  execution: ToolExecutionRecord,
  principal: Json,
  hooks: ToolCallHooks,
): ToolContext {
  return {
    idempotencyKey: `turnkit:tool:${execution.id}`,
    signal: hooks.signal,
    principal,
    context: contextOf(run.turn),
    turn: run.turn,
    execution,
    store: run.store,
    heartbeat: hooks.heartbeat,
    // Charged in a fenced block of the step: a tool of a turn whose claim moved on charges nothing.
    recordUsage: async (usage, model) =>
      (await run.step.write(async (tx) => chargeCall(tx, run.runtime, usage, model))).total,
    checkSpend: () => checkTreeSpend(run.store, run.turn.id, run.agent.limits, exhaustsAtLimit(run.agent)),
    appendAfterResults: async (message) => {
      const id = newId('msg');
      run.afterResults.push({ ...(JSON.parse(JSON.stringify(message)) as JsonObject), id });
      return id;
    },
    emit: (type, payload) => run.runtime.emit(run.turn, type, payload),
    history: () => run.history(),
  };
}
