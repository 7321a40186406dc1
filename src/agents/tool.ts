import type { z } from 'zod';
import { ArgumentError } from '../errors.js';
import type { ModelMessage, ModelUsage } from '../models/types.js';
import type { Json, JsonObject, NewMessage, ToolExecutionRecord, TurnRecord } from '../store/types.js';
import type { Store } from '../store/types.js';
import type { StandardOutput } from './standard-schema.js';
import type { ToolInputSchema } from './tool-input.js';
import { inputJsonSchema, parseToolInput } from './tool-input.js';

/** The arguments a tool's `execute` gets: what its input schema validates to. */
export type ToolArgs<Schema extends ToolInputSchema> = Schema extends z.ZodType
  ? z.infer<Schema>
  : StandardOutput<Schema>;

/**
 * `unknown`: a run interrupted mid-call has an unknown outcome and is never re-run.
 * `replaySafe`: the tool is idempotent under `context.idempotencyKey` and may be re-run.
 */
export type ToolRecovery = 'unknown' | 'replaySafe';

/** What a tool sees of the turn it runs in. */
export interface ToolContext {
  /** `turnkit:tool:<executionId>`, stable across every retry of this execution. */
  readonly idempotencyKey: string;
  /** Aborted when the turn is cancelled or the activity times out. */
  readonly signal: AbortSignal;
  /** The application's principal, read fresh from the turn (never from model arguments). */
  readonly principal: Json;
  /** The run context the application passed to `run` (a copy). */
  readonly context: JsonObject;
  readonly turn: TurnRecord;
  readonly execution: ToolExecutionRecord;
  /** The turn's fenced store: every write fails with LostClaim once the turn is not ours. */
  readonly store: Store;
  /** Tell Temporal the tool is alive (long tools should call this). */
  heartbeat(details?: unknown): void;
  /**
   * Charges an internal model call the tool made (an image generation, a media analysis) to
   * the turn, through the runtime's cost rates and calculator; returns its cost in USD (null
   * when unknown). Call `checkSpend` after it: the cost counts toward `maxSpend`.
   */
  recordUsage(usage: ModelUsage, model: string): Promise<number | null>;
  /** BudgetError "cost limit reached" when the turn's tree spent more than its `maxSpend`. */
  checkSpend(): Promise<void>;
  /**
   * A message of this turn's conversation written once the response's tool calls all have
   * their results, so every call stays immediately followed by its result; only when this
   * call completes. Returns the message's id now.
   */
  appendAfterResults(message: AfterResultsMessage): Promise<string>;
  /** Appends an event to the turn's durable log now (e.g. `image.requested`). */
  emit(type: string, payload: JsonObject): Promise<void>;
  /** The messages the model was sent for the response holding this call (see `CallHistory`). */
  history: CallHistory;
}

/**
 * The turn's history as the model read it before the response that holds this call, in
 * TurnKit's provider-neutral form: no system prompt, not that response. Read from the store
 * when called (one to three queries), so a tool that never asks pays nothing.
 */
export type CallHistory = () => Promise<ModelMessage[]>;

/** What a tool may add to its turn's conversation after the results (an image, a media analysis). */
export type AfterResultsMessage = Pick<NewMessage, 'role' | 'kind' | 'content' | 'metadata'>;

/**
 * Whether a call must wait for a person's `approve` before it runs: `true`, or a function of
 * the validated arguments and the call's context (asked once, when the call is first
 * dispatched; if it throws, the call fails with its message and the model reads it).
 */
export type NeedsApproval<Args = never> =
  boolean | ((args: Args, context: ApprovalContext) => boolean | Promise<boolean>);

/** What a `needsApproval` function sees of the call. */
export interface ApprovalContext {
  readonly principal: Json;
  readonly context: JsonObject;
  readonly turn: TurnRecord;
  readonly toolCallId: string;
  readonly history: CallHistory;
}

export type ToolKind = 'ordinary' | 'subAgent' | 'launchAgent' | 'waitFor' | 'sendMessage';

