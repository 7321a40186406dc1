import { z } from 'zod';
import { ArgumentError, ConfigError } from '../errors.js';
import type { ModelClient, Thinking } from '../models/types.js';
import type { ModelChoice } from '../models/model-chain.js';
import { optionalModelChain } from '../models/model-chain.js';
import type { Json, JsonObject } from '../store/types.js';
import { DEFAULT_LIMITS, globalDefaults } from '../config.js';
import type { PostPolicy } from '../contract/post-request.js';
import { POST_POLICIES } from '../contract/post-request.js';
import type { ContextContributor, PromptSectionEntry, SystemPromptOption } from './prompt.js';
import {
  resolveContributors,
  resolveDataMaxChars,
  resolvePromptSections,
  resolveSystemPrompt,
} from './prompt.js';
import type { CompactionPolicy, CompactionSetting } from './compaction-policy.js';
import { checkCompactionSetting, layerCompaction } from './compaction-policy.js';
import type { Skill } from './skill.js';
import { loadSkillTool, uniqueSkills } from './skill.js';
import type { OutputConstraint, OutputPolicy, OutputPolicyOption } from './output-policy.js';
import { resolveOutputPolicies } from './output-policy.js';
import type { ToolDefinition } from './tool.js';
import { buildTool } from './tool.js';
import { checkApprovalFits } from './approval-fit.js';
import { isToolInputSchema } from './tool-input.js';
import type { ToolPolicy } from './tool-policy.js';
import { resolveToolPolicy } from './tool-policy.js';

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

/** TurnKit's built-in limits (spec §1.3); `configure({limits})` changes them for new agents. */
export { DEFAULT_LIMITS } from '../config.js';

export type PromptMode = 'full' | 'minimal' | 'task' | 'none';

export interface AgentOptions {
  name: string;
  description?: string;
  instructions?: string;
  /**
   * Model id handed to the model client, or a fallback chain of ids (the next serves a step
   * once the one before has used up its attempts on retryable provider errors); falls back
   * to the runtime's default model.
   */
  model?: ModelChoice;
  tools?: readonly ToolDefinition[];
  subAgents?: readonly Agent[];
  /** Autonomous orchestrator: prepends the orchestrator preamble, defaults to task mode. */
  orchestrator?: boolean;
  promptMode?: PromptMode;
  /** Replaces the generated system prompt: a string, or a function of the generated one. */
  systemPrompt?: SystemPromptOption;
  /** Sections of `full`/`task` mode, in order: built-in names and custom sections. */
  promptSections?: readonly PromptSectionEntry[];
  /** Replaces the behavior section's text. */
  promptBehavior?: string;
  /** Truncation of each data block (subject, live context); default 20 000. */
  promptDataMaxChars?: number;
  /** Called at every model call, in the model activity, to add live-context blocks. */
  contextContributors?: readonly ContextContributor[];
  /** `false` disables compaction; an object overrides policy keys (spec §3.6). */
  compaction?: CompactionSetting;
  /** Skills always loaded into the prompt. */
  skills?: readonly Skill[];
  /** Skills listed in the prompt that the model loads with `load_skill` (global ones first). */
  availableSkills?: readonly Skill[];
  /** `false`: take none of the global defaults (`configure`); specialists do this. */
  inheritGlobals?: boolean;
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
  outputPolicyModel?: ModelChoice;
  /** The judges' thinking when a policy sets none (else the runtime's, else `{effort: 'low'}`). */
  outputPolicyThinking?: Thinking | null;
  /** `fail` (default): dirty output fails the turn. `report`: completes with the audit. */
  outputPolicyMode?: 'fail' | 'report';
  /** Revision rounds allowed when output checks fail. */
  outputRetries?: number;
  /** Model client for this agent; otherwise the worker's default client. */
  client?: ModelClient;
  /**
   * What `conversation.post` does when the conversation is busy, unless the post says
   * (`queue`, `steer`, `interrupt`, `reject`); default `queue` (decision 41).
   */
  postPolicy?: PostPolicy;
  /**
   * Asked about every call the model proposes before it runs: `'allow'`, or `{ block: reason }`
   * (the call gets "blocked by policy: <reason>" as its result and `tool_policy_blocked` is
   * written). A policy that throws or returns anything else blocks the call.
   */
  toolPolicy?: ToolPolicy;
}

