/**
 * Span attributes of the OpenTelemetry GenAI semantic conventions for TurnKit's model calls
 * (`chat <model>`) and tool calls (`execute_tool <tool>`), plus turn id and cost. Content
 * (prompts, completions, tool arguments and results) only when `recordContent` is set.
 */
import type { Attributes } from '@opentelemetry/api';
import type { ToolDefinition } from '../../agents/tool.js';
import type { ModelClient, ModelRequest, ModelResult } from '../../models/types.js';
import type { JsonObject, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import type { Telemetry } from './tracing.js';

/** What every TurnKit span says about its turn. */
export function turnAttributes(turn: Pick<TurnRecord, 'id' | 'conversationId' | 'agentName'>): Attributes {
  return {
    'turnkit.turn.id': turn.id,
    'gen_ai.conversation.id': turn.conversationId,
    'gen_ai.agent.name': turn.agentName,
  };
}

export function modelSpanStart(turn: TurnRecord, step: string): Attributes {
  return { 'gen_ai.operation.name': 'chat', ...turnAttributes(turn), 'turnkit.model.step': step };
}

/** The provider: the prefix of a `provider:model` id, else the model client's name. */
function providerOf(client: ModelClient, model: string): string {
  const index = model.indexOf(':');
  if (index > 0) return model.slice(0, index);
  const name = (client as { name?: unknown }).name;
  return typeof name === 'string' ? name : 'unknown';
}

export function modelSpanEnd(
  telemetry: Telemetry,
  client: ModelClient,
  request: ModelRequest,
  result: ModelResult,
): Attributes {
  const provider = providerOf(client, request.model);
  const usage = result.usage;
  const attributes: Attributes = {
    'gen_ai.provider.name': provider,
    'gen_ai.system': provider,
    'gen_ai.request.model': request.model,
    'gen_ai.response.model': result.model ?? request.model,
    'gen_ai.usage.input_tokens':
      (usage?.inputTokens ?? 0) + (usage?.cachedTokens ?? 0) + (usage?.cacheWriteTokens ?? 0),
    'gen_ai.usage.output_tokens': usage?.outputTokens ?? 0,
    ...(result.finishReason ? { 'gen_ai.response.finish_reasons': [result.finishReason] } : {}),
    ...(result.providerMessageId ? { 'gen_ai.response.id': result.providerMessageId } : {}),
    ...(request.temperature !== undefined ? { 'gen_ai.request.temperature': request.temperature } : {}),
  };
  if (telemetry.recordContent) {
    attributes['gen_ai.system_instructions'] = request.instructions;
    attributes['gen_ai.input.messages'] = JSON.stringify(request.messages);
    attributes['gen_ai.output.messages'] = JSON.stringify(result.parts);
  }
  return attributes;
}

export function toolSpanAttributes(
  telemetry: Telemetry,
  turn: TurnRecord,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  args: JsonObject,
): Attributes {
  return {
    'gen_ai.operation.name': 'execute_tool',
    ...turnAttributes(turn),
    'gen_ai.tool.name': tool.name,
    'gen_ai.tool.call.id': execution.toolCallId,
    'gen_ai.tool.type': 'function',
    ...(tool.description ? { 'gen_ai.tool.description': tool.description } : {}),
    'turnkit.tool.execution.id': execution.id,
    'turnkit.tool.recovery': tool.recovery,
    ...(telemetry.recordContent ? { 'gen_ai.tool.call.arguments': JSON.stringify(args) } : {}),
  };
}
