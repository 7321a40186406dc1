import { z } from 'zod';
import { ArgumentError, ConfigError } from '../errors.js';
import type { ModelClient, Thinking } from '../models/types.js';
import type { Json, JsonObject } from '../store/types.js';
import type { OutputConstraint, OutputPolicy, OutputPolicyOption } from './output-policy.js';
import { resolveOutputPolicies } from './output-policy.js';
import type { ToolDefinition } from './tool.js';
import { buildTool } from './tool.js';

export type { OutputConstraint, OutputViolation } from './output-policy.js';

/** Root-wide limits (spec §3.4). A tree always runs under its root turn's limits. */
export interface BudgetLimits {
  maxIterations: number;
  maxToolExecutions: number;
  maxToolExecutionsByName: Record<string, number>;
  /** USD; null = no spend cap. */
  maxSpend: number | null;
  maxDepth: number;
  /** Seconds of wall clock from submission; null = none. */
  timeout: number | null;
}

export const DEFAULT_LIMITS: BudgetLimits = Object.freeze({
  maxIterations: 25,
  maxToolExecutions: 100,
  maxToolExecutionsByName: {},
  maxSpend: null,
  maxDepth: 3,
  timeout: 300,
});

export type PromptMode = 'full' | 'minimal' | 'task' | 'none';

export interface AgentOptions {
  name: string;
  description?: string;
  instructions?: string;
  /** Model id handed to the model client; falls back to the runtime's default model. */
  model?: string;
  tools?: readonly ToolDefinition[];
  subAgents?: readonly Agent[];
  /** Autonomous orchestrator: prepends the orchestrator preamble, defaults to task mode. */
  orchestrator?: boolean;
  promptMode?: PromptMode;
  limits?: Partial<BudgetLimits>;
  thinking?: Thinking | null;
  /** Validated by `run` before anything is written (InputError). */
  inputSchema?: z.ZodType;
  /** Structured output the model must produce; persisted as `outputData`. */
  outputSchema?: z.ZodType;
  outputConstraints?: readonly OutputConstraint[];
  /**
   * LLM-judged policies (`outputPolicy(...)`, a `.md`/`.markdown`/`.txt` path), `requireImage()`,
   * `requireMediaAnalysis()`, or deterministic constraints (functions, `{ check }` objects).
   */
  outputPolicy?: OutputPolicyOption | readonly OutputPolicyOption[] | null;
  /** The judges' model when a policy names none (else the runtime's, else the turn's model). */
  outputPolicyModel?: string;
  /** The judges' thinking when a policy sets none (else the runtime's, else `{effort: 'low'}`). */
  outputPolicyThinking?: Thinking | null;
  /** `fail` (default): dirty output fails the turn. `report`: completes with the audit. */
  outputPolicyMode?: 'fail' | 'report';
  /** Revision rounds allowed when output checks fail. */
  outputRetries?: number;
  /** Model client for this agent; otherwise the worker's default client. */
  client?: ModelClient;
}

export interface Agent {
  readonly name: string;
  readonly description: string;
  readonly instructions: string;
  readonly model: string | undefined;
  readonly tools: readonly ToolDefinition[];
  readonly subAgents: readonly Agent[];
  readonly orchestrator: boolean;
  readonly promptMode: PromptMode | undefined;
  readonly limits: BudgetLimits;
  readonly thinking: Thinking | null | undefined;
  readonly inputSchema: z.ZodType | undefined;
  readonly outputSchema: z.ZodType | undefined;
  /** JSON Schema of `outputSchema`, as the model sees it. */
  readonly outputJsonSchema: JsonObject | undefined;
  readonly outputConstraints: readonly OutputConstraint[];
  readonly outputPolicies: readonly OutputPolicy[];
  readonly outputPolicyModel: string | undefined;
  readonly outputPolicyThinking: Thinking | null | undefined;
  readonly outputPolicyMode: 'fail' | 'report';
  readonly outputRetries: number;
  readonly client: ModelClient | undefined;
  /** Tools the model is offered: configured tools plus one generated tool per sub-agent. */
  readonly effectiveTools: readonly ToolDefinition[];
}

function positiveInteger(name: string, value: unknown, agent: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new ArgumentError(`agent ${agent}: ${name} must be a non-negative integer`);
  }
  return value;
}

function resolveLimits(agent: string, limits: Partial<BudgetLimits> = {}): BudgetLimits {
  const merged = { ...DEFAULT_LIMITS, ...limits };
  positiveInteger('maxIterations', merged.maxIterations, agent);
  positiveInteger('maxToolExecutions', merged.maxToolExecutions, agent);
  positiveInteger('maxDepth', merged.maxDepth, agent);
  for (const [tool, cap] of Object.entries(merged.maxToolExecutionsByName)) {
    positiveInteger(`maxToolExecutionsByName.${tool}`, cap, agent);
  }
  if (merged.maxSpend !== null && !(typeof merged.maxSpend === 'number' && merged.maxSpend >= 0)) {
    throw new ArgumentError(`agent ${agent}: maxSpend must be a non-negative number or null`);
  }
  if (merged.timeout !== null && !(typeof merged.timeout === 'number' && merged.timeout > 0)) {
    throw new ArgumentError(`agent ${agent}: timeout must be a positive number of seconds or null`);
  }
  return Object.freeze({ ...merged, maxToolExecutionsByName: { ...merged.maxToolExecutionsByName } });
}

