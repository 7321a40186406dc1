/**
 * Typed errors. Every error TurnKit raises on purpose is a TurnKitError; anything else is an
 * infrastructure failure. Activities map these deliberately onto Temporal failures: the
 * `retryable` flag decides whether Temporal may retry the activity that raised it.
 */
export class TurnKitError extends Error {
  /** Whether a Temporal retry of the activity that raised this could succeed. */
  readonly retryable: boolean = false;
  readonly details: Record<string, unknown> | undefined;
  /** How long Temporal waits before the retry (`nextRetryDelay`), when `retryable`. */
  readonly retryDelayMs: number | undefined;

  constructor(
    message: string,
    options?: { cause?: unknown; details?: Record<string, unknown>; retryDelayMs?: number },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.details = options?.details;
    this.retryDelayMs = options?.retryDelayMs;
  }
}

/** A caller passed something malformed: unknown keys, unknown statuses, bad options. */
export class ArgumentError extends TurnKitError {}
/** Misconfiguration: an unregistered agent, a store that cannot do what was asked. */
export class ConfigError extends TurnKitError {}
/**
 * A payload the encryption codec cannot open: its key id (`keyId`; undefined when the payload
 * names none) is not among the codec's keys, or it does not decrypt under that key.
 */
export class CodecKeyError extends ConfigError {
  readonly keyId: string | undefined;
  constructor(message: string, options: { keyId: string | undefined; cause?: unknown }) {
    super(message, { details: { keyId: options.keyId }, cause: options.cause });
    this.keyId = options.keyId;
  }
}
/** A model that cannot be used with the configured client. */
export class ModelAccessError extends ConfigError {}
/** A run's input failed the agent's `inputSchema`; nothing was written. */
export class InputError extends TurnKitError {}
/** A root-wide limit (iterations, tool executions, spend, depth, timeout) was reached. */
export class BudgetError extends TurnKitError {}
/** The authorization policy did not return literally `true`. */
export class AuthorizationError extends TurnKitError {}
/** `run.stream({ after })` got a cursor that no part of this run ever had. */
export class StreamCursorError extends ArgumentError {}
/** A model provider failed for good (4xx, malformed answer, retries exhausted). */
export class ModelError extends TurnKitError {
  readonly status: number | undefined;
  override readonly retryable: boolean;
  /** How long the provider asked to wait (`retry-after-ms`, `retry-after`), when it said. */
  readonly retryAfterMs: number | undefined;
  /** The model id the failed call asked for, when known. */
  readonly model: string | undefined;
  constructor(
    message: string,
    options?: {
      cause?: unknown;
      status?: number;
      retryable?: boolean;
      retryDelayMs?: number;
      retryAfterMs?: number;
      model?: string;
      details?: Record<string, unknown>;
    },
  ) {
    super(message, options);
    this.status = options?.status;
    this.retryable = options?.retryable ?? false;
    this.retryAfterMs = options?.retryAfterMs;
    this.model = options?.model;
  }
}
/**
 * A model of a routed step's chain used up its attempts (decision 43): not a failure of the
 * turn, but the workflow's cue to schedule the step again on the next model's queue
 * (`details.index`).
 */
export class ModelFallback extends ModelError {}
/**
 * A person's control (approve, reject, pause, resume, steer) that the turn cannot take as it
 * is: an unknown or already decided tool call, a finished turn, resuming a turn that is not
 * paused. `code` names which. Nothing was written.
 */
export class ControlError extends TurnKitError {
  readonly code: string;
  constructor(message: string, options?: { code?: string; cause?: unknown }) {
    super(message, options);
    this.code = options?.code ?? 'refused';
  }
}
/**
 * A post to a busy conversation under the `reject` policy (decision 41): nothing was written.
 * `receipt` is the post's receipt, disposition `rejected`; `busy` the turns holding the lane.
 */
export class ConversationBusyError extends TurnKitError {
  get receipt(): Record<string, unknown> | undefined {
    return this.details?.['receipt'] as Record<string, unknown> | undefined;
  }
}
/**
 * A post whose request id the conversation already holds for another text (decision 57): a
 * request id names one request, so its second use with other words is refused, not answered
 * with the first one's receipt. Nothing was written.
 */
export class PostConflictError extends TurnKitError {}
/**
 * A fork (or a regenerate) the conversation cannot take at that message (decision 47):
 * `code` is `tool_round` (a call there has no result yet), `unfinished_turn` (a turn still
 * working has not answered it), `foreign_message` (the message is another conversation's) or
 * `no_input` (the run has no input message to give again). Nothing was written.
 */
