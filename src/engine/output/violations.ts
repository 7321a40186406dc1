/**
 * Output checks (spec §3.11): the output schema, the agent's constraints, its LLM-judged
 * policies and the media requirements, combined into one list of violations.
 */
import type { Agent } from '../../agents/agent.js';
import type {
  ConstraintContext,
  OutputConstraint,
  OutputPolicy,
  OutputViolation,
} from '../../agents/output-policy.js';
import { ArgumentError } from '../../errors.js';
import type { Json, JsonObject, MessageRecord } from '../../store/types.js';
import type { JudgeHost } from './judge.js';
import { judgeOutput } from './judge.js';

export interface OutputAudit {
  clean: boolean;
  violations: OutputViolation[];
}

const isAuditResult = (value: object): value is { clean: boolean; violations: unknown[] } =>
  typeof (value as { clean?: unknown }).clean === 'boolean' &&
  Array.isArray((value as { violations?: unknown }).violations);

/** A constraint's return value as violations (spec §3.11); anything unexpected is an ArgumentError. */
export function toViolations(value: unknown): OutputViolation[] {
  if (value === undefined || value === null || value === true || value === false) return [];
  if (typeof value === 'string') return [{ rule: 'output_constraint', message: value }];
  if (Array.isArray(value)) return value.flatMap(toViolations);
  if (typeof value === 'object') {
    if (isAuditResult(value)) return value.violations.flatMap(toViolations);
    const { rule, message, error, metadata, ...rest } = value as Record<string, unknown>;
    const violation: OutputViolation = {
      rule: typeof rule === 'string' ? rule : 'output_constraint',
      message:
        typeof message === 'string'
          ? message
          : typeof error === 'string'
            ? error
            : 'output constraint failed',
    };
    const meta =
      metadata && typeof metadata === 'object' && !Array.isArray(metadata)
        ? (JSON.parse(JSON.stringify(metadata)) as JsonObject)
        : Object.keys(rest).length
          ? (JSON.parse(JSON.stringify(rest)) as JsonObject)
          : undefined;
    if (meta) violation.metadata = meta;
    return [violation];
  }
  throw new ArgumentError(
    `an output constraint returned ${typeof value}; return nothing, a string, or a violation`,
  );
}

/** The output a check sees: the structured output when there is one, else the text. */
function outputOf(outputText: string | null, outputData: Json): Json {
  return outputData !== null && outputData !== undefined ? outputData : outputText;
}

/** Structured output that does not match the agent's `outputSchema` (rule `output_schema`). */
export function schemaViolations(agent: Agent, outputData: Json): OutputViolation[] {
  if (!agent.outputSchema) return [];
  if (outputData === null || outputData === undefined) {
    return [
      { rule: 'output_schema', message: 'the output has no structured data matching the output schema' },
    ];
  }
  const parsed = agent.outputSchema.safeParse(outputData);
  if (parsed.success) return [];
  return parsed.error.issues.map((issue) => ({
    rule: 'output_schema',
    message: `${issue.path.join('.') || '(output)'}: ${issue.message}`,
  }));
}

function dataHas(outputData: Json, kind: 'image' | 'media_analysis'): boolean {
  if (!outputData || typeof outputData !== 'object' || Array.isArray(outputData)) return false;
  const list = kind === 'image' ? outputData['images'] : outputData['media_analyses'];
  return outputData['type'] === kind || (Array.isArray(list) && list.length > 0);
}

function mediaViolations(
  policy: OutputPolicy,
  outputData: Json,
  messages: readonly MessageRecord[],
): OutputViolation[] {
  const kind = policy.kind === 'require_image' ? 'image' : 'media_analysis';
  if (dataHas(outputData, kind) || messages.some((message) => message.kind === kind)) return [];
  return [
    {
      rule: policy.name,
      message:
        kind === 'image' ? 'the output must include an image' : 'the output must include a media analysis',
    },
  ];
}

export interface CheckSet {
  constraints: readonly OutputConstraint[];
  policies: readonly OutputPolicy[];
}

/** Runs the constraints, then the policies, in order; judges go through `judgeHost`. */
export async function runChecks(
  checks: CheckSet,
  context: ConstraintContext,
  judgeHost: (policy: OutputPolicy, index: number) => JudgeHost,
  messages: () => Promise<MessageRecord[]>,
): Promise<OutputViolation[]> {
  const output = outputOf(context.outputText, context.outputData);
  const violations: OutputViolation[] = [];
  for (const constraint of checks.constraints) {
    violations.push(...toViolations(await constraint(output, context)));
  }
  for (const [index, policy] of checks.policies.entries()) {
    if (policy.kind === 'llm')
      violations.push(...(await judgeOutput(policy, output, judgeHost(policy, index))));
    else violations.push(...mediaViolations(policy, context.outputData, await messages()));
  }
  return violations;
}
