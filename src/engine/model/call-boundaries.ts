/**
 * A message the application added while another turn was between a tool call and its results
 * (a delivery or a post to a busy conversation, an interrupting post) is projected after
 * those results, at that turn's boundary (TurnKit 0.7: busy-time input is projected at the
 * context boundary): a provider refuses a user message between a call and its result. Only the
 * order the model sees changes; the stored sequence stays as written.
 */
import type { MessageRecord } from '../../store/types.js';

/** The tool-call ids a message opens (an assistant's calls) or closes (a result). */
function callsOf(message: MessageRecord): { opens: string[]; closes: string[] } {
  const opens: string[] = [];
  const closes: string[] = [];
  for (const part of message.content) {
    if (part.type === 'tool_call') opens.push(part.id);
    if (part.type === 'tool_result') closes.push(part.tool_call_id);
  }
  return { opens, closes };
}

/** `messages` with every turnless user message inside an open call span moved to just after it. */
export function atCallBoundaries(messages: readonly MessageRecord[]): MessageRecord[] {
  const open = new Set<string>();
  const held: MessageRecord[] = [];
  const shown: MessageRecord[] = [];
  for (const message of messages) {
    if (open.size > 0 && message.turnId === null && message.role === 'user') {
      held.push(message);
      continue;
    }
    shown.push(message);
    const { opens, closes } = callsOf(message);
    for (const id of opens) open.add(id);
    for (const id of closes) open.delete(id);
    if (open.size === 0 && held.length > 0) shown.push(...held.splice(0));
  }
  return [...shown, ...held];
}