export class ForkError extends TurnKitError {
  readonly code: string;
  constructor(message: string, options: { code: string; details?: Record<string, unknown> }) {
    super(message, options.details ? { details: options.details } : undefined);
    this.code = options.code;
  }
}
/** A tool failed in a way the model should read: its execution is failed, the turn goes on. */
export class ToolError extends TurnKitError {}
/** Tool arguments did not match the tool's schema. */
export class ToolValidationError extends ToolError {}
/** Compaction could not produce a summary. */
export class CompactionError extends TurnKitError {}
/** The store failed: a missing row, a corrupt or read-only database, an unreachable server. */
export class StoreError extends TurnKitError {
  override readonly retryable: boolean;
  constructor(message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, options);
    this.retryable = options?.retryable ?? false;
  }
}
/** A row that was asked for by id does not exist. */
export class RecordNotFound extends StoreError {
  constructor(
    readonly table: string,
    readonly id: string,
  ) {
    super(`${table} ${id} not found`);
  }
}
/**
 * Content sealed with a tenant's key (decision 80) whose key was deleted: crypto-shredded.
 * `tenant` names whose. Reads of that content raise it through every door; a write of new
 * content for a tenant without a key raises it too. Never retried: the key does not come back.
 */
export class ContentErasedError extends TurnKitError {
  readonly tenant: string;
  constructor(tenant: string, message: string) {
    super(message, { details: { tenant } });
    this.tenant = tenant;
  }
}
/**
 * The turn's claim token changed (completed, cancelled, reset, superseded): the writer no
 * longer owns the turn and must stop. Never retried.
 */
export class LostClaim extends TurnKitError {}
/**
 * A turn's workflow closed (terminated, timed out, gone) without the turn's terminal write:
 * repair failed the turn with this class; the message says what happened to the workflow.
 */
export class WorkflowClosed extends TurnKitError {}
/**
 * The turn's rows committed (it is submitted) but its workflow did not start. The turn is not
 * lost: `start(turnId)` repeats the start, and its conversation's lane (or `turnkit repair`)
 * starts it when it finds it (`details.turnId`).
 */
export class WorkflowStartError extends TurnKitError {}
/**
 * A store step of a workflow task that a newer task of the same run has overtaken: a worker
 * paused past the workflow-task timeout still holds the run's claim token, so its local
 * activities are fenced by the task's history length instead. Never retried.
 */
export class StaleTask extends LostClaim {}

/**
 * The names of TurnKit's own error classes, plus the two classes TurnKit stores without an
 * exception behind them: `Cancelled` (spec §5.9) and `OutputAudit` (spec §3.3).
 */
const TURNKIT_CLASSES = new Set([
  'ArgumentError',
  'ConfigError',
  'ModelAccessError',
  'InputError',
  'BudgetError',
  'AuthorizationError',
  'ModelError',
  'ToolError',
  'ToolValidationError',
  'CompactionError',
  'StoreError',
  'RecordNotFound',
  'ContentErasedError',
  'LostClaim',
  'StaleTask',
  'WorkflowClosed',
  'WorkflowStartError',
  'ControlError',
  'ConversationBusyError',
  'Cancelled',
  'OutputAudit',
  // An activity that timed out (the workflow's own classification of a Temporal timeout).
  'TimeoutError',
]);

const PREFIX = 'TurnKit::';

/**
 * The error class as a TurnKit-compatible store row carries it (`error.class`,
 * `error.details.class`, `options.callback_denied.class`): TurnKit's own classes are written
 * `TurnKit::<Class>` as the spec writes them (`TurnKit::Cancelled`, `TurnKit::ModelError`);
 * any other class (a tool's `TypeError`) keeps its name. Idempotent. Every write path uses
 * it, and so does every reader that compares a stored class.
 */
export function storedErrorClass(name: string): string {
  if (name.startsWith(PREFIX)) return name;
  if (name === 'TurnKitError') return `${PREFIX}Error`;
  return TURNKIT_CLASSES.has(name) ? `${PREFIX}${name}` : name;
}
/**
 * A worker was handed work of a turn whose rows are in another store (two stores on one task
 * queue): refused, never retried, naming both stores (decision 67).
 */
export class StoreMismatchError extends TurnKitError {}
