/**
 * The AI SDK's own tools as TurnKit tools: `defineAgent({ tools: aiSdkTools({ weather, search }) })`
 * takes `tool()` and `dynamicTool()` objects as they are. Each call runs in its tool activity
 * like any TurnKit tool (one execution row, one result, heartbeats, cancellation), with what
 * the AI SDK would pass to `execute` and `needsApproval`.
 */
import type { FlexibleSchema, InferToolInput, Schema, ToolExecutionOptions, ToolSet } from 'ai';
import { asSchema } from 'ai';
import { z } from 'zod';
import { ArgumentError, ToolError } from '../errors.js';
import { toAiSdkMessages } from '../models/ai-sdk-messages.js';
import type { Json, JsonObject } from '../store/types.js';
import type { StandardIssue, StandardResult, StandardSchemaV1 } from './standard-schema.js';
import { issuesText } from './standard-schema.js';
import type { NeedsApproval, ToolContext, ToolDefinition, ToolRecovery } from './tool.js';
import { buildTool } from './tool.js';

/** TurnKit's settings for one AI SDK tool; the tool itself has no words for them. */
/**
 * What TurnKit passes an AI SDK tool's `execute` besides the AI SDK's own options: the
 * execution's idempotency key (`ToolContext.idempotencyKey`), the same on every run of the
 * call (a `replaySafe` tool re-run after a crash or an error), unique across turns, so an
 * external service can dedupe the effect on it. Read it as
 * `(options as AiSdkToolExecutionOptions).idempotencyKey`.
 */
export type AiSdkToolExecutionOptions<Context = unknown> = ToolExecutionOptions<Context> & {
  idempotencyKey: string;
};

export interface AiSdkToolOptions<Input = unknown> {
  /** `unknown` by default: an interrupted call is never re-run. `replaySafe` for idempotent tools. */
  recovery?: ToolRecovery;
  /** The tool changes nothing outside the store (read-only tools default to `replaySafe`). */
  readOnly?: boolean;
  /** The tool ends the turn when it succeeds: `true`, or the completion message (a string or a function of the result). */
  terminal?: boolean | string | ((result: Json) => string);
  /** Replaces the tool's own `needsApproval`, in TurnKit's form (a boolean, or a function of the arguments). */
  needsApproval?: NeedsApproval<Input>;
  /** With approval: reject on a durable timer if nobody decides in time (ms or '10 minutes'). */
  approvalTimeout?: number | string;
}

/** Settings by tool name; a name that is not in the tool set is an ArgumentError. */
export type AiSdkToolsOptions<Tools extends ToolSet = ToolSet> = {
  [Name in keyof Tools]?: AiSdkToolOptions<InferToolInput<Tools[Name]>>;
};

/** The fields TurnKit reads of an AI SDK tool, whichever of its kinds it is. */
interface SdkTool {
  type?: string;
  id?: string;
  description?: unknown;
  inputSchema?: FlexibleSchema;
  execute?: unknown;
  contextSchema?: FlexibleSchema;
  needsApproval?: unknown;
  toModelOutput?: (options: { toolCallId: string; input: unknown; output: unknown }) => unknown;
}

/**
 * The tools of an AI SDK tool set, named by their keys. Their `inputSchema` (zod, any Standard
 * Schema, or `jsonSchema()`) is what the model sees and what its arguments are checked against;
 * `execute(input, { toolCallId, messages, abortSignal, context, idempotencyKey })` gets the
 * call's id, the messages the model was sent (`ToolContext.history`), the activity's signal, the
 * run context and the execution's idempotency key (`ToolContext.idempotencyKey`).
 */
export function aiSdkTools<Tools extends ToolSet>(
  tools: Tools,
  options: AiSdkToolsOptions<Tools> = {},
): ToolDefinition[] {
  if (!tools || typeof tools !== 'object' || Array.isArray(tools))
    throw new ArgumentError('aiSdkTools needs a tool set: { name: tool({ ... }) }');
  if (!options || typeof options !== 'object' || Array.isArray(options))
    throw new ArgumentError('aiSdkTools: options must be { toolName: { recovery, needsApproval, … } }');
  for (const name of Object.keys(options))
    if (!Object.hasOwn(tools, name))
      throw new ArgumentError(`aiSdkTools: options name ${name}, which is not in the tool set`);
  return Object.entries(tools).map(([name, tool]) =>
    adapt(name, tool as SdkTool, (options as Record<string, AiSdkToolOptions | undefined>)[name] ?? {}),
  );
}