function subAgentTool(sub: Agent): ToolDefinition {
  return buildTool(
    {
      name: sub.name,
      description: sub.description || `Delegate work to ${sub.name}.`,
      input: z.object({ task: z.string().describe('The complete, self-contained task for the sub-agent.') }),
      execute: () => {
        throw new ConfigError(`sub-agent ${sub.name} runs as a child workflow, never in-process`);
      },
    },
    'subAgent',
  );
}

function isToolDefinition(value: unknown): value is ToolDefinition {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as ToolDefinition).name === 'string' &&
    typeof (value as ToolDefinition).execute === 'function' &&
    (value as ToolDefinition).input instanceof z.ZodObject
  );
}

/** Defines an agent. Validates everything up front so a bad definition fails at boot. */
export function defineAgent(options: AgentOptions): Agent {
  if (!options || typeof options.name !== 'string' || options.name.trim() === '') {
    throw new ArgumentError('an agent needs a non-empty name');
  }
  const name = options.name;
  const tools = [...(options.tools ?? [])];
  tools.forEach((tool, index) => {
    if (!isToolDefinition(tool)) {
      throw new ArgumentError(`agent ${name}: tools[${index}] is not a tool (build tools with defineTool)`);
    }
  });
  const subAgents = [...(options.subAgents ?? [])];
  const effectiveTools = [...tools, ...subAgents.map(subAgentTool)];
  const seen = new Set<string>();
  for (const tool of effectiveTools) {
    if (seen.has(tool.name)) throw new ArgumentError(`agent ${name}: duplicate tool name ${tool.name}`);
    seen.add(tool.name);
  }
  const outputRetries = positiveInteger('outputRetries', options.outputRetries ?? 0, name);
  const mode = options.outputPolicyMode ?? 'fail';
  if (mode !== 'fail' && mode !== 'report')
    throw new ArgumentError(`agent ${name}: outputPolicyMode must be fail or report`);
  if (options.thinking && options.thinking.effort === undefined && options.thinking.budget === undefined) {
    throw new ArgumentError(`agent ${name}: thinking needs an effort or a budget`);
  }
  const policies = resolveOutputPolicies(name, options.outputPolicy);
  let outputJsonSchema: JsonObject | undefined;
  if (options.outputSchema) {
    outputJsonSchema = z.toJSONSchema(options.outputSchema, { target: 'draft-7' }) as JsonObject;
    delete outputJsonSchema['$schema'];
  }
  return Object.freeze({
    name,
    description: options.description ?? '',
    instructions: options.instructions ?? '',
    model: options.model,
    tools: Object.freeze(tools),
    subAgents: Object.freeze(subAgents),
    orchestrator: options.orchestrator ?? false,
    promptMode: options.promptMode ?? (options.orchestrator ? 'task' : undefined),
    limits: resolveLimits(name, options.limits),
    thinking: options.thinking,
    inputSchema: options.inputSchema,
    outputSchema: options.outputSchema,
    outputJsonSchema,
    outputConstraints: Object.freeze([...(options.outputConstraints ?? []), ...policies.constraints]),
    outputPolicies: Object.freeze(policies.policies),
    outputPolicyModel: options.outputPolicyModel,
    outputPolicyThinking: options.outputPolicyThinking,
    outputPolicyMode: mode,
    outputRetries,
    client: options.client,
    effectiveTools: Object.freeze(effectiveTools),
  });
}

/** Limits as persisted in `options.budget_limits` (TurnKit's snake_case keys). */
export function limitsToJson(limits: BudgetLimits): JsonObject {
  return {
    max_iterations: limits.maxIterations,
    max_tool_executions: limits.maxToolExecutions,
    max_tool_executions_by_name: { ...limits.maxToolExecutionsByName },
    max_spend: limits.maxSpend,
    max_depth: limits.maxDepth,
    timeout: limits.timeout,
  };
}

export function limitsFromJson(json: Json | undefined, fallback: BudgetLimits): BudgetLimits {
  if (!json || typeof json !== 'object' || Array.isArray(json)) return fallback;
  const pick = <T>(key: string, value: T): T => (key in json ? (json[key] as T) : value);
  return {
    maxIterations: pick('max_iterations', fallback.maxIterations),
    maxToolExecutions: pick('max_tool_executions', fallback.maxToolExecutions),
    maxToolExecutionsByName: pick('max_tool_executions_by_name', fallback.maxToolExecutionsByName) ?? {},
    maxSpend: pick('max_spend', fallback.maxSpend),
    maxDepth: pick('max_depth', fallback.maxDepth),
    timeout: pick('timeout', fallback.timeout),
  };
}
