/**
 * The texts a tool call's result says when the call was stopped: what the model reads, and
 * what a decision (tools/verdict.ts), the result writer (tool-results.ts) and a repair
 * (end/transcript-repair.ts) all write alike.
 */

/** An interrupted call's result: what stopped it, and that its outcome is unknown. */
export function outcomeUnknown(cause: string): string {
  return `interrupted (${cause}) while this tool was running; its outcome is unknown, do not assume either way`;
}

/** A call whose attempt died with its worker, found still running by the retry. */
export const OUTCOME_UNKNOWN = outcomeUnknown('the worker running it was lost');