function adapt(name: string, tool: SdkTool, settings: AiSdkToolOptions): ToolDefinition {
  checkTool(name, tool);
  const execute = tool.execute as (input: unknown, options: AiSdkToolExecutionOptions) => unknown;
  return buildTool(
    {
      name,
      description: (tool.description as string | undefined) ?? '',
      input: inputOf(name, tool.inputSchema!),
      recovery: settings.recovery,
      readOnly: settings.readOnly,
      terminal: settings.terminal,
      needsApproval: settings.needsApproval ?? approvalOf(name, tool),
      approvalTimeout: settings.approvalTimeout,
      execute: async (input, context) => {
        const toolCallId = context.execution.toolCallId;
        const output = await lastOutput(
          execute(input, {
            toolCallId,
            messages: toAiSdkMessages(await context.history()),
            abortSignal: context.signal,
            context: await runContext(name, tool, context.context),
            idempotencyKey: context.idempotencyKey,
          }),
          context,
        );
        if (!tool.toModelOutput) return output;
        return modelOutput(name, await tool.toModelOutput({ toolCallId, input, output }));
      },
    },
    'ordinary',
  );
}

/** What TurnKit cannot run: a provider's tool, a tool without `execute`, a computed description. */
function checkTool(name: string, tool: SdkTool): void {
  if (!tool || typeof tool !== 'object')
    throw new ArgumentError(`AI SDK tool ${name} is not a tool() object`);
  const type = tool.type ?? 'function';
  if (type === 'provider' || type === 'provider-defined' || type === 'provider-executed')
    throw new ArgumentError(
      `AI SDK tool ${name} is a provider-defined tool (${tool.id ?? type}), which TurnKit does not support: ` +
        'its schema and execution belong to the provider, and TurnKit declares every tool as a function',
    );
  if (type !== 'function' && type !== 'dynamic')
    throw new ArgumentError(
      `AI SDK tool ${name} has type ${JSON.stringify(type)}, which TurnKit does not support`,
    );
  if (tool.inputSchema == null) throw new ArgumentError(`AI SDK tool ${name} has no inputSchema`);
  if (typeof tool.execute !== 'function')
    throw new ArgumentError(
      `AI SDK tool ${name}: execute must be a function (TurnKit runs every tool; one without execute is not supported)`,
    );
  if (tool.description !== undefined && typeof tool.description !== 'string')
    throw new ArgumentError(
      `AI SDK tool ${name}: description must be a string (a description computed per call is not supported)`,
    );
}

/**
 * The tool's `inputSchema` as a Standard Schema with its JSON Schema, through the AI SDK's own
 * `asSchema`: the model sees what the AI SDK would send, and arguments validate as it would.
 */
function inputOf(name: string, inputSchema: FlexibleSchema): StandardSchemaV1 {
  let schema: Schema;
  let json: unknown;
  try {
    schema = asSchema(inputSchema);
    json = schema.jsonSchema;
  } catch (error) {
    throw new ArgumentError(`AI SDK tool ${name}: its inputSchema has no JSON Schema: ${messageOf(error)}`);
  }
  if (!json || typeof (json as PromiseLike<unknown>).then === 'function' || typeof json !== 'object')
    throw new ArgumentError(
      `AI SDK tool ${name}: its inputSchema's JSON Schema must be an object, not a promise`,
    );
  const validate = schema.validate;
  const jsonSchema = {
    input: () => json as Record<string, unknown>,
    output: () => json as Record<string, unknown>,
  };
  return {
    '~standard': {
      version: 1,
      vendor: 'ai-sdk',
      jsonSchema,
      validate:
        typeof validate === 'function'
          ? async (value): Promise<StandardResult<unknown>> => {
              const result = await validate(value);
              return result.success ? { value: result.value } : { issues: issuesOf(result.error) };
            }
          : jsonSchemaCheck(json as JsonObject),
    },
  };
}