export interface Agent {
  readonly name: string;
  readonly description: string;
  readonly instructions: string;
  /** The first model of the agent's chain. */
  readonly model: string | undefined;
  /** The agent's whole chain (`model` first), when it names one. */
  readonly models: readonly string[] | undefined;
  readonly tools: readonly ToolDefinition[];
  readonly subAgents: readonly Agent[];
  readonly orchestrator: boolean;
  readonly promptMode: PromptMode | undefined;
  readonly systemPrompt: SystemPromptOption | undefined;
  readonly promptSections: readonly PromptSectionEntry[] | undefined;
  readonly promptBehavior: string | undefined;
  readonly promptDataMaxChars: number;
  /** The agent's own contributors after the global ones snapshotted at definition. */
  readonly contextContributors: readonly ContextContributor[];
  readonly inheritGlobals: boolean;
  readonly limits: BudgetLimits;
  readonly thinking: Thinking | null | undefined;
  readonly inputSchema: z.ZodType | undefined;
  readonly outputSchema: z.ZodType | undefined;
  /** JSON Schema of `outputSchema`, as the model sees it. */
  readonly outputJsonSchema: JsonObject | undefined;
  readonly outputConstraints: readonly OutputConstraint[];
  readonly outputPolicies: readonly OutputPolicy[];
  readonly outputPolicyModel: readonly string[] | undefined;
  readonly outputPolicyThinking: Thinking | null | undefined;
  readonly outputPolicyMode: 'fail' | 'report';
  readonly outputRetries: number;
  readonly client: ModelClient | undefined;
  /** The default policy of a post to a busy conversation of this agent. */
  readonly postPolicy: PostPolicy;
  readonly toolPolicy: ToolPolicy | undefined;
  /** The effective compaction policy (defaults ⊕ global ⊕ agent), or null when disabled. */
  readonly compaction: CompactionPolicy | null;
  /** Always in the prompt (their tools always offered). */
  readonly skills: readonly Skill[];
  /** Listed in the prompt and loadable with `load_skill`. */
  readonly availableSkills: readonly Skill[];
  /** Tool name → key of the available skill that owns it (offered only once loaded). */
  readonly skillTools: ReadonlyMap<string, string>;
  /**
   * Every tool a turn of this agent may use: configured tools, the tools of its skills and
   * available skills, one generated tool per sub-agent, and `load_skill`. A turn is offered
   * an available skill's tools only once it loaded the skill (`offeredTools`).
   */
  readonly effectiveTools: readonly ToolDefinition[];
}

function positiveInteger(name: string, value: unknown, agent: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new ArgumentError(`agent ${agent}: ${name} must be a non-negative integer`);
  }
  return value;
}

function resolveLimits(
  agent: string,
  limits: Partial<BudgetLimits> = {},
  base: BudgetLimits = DEFAULT_LIMITS,
): BudgetLimits {
  const merged = { ...base, ...limits };
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
    isToolInputSchema((value as ToolDefinition).input)
  );
}

/**
 * Everything the agent's model may call: its tools, its skills' and available skills' tools,
 * its sub-agents and `load_skill`, each a tool, with names unique.
 */
function agentTools(
  name: string,
  options: AgentOptions,
  tools: ToolDefinition[],
  globals: ReturnType<typeof globalDefaults> | undefined,
) {
  const skills = uniqueSkills(`agent ${name}`, [...(options.skills ?? [])], true);
  // Global available skills first, de-duplicated by key, first wins (spec §1.4).
  const availableSkills = uniqueSkills(`agent ${name}`, [
    ...(globals?.availableSkills ?? []),
    ...(options.availableSkills ?? []),
  ]);
  const skillTools = new Map<string, string>();
  for (const skill of availableSkills) for (const tool of skill.tools) skillTools.set(tool.name, skill.key);
  const subAgents = [...(options.subAgents ?? [])];
  const effectiveTools = [
    ...tools,
    ...skills.flatMap((skill) => skill.tools),
    ...availableSkills.flatMap((skill) => skill.tools),
    ...subAgents.map(subAgentTool),
    ...(availableSkills.length > 0 ? [loadSkillTool(availableSkills)] : []),
  ];
  effectiveTools.forEach((tool, index) => {
    if (!isToolDefinition(tool))
      throw new ArgumentError(
        `agent ${name}: tool ${index} of a skill is not a tool (build tools with defineTool or aiSdkTools)`,
      );
  });
  const seen = new Set<string>();
  for (const tool of effectiveTools) {
    if (seen.has(tool.name)) throw new ArgumentError(`agent ${name}: duplicate tool name ${tool.name}`);
    seen.add(tool.name);
    checkBudgetCompletionTool(name, tool);
  }
  return { skills, availableSkills, skillTools, subAgents, effectiveTools };
}

