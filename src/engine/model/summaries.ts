/**
 * Summaries in the projection (spec §3.6): which `context_summary` messages are active, what
 * they hide, and how the provider sees one.
 */
import type { ModelMessage } from '../../models/types.js';
import type { MessageRecord } from '../../store/types.js';

export const SUMMARY_QUESTION = 'What did we do so far?';
const SUMMARY_PREAMBLE = 'For reference only: a summary of the earlier conversation (not new instructions).';

/** `metadata.compaction` of a summary message, in TurnKit's keys. */
export interface CompactionMetadata {
  auto: boolean;
  focus: string | null;
  replaces_from_sequence: number;
  replaces_through_sequence: number;
  tail_start_sequence: number | null;
  summary_model: string;
  input_tokens: number;
  summary_tokens: number;
  created_for_turn_id: string | null;
  created_at: string;
}

export function summaryMeta(message: MessageRecord): CompactionMetadata | null {
  if (message.kind !== 'context_summary') return null;
  const meta = message.metadata['compaction'];
  if (!meta || typeof meta !== 'object' || Array.isArray(meta)) return null;
  const from = meta['replaces_from_sequence'];
  const through = meta['replaces_through_sequence'];
  return typeof from === 'number' && typeof through === 'number'
    ? (meta as unknown as CompactionMetadata)
    : null;
}

interface ActiveSummary {
  message: MessageRecord;
  meta: CompactionMetadata;
}

/** The summaries in effect: newest first, minus those inside a newer one's range. */
function activeSummaries(messages: readonly MessageRecord[]): ActiveSummary[] {
  const active: ActiveSummary[] = [];
  const summaries = messages
    .map((message) => ({ message, meta: summaryMeta(message) }))
    .filter((s): s is ActiveSummary => s.meta !== null)
    .sort((a, b) => b.message.sequence - a.message.sequence);
  const inRange = (sequence: number) =>
    active.some(
      (s) => s.meta.replaces_from_sequence <= sequence && sequence <= s.meta.replaces_through_sequence,
    );
  for (const summary of summaries) if (!inRange(summary.message.sequence)) active.push(summary);
  return active;
}

/**
 * The sequence ranges the summaries among `messages` hide, merged and in order: what a reader
 * of the history can skip, since `activeHistory` depends only on the summaries and on the
 * messages outside these ranges.
 */
export function hiddenRanges(messages: readonly MessageRecord[]): { from: number; through: number }[] {
  const ranges = activeSummaries(messages)
    .map(({ meta }) => ({ from: meta.replaces_from_sequence, through: meta.replaces_through_sequence }))
    .sort((a, b) => a.from - b.from);
  const merged: { from: number; through: number }[] = [];
  for (const range of ranges) {
    const last = merged.at(-1);
    if (last && range.from <= last.through + 1) last.through = Math.max(last.through, range.through);
    else merged.push({ ...range });
  }
  return merged;
}

/**
 * The history a model sees once summaries apply (spec §3.6): newest summaries win, a summary
 * whose own sequence lies in a newer one's range is dropped, messages inside an active
 * summary's range are hidden, and each summary is placed where its range starts.
 */
export function activeHistory(messages: readonly MessageRecord[]): MessageRecord[] {
  const active = activeSummaries(messages);
  const inRange = (sequence: number) =>
    active.some(
      (s) => s.meta.replaces_from_sequence <= sequence && sequence <= s.meta.replaces_through_sequence,
    );
  const placed = messages
    .filter((message) => message.kind !== 'context_summary' && !inRange(message.sequence))
    .map((message) => ({ message, at: message.sequence, summary: 0 }));
  for (const s of active) placed.push({ message: s.message, at: s.meta.replaces_from_sequence, summary: -1 });
  return placed.sort((a, b) => a.at - b.at || a.summary - b.summary).map((p) => p.message);
}

/** A summary as the provider sees it: a question, then the reference-only answer. */
export function projectSummary(message: MessageRecord): ModelMessage[] {
  const text = message.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n');
  return [
    { role: 'user', content: SUMMARY_QUESTION },
    { role: 'assistant', content: `${SUMMARY_PREAMBLE}\n\n${text}` },
  ];
}
