import { randomBytes } from 'node:crypto';
import type { ContentPart, JsonObject } from '../../store/types.js';

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
