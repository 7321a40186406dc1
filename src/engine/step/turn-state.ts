import type { ContentPart, Json, JsonObject, Store, TurnRecord } from '../../store/types.js';
import type { Phase } from '../../contract/digests.js';

/**
 * The runtime state persisted in `options.state` (spec §2.3), in TurnKit's key names, plus
 * `model_step` / `reserved_step`: the workflow's model-step number whose iteration was
 * reserved and whose response was stored, which makes the model activity idempotent; and the
 * engine's own counts of provider and tool errors, which an attempt lost with its worker
 * never adds to.
 */
export interface TurnState {
  phase?: Phase;
  parts?: ContentPart[] | null;
  candidate?: string | null;
  output_data?: Json;
  terminal_tool_name?: string | null;
  iterations?: number;
  revisions_used?: number;
  policy_audit?: JsonObject;
  /**
   * Messages completed tool calls asked to append once every call of the response has its
   * result (`ToolContext.appendAfterResults`): written when the tools phase closes.
   */
  after_results?: JsonObject[] | null;
  /** Verdicts of the judges that already answered for the candidate of `key`, by policy index. */
  output_judged?: { key: string; verdicts: Record<string, JsonObject[]> } | null;
  /** What the `outputAudit` activity found for the candidate whose key it names. */
  output_audit?: { key: string; violations: JsonObject[] } | null;
  /** Output-check runs that threw, for the candidate `key` (`maxOutputAttempts`). */
  output_errors?: { step: string; count: number };
  wait_input?: boolean;
  /** Pauses and steerings authorized so far (decision 82: a step finishing the turn checks it). */
  boundary_controls?: number;
  reserved_step?: string;
  model_step?: string;
  /** Provider errors of the model step `step` so far (`maxProviderAttempts`). */
  provider_errors?: { step: string; count: number };
  /** The last provider error of each model the step tried (fallback chains, decision 42). */
  model_errors?: { step: string; last: Record<string, string> };
  /** Tokens and cost per model that served the turn's steps (fallback chains). */
  model_usage?: Record<
    string,
    { calls: number; input_tokens: number; output_tokens: number; cost: number | null }
  >;
  /** Runs of a replay-safe tool that threw, per execution id (`maxToolAttempts`). */
  tool_errors?: Record<string, number>;
  /** The model step whose compaction ran (compactStep is idempotent per step key). */
  compaction_step?: string;
  /** A turn built with `compact: true` compacted (or found nothing to) once. */
  compaction_forced?: boolean;
  /** Ids of the steering Updates already applied (each person's message is written once). */
  steers_applied?: string[];
  /**
   * The one call that may still run after the spend limit was reached (a `budgetCompletion`
   * tool); every other call of the response is closed "not executed: spend limit reached".
   */
  budget_completion_call_id?: string;
  /** Signatures already used, by MAC, until they expire: each verifies once (`signature-use.ts`). */
  signatures_used?: Record<string, { expires_at: string; use: string }>;
}

export function turnState(turn: TurnRecord): TurnState {
  const state = turn.options['state'];
  return state && typeof state === 'object' && !Array.isArray(state) ? (state as TurnState) : {};
}

export function phaseOf(turn: TurnRecord): Phase {
  return turnState(turn).phase ?? 'model';
}

/** Iterations this turn reserved (legacy top-level `options.iterations` as fallback). */
export function iterationsOf(turn: TurnRecord): number {
  const fromState = turnState(turn).iterations;
  if (typeof fromState === 'number') return fromState;
  const legacy = turn.options['iterations'];
  return typeof legacy === 'number' ? legacy : 0;
}

/** Errors one step has seen, counted in the turn's state (`provider_errors`, `output_errors`). */
export type StepErrorField = 'provider_errors' | 'output_errors';

/**
 * The count of `step`'s errors under `field` once one more is added: the engine counts them in
 * the turn's state, so every worker sees the count; a different step starts over at 1. An
 * attempt that died with its worker never counts.
 */
export function nextStepErrorCount(state: TurnState, field: StepErrorField, step: string): number {
  const previous = state[field];
  return previous?.step === step ? previous.count + 1 : 1;
}

export function toolCallParts(parts: readonly ContentPart[] | null | undefined) {
  return (parts ?? []).filter(
    (part): part is Extract<ContentPart, { type: 'tool_call' }> => part.type === 'tool_call',
  );
}

export function principalOf(turn: TurnRecord): Json {
  return turn.options['principal'] ?? null;
}

export function contextOf(turn: TurnRecord): JsonObject {
  const context = turn.options['context'];
  return context && typeof context === 'object' && !Array.isArray(context)
    ? (JSON.parse(JSON.stringify(context)) as JsonObject)
    : {};
}

/** Depth of a turn in its tree: 0 for a root, parent's depth + 1 otherwise. */
export async function depthOf(store: Store, turn: TurnRecord): Promise<number> {
  let depth = 0;
  let current = turn;
  while (current.parentTurnId) {
    current = await store.loadTurn(current.parentTurnId);
    depth += 1;
  }
  return depth;
}