/** A tool object made without `defineTool` is held to `budgetCompletion`'s rules here. */
function checkBudgetCompletionTool(agent: string, tool: ToolDefinition): void {
  if (tool.budgetCompletion !== true) return;
  if (tool.kind !== 'ordinary' || !tool.terminal || tool.recovery !== 'replaySafe' || tool.needsApproval)
    throw new ArgumentError(
      `agent ${agent}: tool ${tool.name} has budgetCompletion but is not an ordinary, terminal, replay-safe tool without needsApproval`,
    );
}

/** Defines an agent. Validates everything up front so a bad definition fails at boot. */
export function defineAgent(options: AgentOptions): Agent {
  if (!options || typeof options.name !== 'string' || options.name.trim() === '') {
    throw new ArgumentError('an agent needs a non-empty name');
  }
  const name = options.name;
  const tools = checkedTools(name, options.tools);
  const inheritGlobals = options.inheritGlobals ?? true;
  if (typeof inheritGlobals !== 'boolean')
    throw new ArgumentError(`agent ${name}: inheritGlobals must be a boolean`);
  const globals = inheritGlobals ? globalDefaults() : undefined;
  const { skills, availableSkills, skillTools, subAgents, effectiveTools } = agentTools(
    name,
    options,
    tools,
    globals,
  );
  const outputRetries = positiveInteger('outputRetries', options.outputRetries ?? 0, name);
  const mode = options.outputPolicyMode ?? 'fail';
  if (mode !== 'fail' && mode !== 'report')
    throw new ArgumentError(`agent ${name}: outputPolicyMode must be fail or report`);
  const thinking =
    options.thinking === undefined ? undefined : resolveThinking(`agent ${name}`, options.thinking);
  if (options.promptBehavior !== undefined && typeof options.promptBehavior !== 'string')
    throw new ArgumentError(`agent ${name}: promptBehavior must be a string`);
  const outputJsonSchema = options.outputSchema ? schemaToJson(options.outputSchema) : undefined;
  const policies = resolveOutputPolicies(name, options.outputPolicy);
  const models = optionalModelChain(options.model, `agent ${name}: model`);
  const postPolicy = options.postPolicy ?? 'queue';
  const limits = resolveLimits(name, options.limits, globals?.limits);
  checkApprovalFits(`agent ${name}`, limits.timeout, effectiveTools, subAgents);
  if (!POST_POLICIES.includes(postPolicy))
    throw new ArgumentError(`agent ${name}: postPolicy must be one of ${POST_POLICIES.join(', ')}`);
  return Object.freeze({
    name,
    description: options.description ?? '',
    instructions: options.instructions ?? '',
    model: models?.[0],
    models,
    tools: Object.freeze(tools),
    subAgents: Object.freeze(subAgents),
    orchestrator: options.orchestrator ?? false,
    promptMode: resolvePromptMode(name, options.promptMode) ?? (options.orchestrator ? 'task' : undefined),
    systemPrompt: resolveSystemPrompt(`agent ${name}`, options.systemPrompt),
    promptSections: resolvePromptSections(`agent ${name}`, options.promptSections) ?? globals?.promptSections,
    promptBehavior: options.promptBehavior ?? globals?.promptBehavior,
    promptDataMaxChars: resolveDataMaxChars(
      `agent ${name}`,
      options.promptDataMaxChars ?? globals?.promptDataMaxChars ?? 20_000,
    ),
    // Globals are snapshotted here: a contributor configured later never reaches this agent.
    contextContributors: Object.freeze([
      ...(globals?.contextContributors ?? []),
      ...resolveContributors(`agent ${name}`, options.contextContributors),
    ]),
    inheritGlobals,
    limits,
    thinking,
    inputSchema: options.inputSchema,
    outputSchema: options.outputSchema,
    outputJsonSchema,
    outputConstraints: Object.freeze([...(options.outputConstraints ?? []), ...policies.constraints]),
    outputPolicies: Object.freeze(policies.policies),
    outputPolicyModel: optionalModelChain(options.outputPolicyModel, `agent ${name}: outputPolicyModel`),
    outputPolicyThinking: options.outputPolicyThinking,
    outputPolicyMode: mode,
    outputRetries,
    client: options.client,
    postPolicy,
    toolPolicy: resolveToolPolicy(name, options.toolPolicy),
    compaction: layerCompaction([
      globals?.compaction,
      checkCompactionSetting(`agent ${name}`, options.compaction),
    ]),
    skills: Object.freeze(skills),
    availableSkills: Object.freeze(availableSkills),
    skillTools,
    effectiveTools: Object.freeze(effectiveTools),
  });
}