export interface ToolDefinition<Schema extends ToolInputSchema = ToolInputSchema, Result = unknown> {
  readonly name: string;
  readonly description: string;
  /** A zod object schema, or any Standard Schema that converts itself to JSON Schema. */
  readonly input: Schema;
  /** JSON Schema of `input`, as the model sees it. */
  readonly jsonSchema: JsonObject;
  readonly recovery: ToolRecovery;
  /** Terminal tools end the turn when they succeed; later calls are skipped. */
  readonly terminal: boolean;
  readonly kind: ToolKind;
  /** The tool never changes anything outside the store (required by read-only specialists). */
  readonly readOnly: boolean;
  /** Text appended as the final assistant message when a terminal tool ends the turn. */
  completionMessage(result: Json): string;
  /** Some calls wait for a person's decision first (`needsApproval` given; ordinary tools only). */
  readonly needsApproval: boolean;
  /** Whether this call waits for a decision (`needsApproval` applied to it; it may throw). */
  requiresApproval(args: ToolArgs<Schema>, context: ApprovalContext): boolean | Promise<boolean>;
  /** Rejects a call still awaiting its decision after this many ms ("approval timed out"). */
  readonly approvalTimeoutMs: number | null;
  /** A terminal, replay-safe save that may still run once the spend limit is reached. */
  readonly budgetCompletion: boolean;
  execute(args: ToolArgs<Schema>, context: ToolContext): Promise<Result> | Result;
}

export interface ToolOptions<Schema extends ToolInputSchema, Result> {
  name: string;
  description: string;
  /** `z.object({...})`, or any Standard Schema that converts itself to JSON Schema. */
  input: Schema;
  execute: (args: ToolArgs<Schema>, context: ToolContext) => Promise<Result> | Result;
  recovery?: ToolRecovery;
  /** `true`, or the completion message (a string or a function of the result). */
  terminal?: boolean | string | ((result: Json) => string);
  /** Declares the tool free of side effects; read-only tools default to `replaySafe`. */
  readOnly?: boolean;
  /** Hold each call for a person's `approve`/`reject` (Temporal Updates) before it runs. */
  needsApproval?: NeedsApproval<ToolArgs<Schema>>;
  /** With `needsApproval`: reject on a durable timer if nobody decides in time (ms or '10 minutes'). */
  approvalTimeout?: number | string;
  /**
   * The turn's save when its money runs out: a terminal, replay-safe tool that may still run,
   * once, when the response that proposed it reached the spend limit. Its sibling calls are
   * closed "not executed: spend limit reached" and the turn completes with what it saved.
   */
  budgetCompletion?: boolean;
}

const TOOL_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/** Defines a tool whose arguments are a zod object schema or another Standard Schema. */
export function defineTool<Schema extends ToolInputSchema, Result>(
  options: ToolOptions<Schema, Result>,
): ToolDefinition<Schema, Result> {
  return buildTool(options, 'ordinary');
}

/** @internal Also used for the generated sub-agent and coordination tools. */
export function buildTool<Schema extends ToolInputSchema, Result>(
  options: ToolOptions<Schema, Result>,
  kind: ToolKind,
): ToolDefinition<Schema, Result> {
  if (!options || typeof options !== 'object') throw new ArgumentError('defineTool needs an options object');
  if (typeof options.name !== 'string' || !TOOL_NAME.test(options.name)) {
    throw new ArgumentError(
      `invalid tool name ${JSON.stringify(options.name)}: use letters, digits, _ and -`,
    );
  }
  const jsonSchema = inputJsonSchema(options.name, options.input);
  if (typeof options.execute !== 'function')
    throw new ArgumentError(`tool ${options.name}: execute must be a function`);
  const readOnly = options.readOnly ?? false;
  if (typeof readOnly !== 'boolean')
    throw new ArgumentError(`tool ${options.name}: readOnly must be a boolean`);
  const recovery = options.recovery ?? (readOnly ? 'replaySafe' : 'unknown');
  if (recovery !== 'unknown' && recovery !== 'replaySafe') {
    throw new ArgumentError(`tool ${options.name}: recovery must be 'unknown' or 'replaySafe'`);
  }
  const terminal = options.terminal ?? false;
  const needsApproval = options.needsApproval ?? false;
  if (typeof needsApproval !== 'boolean' && typeof needsApproval !== 'function')
    throw new ArgumentError(`tool ${options.name}: needsApproval must be a boolean or a function`);
  if (needsApproval !== false && kind !== 'ordinary')
    throw new ArgumentError(`tool ${options.name}: only ordinary tools can need approval`);
  const approvalTimeoutMs = durationMs(options.name, options.approvalTimeout);
  const budgetCompletion = checkBudgetCompletion(options.name, options.budgetCompletion ?? false, {
    kind,
    recovery,
    terminal,
    needsApproval,
  });
  return Object.freeze({
    name: options.name,
    description: options.description ?? '',
    input: options.input,
    jsonSchema,
    recovery,
    terminal: terminal !== false,
    kind,
    readOnly,
    needsApproval: needsApproval !== false,
    approvalTimeoutMs,
    budgetCompletion,
    requiresApproval: (args: ToolArgs<Schema>, context: ApprovalContext) =>
      typeof needsApproval === 'function' ? needsApproval(args, context) : needsApproval,
    completionMessage(result: Json): string {
      if (typeof terminal === 'string') return terminal;
      if (typeof terminal === 'function') return terminal(result);
      const text =
        result && typeof result === 'object' && !Array.isArray(result) ? result['result'] : undefined;
      return typeof text === 'string' ? text : `Completed via ${options.name}.`;
    },
    execute: options.execute,
  });
}

