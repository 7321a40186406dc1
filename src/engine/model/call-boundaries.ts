/**
 * Where input that arrived while another turn was working is projected (decision 52; TurnKit
 * 0.7: busy-time input is projected at the receiving turn's context boundary). A message the
 * application added while a turn of the conversation was under way (a queued ask, a post or a
 * delivery to a busy conversation, an interrupting post) is shown after everything that turn
 * wrote, never between a call and its result; and the turn's own trigger comes after every
 * earlier turn's messages, right before its own. Only the order the model sees changes: the
 * stored sequence stays as written, and compaction reads it as stored.
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

/** The turn whose request is built: its id, and the message that triggered it. */
export interface ViewingTurn {
  id: string;
  triggerMessageId: string | null;
}

/** Input nobody's turn wrote: a user's message, a delivery, a notice (never a call or a result). */
const isInput = (message: MessageRecord) =>
  message.turnId === null && message.role !== 'assistant' && message.kind !== 'tool_result';

/** A message another turn wrote (summaries are placed by their range, not by their writer). */
const otherTurnOf = (message: MessageRecord, viewer: ViewingTurn) =>
  message.turnId !== null && message.turnId !== viewer.id && message.kind !== 'context_summary'
    ? message.turnId
    : null;

/**
 * `messages` (in stored order) as the viewing turn's model reads them: input inside another
 * turn's span (between its first and last message here) or inside an open call span moves to
 * just after both end; the viewer's trigger moves after every other turn's messages.
 */
export function atCallBoundaries(messages: readonly MessageRecord[], viewer: ViewingTurn): MessageRecord[] {
  const lastOf = new Map<string, number>();
  messages.forEach((message, index) => {
    const turn = otherTurnOf(message, viewer);
    if (turn) lastOf.set(turn, index);
  });
  const open = new Set<string>();
  const held: MessageRecord[] = [];
  const shown: MessageRecord[] = [];
  let horizon = -1;
  let trigger: MessageRecord | null = null;
  messages.forEach((message, index) => {
    if (message.id === viewer.triggerMessageId) {
      trigger = message;
      return;
    }
    if (isInput(message) && (open.size > 0 || horizon > index)) {
      held.push(message);
      return;
    }
    const turn = otherTurnOf(message, viewer);
    if (turn) horizon = Math.max(horizon, lastOf.get(turn)!);
    shown.push(message);
    const { opens, closes } = callsOf(message);
    for (const id of opens) open.add(id);
    for (const id of closes) open.delete(id);
    if (open.size === 0 && horizon <= index && held.length > 0) shown.push(...held.splice(0));
  });
  shown.push(...held);
  if (trigger === null) return shown;
  // Before the viewer's own messages (its calls, results, answers), after everything else.
  const own = shown.findIndex(
    (message) => message.turnId === viewer.id && message.kind !== 'context_summary',
  );
  shown.splice(own === -1 ? shown.length : own, 0, trigger);
  return shown;
}