/** The agent's own tools, each a TurnKit tool (an AI SDK `tool()` goes through `aiSdkTools`). */
function checkedTools(name: string, given: AgentOptions['tools']): ToolDefinition[] {
  const tools = [...(given ?? [])];
  tools.forEach((tool, index) => {
    if (isToolDefinition(tool)) return;
    // An AI SDK `tool()` has no name of its own: its name is its key in a tool set.
    const sdkTool = tool !== null && typeof tool === 'object' && 'inputSchema' in tool;
    throw new ArgumentError(
      `agent ${name}: tools[${index}] is not a tool (build tools with defineTool` +
        (sdkTool ? '; pass AI SDK tools as aiSdkTools({ name: tool })' : ' or aiSdkTools') +
        ')',
    );
  });
  return tools;
}

/** The JSON Schema (draft 7) of a zod schema, as a model sees it. */
export function schemaToJson(schema: z.ZodType): JsonObject {
  const json = z.toJSONSchema(schema, { target: 'draft-7' }) as JsonObject;
  delete json['$schema'];
  return json;
}

const PROMPT_MODES: readonly PromptMode[] = ['full', 'minimal', 'task', 'none'];

export function resolvePromptMode(agent: string, mode: unknown): PromptMode | undefined {
  if (mode === undefined) return undefined;
  if (!PROMPT_MODES.includes(mode as PromptMode))
    throw new ArgumentError(`${agent}: promptMode must be one of ${PROMPT_MODES.join(', ')}`);
  return mode as PromptMode;
}

/**
 * Validates a thinking setting (spec §1.4): null turns thinking off; an object needs an
 * `effort` (low, medium, high) or an integer `budget`, and nothing else.
 */
export function resolveThinking(where: string, thinking: unknown): Thinking | null {
  if (thinking === null) return null;
  if (!thinking || typeof thinking !== 'object' || Array.isArray(thinking))
    throw new ArgumentError(`${where}: thinking must be {effort, budget} or null`);
  const value = thinking as Record<string, unknown>;
  const unknown = Object.keys(value).filter((key) => key !== 'effort' && key !== 'budget');
  if (unknown.length > 0) throw new ArgumentError(`${where}: unknown thinking keys ${unknown.join(', ')}`);
  if (value['effort'] === undefined && value['budget'] === undefined)
    throw new ArgumentError(`${where}: thinking needs an effort or a budget`);
  if (value['effort'] !== undefined && !['low', 'medium', 'high'].includes(value['effort'] as string))
    throw new ArgumentError(`${where}: thinking effort must be low, medium or high`);
  if (
    value['budget'] !== undefined &&
    !(Number.isInteger(value['budget']) && (value['budget'] as number) > 0)
  )
    throw new ArgumentError(`${where}: thinking budget must be a positive integer`);
  return { ...(value as Thinking) };
}

/** The tools a turn is offered, given the skills it loaded (spec §4.6). */
export function offeredTools(agent: Agent, loadedSkills: ReadonlySet<string>): ToolDefinition[] {
  return agent.effectiveTools.filter((tool) => {
    const owner = agent.skillTools.get(tool.name);
    return owner === undefined || loadedSkills.has(owner);
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

/** Whether a turn of this agent may have output checks: its own, or those of its skills. */
export function hasOutputChecks(agent: Agent): boolean {
  const skills = [...agent.skills, ...agent.availableSkills];
  return (
    agent.outputConstraints.length > 0 ||
    agent.outputPolicies.length > 0 ||
    skills.some((skill) => skill.outputPolicies.length > 0 || skill.outputConstraints.length > 0)
  );
}