/**
 * A `jsonSchema()` without `validate`: the AI SDK passes the arguments unchecked; TurnKit
 * checks them against the JSON Schema (as for MCP tools) and passes them unchanged.
 */
function jsonSchemaCheck(json: JsonObject): (value: unknown) => StandardResult<unknown> {
  let schema: z.ZodType | null;
  try {
    schema = z.fromJSONSchema(json as Parameters<typeof z.fromJSONSchema>[0]);
  } catch {
    schema = null; // a schema zod cannot read: the unknown and missing checks still apply
  }
  return (value) => {
    const parsed = schema?.safeParse(value);
    return !parsed || parsed.success ? { value } : { issues: parsed.error.issues };
  };
}

/** A validation error's issues: zod's, a Standard Schema's (the AI SDK's `cause`), or its message. */
function issuesOf(error: Error): readonly StandardIssue[] {
  const listed = (error as { issues?: unknown }).issues ?? error.cause;
  const valid =
    Array.isArray(listed) &&
    listed.length > 0 &&
    listed.every((issue) => typeof (issue as StandardIssue | null)?.message === 'string');
  return valid ? (listed as StandardIssue[]) : [{ message: error.message }];
}

/** The tool's own `needsApproval`: a boolean as it is, a function asked with what the AI SDK passes. */
function approvalOf(name: string, tool: SdkTool): NeedsApproval<unknown> | undefined {
  const own = tool.needsApproval;
  if (own === undefined || typeof own === 'boolean') return own;
  if (typeof own !== 'function')
    throw new ArgumentError(`AI SDK tool ${name}: needsApproval must be a boolean or a function`);
  return async (input, context) =>
    (await (own as (input: unknown, options: object) => unknown)(input, {
      toolCallId: context.toolCallId,
      messages: toAiSdkMessages(await context.history()),
      context: await runContext(name, tool, context.context),
    })) === true;
}

/** The run context as the tool's `context`, checked against its `contextSchema` if it has one. */
async function runContext(name: string, tool: SdkTool, context: JsonObject): Promise<unknown> {
  if (tool.contextSchema == null) return context;
  const validate = asSchema(tool.contextSchema).validate;
  if (typeof validate !== 'function') return context;
  const result = await validate(context);
  if (result.success) return result.value;
  throw new ToolError(
    `tool ${name}: the run context does not match its contextSchema: ${issuesText(issuesOf(result.error))}`,
  );
}

/** A streaming `execute` (an async iterable) ends with its last value, as in the AI SDK. */
async function lastOutput(result: unknown, context: ToolContext): Promise<unknown> {
  if (!result || typeof (result as AsyncIterable<unknown>)[Symbol.asyncIterator] !== 'function')
    return result;
  let last: unknown;
  for await (const value of result as AsyncIterable<unknown>) {
    last = value;
    context.heartbeat();
  }
  return last;
}

/** What `toModelOutput` returns, as TurnKit's result: text and JSON pass, the error kinds fail the call. */
function modelOutput(name: string, output: unknown): Json {
  const value = output as { type?: string; value?: unknown; reason?: string } | null;
  switch (value?.type) {
    case 'text':
      return { result: String(value.value) };
    case 'json':
      return (value.value ?? null) as Json;
    case 'error-text':
      throw new ToolError(String(value.value));
    case 'error-json':
      throw new ToolError(JSON.stringify(value.value));
    case 'execution-denied':
      throw new ToolError(value.reason ?? `${name}: execution denied`);
    case 'content':
      return { result: contentText(value.value) };
    default:
      throw new ToolError(`tool ${name}: toModelOutput returned an output TurnKit does not know`);
  }
}

/** A `content` output's text parts; a file or image part stands as a short placeholder. */
function contentText(parts: unknown): string {
  return (Array.isArray(parts) ? parts : [])
    .map((part: { type?: string; text?: string; mediaType?: string }) =>
      part?.type === 'text'
        ? (part.text ?? '')
        : `[${[part?.type ?? 'part', part?.mediaType].filter(Boolean).join(' ')} omitted]`,
    )
    .join('\n');
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
