/**
 * What the decisions of a tool call answer (decision 85). Approval, tool policy, budget
 * completion, replay and failure each look at the call through a `CallView`, which only
 * reads, and return a `Verdict`; the pipeline in `tool-call.ts` acts on it, and
 * `tool-execution.ts` makes the writes. A decision never writes.
 */
import type { Agent } from '../../agents/agent.js';
import { storedErrorClass } from '../../errors.js';
import type { ToolDefinition } from '../../agents/tool.js';
import type { ModelMessage } from '../../models/types.js';
import type { JsonObject, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import type { TurnEvent } from '../step/events.js';
import type { toolCallParts, TurnState } from '../step/turn-state.js';

export type ToolCall = ReturnType<typeof toolCallParts>[number];

/** The call as a decision sees it: what it is, and the reads a decision may make. */
export interface CallView {
  readonly call: ToolCall;
  /** The tool the call names, if the turn may call it. */
  readonly tool: ToolDefinition | undefined;
  /** The turn as the activity opened it: what the tool and the policy see. */
  readonly turn: TurnRecord;
  readonly agent: Agent;
  /** The turn's state as this step last read or wrote it. */
  readonly state: TurnState;
  /** What the call was made from (`ToolContext.history`). */
  history(): Promise<ModelMessage[]>;
  /** The tool of that name this turn may call (a skill's tools once the skill is loaded). */
  toolFor(name: string): Promise<ToolDefinition | undefined>;
  /** This turn's execution of the call `callId`, if it has one. */
  executionOf(callId: string): Promise<ToolExecutionRecord | undefined>;
  /** A turn's executions of the tool `toolName`, in creation order (replay reads a recorded turn's). */
  executionsOf(turnId: string, toolName: string): Promise<ToolExecutionRecord[]>;
  /** For the operator's log, not the transcript. */
  warn(message: string): void;
}

/**
 * How the call ends: its row's status and its one result, with what commits with them.
 * `cancelled` is a call that never ran, closed with `{ skipped: true, message }`.
 */
export interface Closing {
  status: 'completed' | 'failed' | 'interrupted' | 'cancelled';
  payload: JsonObject;
  /** Appended in the close's own transaction, before its own `tool_call.*` event. */
  events?: readonly TurnEvent[];
  /** Merged into the turn's state in the same transaction. */
  patch?: Partial<TurnState>;
  /** Raised once the close has committed: the attempt ends on it (a budget denial fails the turn). */
  raise?: Error;
}

/**
 * `run`: nothing stops the call (`events` go out with its start); `hold`: it waits for a
 * person's approval; `close`: it ends with this result; `delegate`: this attempt ends on
 * `error` and whoever comes next (Temporal's retry, the turn's end) finishes the call;
 * `retry` asks the pipeline to count the run first (a replay-safe tool that threw).
 */
export type Verdict =
  | { kind: 'run'; events?: readonly TurnEvent[] }
  | { kind: 'hold' }
  | { kind: 'close'; closing: Closing }
  | { kind: 'delegate'; error: unknown; retry?: boolean };

/** A verdict that decides the call: what the pipeline concludes it with. */
export type Decided = Exclude<Verdict, { kind: 'run' }>;

export const RUN: Verdict = { kind: 'run' };

/** The verdict that fails the call with `message` (and `details`), unrun or run. */
export function failWith(
  message: string,
  details?: JsonObject,
  more: Omit<Closing, 'status' | 'payload'> = {},
): Decided {
  return {
    kind: 'close',
    closing: { status: 'failed', payload: details ? { message, details } : { message }, ...more },
  };
}

/** The verdict that closes a call that never ran, "not executed: …" as its skipped result. */
export function skipWith(message: string): Decided {
  return { kind: 'close', closing: { status: 'cancelled', payload: { skipped: true, message } } };
}

/** The stored class of what a call threw, with the details its failure records. */
export function errorDetails(error: unknown, extra: JsonObject = {}): JsonObject {
  return { class: storedErrorClass(error instanceof Error ? error.name : 'Error'), ...extra };
}
