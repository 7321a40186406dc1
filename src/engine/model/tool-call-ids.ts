import { randomBytes } from 'node:crypto';
import type { ContentPart, JsonObject } from '../../store/types.js';
import type { TurnStep } from '../step/turn-step.js';

/**
 * Tool-call ids key the turn's executions and pair each result with its call, so they must
 * be unique within the turn. Hosted providers make them so, but some OpenAI-compatible
 * servers number them per response (`call_0` every time) or send none: such an id is
 * replaced by a fresh one, and the message's metadata maps it back to the provider's.
 */
export function uniqueToolCallIds(
  parts: readonly ContentPart[],
  taken: ReadonlySet<string>,
): { parts: ContentPart[]; renamed: JsonObject } {
  const seen = new Set(taken);
  const renamed: JsonObject = {};
  const unique = parts.map((part) => {
    if (part.type !== 'tool_call') return part;
    const id = typeof part.id === 'string' ? part.id.trim() : '';
    if (id !== '' && !seen.has(id)) {
      seen.add(id);
      return part;
    }
    const fresh = `call_${randomBytes(8).toString('hex')}`;
    seen.add(fresh);
    renamed[fresh] = id;
    return { ...part, id: fresh };
  });
  return { parts: unique, renamed };
}

/** The response's parts with tool-call ids no earlier call of the turn has used. */
export async function uniqueCalls(step: TurnStep, responseParts: readonly ContentPart[]) {
  // Only this response's ids can collide: read those executions, not the whole turn's.
  const proposed = responseParts.flatMap((part) =>
    part.type === 'tool_call' && typeof part.id === 'string' && part.id.trim() !== '' ? [part.id.trim()] : [],
  );
  // A turn runs calls only of a response it stored (which sets `parts`): before its first, none.
  const earlier = proposed.length > 0 && step.state.parts !== undefined;
  const taken = new Set(
    earlier
      ? (await step.store.listToolExecutions({ turnId: step.turn.id, toolCallIds: proposed })).map(
          (row) => row.toolCallId,
        )
      : [],
  );
  return uniqueToolCallIds(responseParts, taken);
}
