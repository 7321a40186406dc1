import { ArgumentError } from '../errors.js';
import type { Json, JsonObject, TurnRecord } from '../store/types.js';
import type { CallHistory, ToolKind } from './tool.js';

/** A call the model proposed, as the tool policy sees it (before anything runs). */
export interface ToolPolicyCall {
  /** The tool call's id in the model's response. */
  readonly id: string;
  readonly name: string;
  /** The arguments as the model gave them (not yet validated against the tool's schema). */
  readonly arguments: JsonObject;
  readonly kind: ToolKind;
  readonly readOnly: boolean;
}

/** The turn the call belongs to. */
export interface ToolPolicyContext {
  readonly agent: string;
  /** The application's principal, read from the turn (never from model arguments). */
  readonly principal: Json;
  /** The run context the application passed to `run` (a copy). */
  readonly context: JsonObject;
  readonly turn: TurnRecord;
  /** The messages the model was sent for the response holding the call (read when called). */
  readonly history: CallHistory;
}

/** `'allow'`, or `{ block: reason }`: the call is not run and the model reads the reason. */
export type ToolPolicyDecision = 'allow' | { block: string };

/**
 * Asked once per tool call, before it runs (and before any approval is asked); its decision
 * is stored with the call's execution row, so a retried activity never asks again.
 */
export type ToolPolicy = (
  call: ToolPolicyCall,
  context: ToolPolicyContext,
) => ToolPolicyDecision | Promise<ToolPolicyDecision>;

export function resolveToolPolicy(agent: string, policy: unknown): ToolPolicy | undefined {
  if (policy === undefined) return undefined;
  if (typeof policy !== 'function')
    throw new ArgumentError(`agent ${agent}: toolPolicy must be a function (call, context) => decision`);
  return policy as ToolPolicy;
}