/**
 * `budgetCompletion` is only for a tool that ends the turn (so nothing runs after it), may run
 * again after a crash (a save interrupted mid-way is re-run, not left "outcome unknown") and
 * runs unattended (nobody is asked to approve spending that has already stopped).
 */
function checkBudgetCompletion(
  name: string,
  value: unknown,
  tool: { kind: ToolKind; recovery: ToolRecovery; terminal: unknown; needsApproval: unknown },
): boolean {
  const { kind, recovery, terminal, needsApproval } = tool;
  if (typeof value !== 'boolean') throw new ArgumentError(`tool ${name}: budgetCompletion must be a boolean`);
  if (!value) return false;
  const why =
    kind !== 'ordinary'
      ? 'is only for tools built with defineTool'
      : terminal === false
        ? 'needs a terminal tool (terminal: true): nothing may run after the save'
        : recovery !== 'replaySafe'
          ? "needs recovery: 'replaySafe' (a save cut off by a crash runs again)"
          : needsApproval !== false
            ? 'cannot be combined with needsApproval (the save runs unattended)'
            : null;
  if (why) throw new ArgumentError(`tool ${name}: budgetCompletion ${why}`);
  return true;
}

const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|seconds?|m|minutes?|h|hours?)$/;

function unitMs(unit: string): number {
  if (unit === 'ms' || unit.startsWith('milli')) return 1;
  if (unit.startsWith('s')) return 1_000;
  if (unit.startsWith('m')) return 60_000;
  return 3_600_000;
}

/** `approvalTimeout` as ms: a positive number, or a string like '90 seconds' or '10 minutes'. */
function durationMs(tool: string, value: number | string | undefined): number | null {
  if (value === undefined) return null;
  const match = typeof value === 'string' ? DURATION.exec(value.trim()) : null;
  const ms = typeof value === 'number' ? value : match ? Number(match[1]) * unitMs(match[2]!) : NaN;
  if (!Number.isFinite(ms) || ms <= 0)
    throw new ArgumentError(
      `tool ${tool}: approvalTimeout must be a positive number of ms or a duration like '10 minutes'`,
    );
  return Math.round(ms);
}

/**
 * Validates model arguments against the tool's schema, with TurnKit's messages for unknown
 * and missing arguments (ToolValidationError). Returns the parsed arguments (defaults filled).
 */
export async function validateToolArguments<Schema extends ToolInputSchema>(
  tool: ToolDefinition<Schema>,
  args: JsonObject,
): Promise<ToolArgs<Schema>> {
  return (await parseToolInput(tool, args)) as ToolArgs<Schema>;
}

/** TurnKit's payload normalization: objects stay, arrays become {items}, the rest {result}. */
export function normalizeToolPayload(value: unknown): JsonObject {
  if (Array.isArray(value)) return { items: JSON.parse(JSON.stringify(value)) as Json[] };
  if (value !== null && typeof value === 'object') return JSON.parse(JSON.stringify(value)) as JsonObject;
  return { result: value === undefined || value === null ? '' : String(value) };
}
