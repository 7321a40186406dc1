/**
 * An evaluation's cases: from a JSONL file (one `{ input, expected?, tags?, id? }` per line) or
 * from recorded conversations, selected by agent, time and tags (decision 48).
 */
import { readFile } from 'node:fs/promises';
import { ArgumentError, ContentErasedError, InputError } from '../errors.js';
import type { ConversationRecord, Store, TurnRecord } from '../store/types.js';

export interface EvalCase {
  id: string;
  /** The task the agent gets. */
  input: string;
  /** What the output should be, for the scorers that compare (exact, regex). */
  expected?: string;
  tags?: string[];
  /** The recorded root turn the case came from: its tools replay, and it is the default baseline. */
  recordedTurnId?: string;
}

/** Which recorded runs become cases: completed root turns of `agent`, oldest first. */
export interface RecordedSelection {
  agent: string;
  /** Only runs created at or after this time. */
  since?: Date | string;
  /** Only runs created before this time. */
  until?: Date | string;
  /** Only conversations whose `metadata.tags` hold every one of these. */
  tags?: readonly string[];
  limit?: number;
}

/** The conversation metadata key that marks a conversation an evaluation created. */
export const EVAL_METADATA_KEY = 'turnkit_eval';

const stringList = (value: unknown): value is string[] =>
  Array.isArray(value) && value.every((item) => typeof item === 'string');

/** Parses a JSONL cases file; a bad line is an InputError naming its line number. */
export async function readEvalCases(path: string): Promise<EvalCase[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new InputError(`eval cases: cannot read ${path}: ${(error as Error).message}`);
  }
  const cases: EvalCase[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const where = `eval cases ${path}, line ${index + 1}`;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch {
      throw new InputError(`${where}: not JSON`);
    }
    cases.push(caseOf(row, where, `line-${index + 1}`));
  });
  if (cases.length === 0) throw new InputError(`eval cases ${path}: no cases`);
  const ids = new Set<string>();
  for (const item of cases) {
    if (ids.has(item.id)) throw new InputError(`eval cases ${path}: the id ${item.id} is used twice`);
    ids.add(item.id);
  }
  return cases;
}

function caseOf(row: unknown, where: string, defaultId: string): EvalCase {
  if (!row || typeof row !== 'object' || Array.isArray(row)) throw new InputError(`${where}: not an object`);
  const { id, input, expected, tags } = row as Record<string, unknown>;
  if (typeof input !== 'string' || input.trim() === '')
    throw new InputError(`${where}: input must be a non-empty string`);
  if (expected !== undefined && typeof expected !== 'string')
    throw new InputError(`${where}: expected must be a string`);
  if (tags !== undefined && !stringList(tags)) throw new InputError(`${where}: tags must be strings`);
  if (id !== undefined && (typeof id !== 'string' || id === ''))
    throw new InputError(`${where}: id must be a non-empty string`);
  return {
    id: id ?? defaultId,
    input,
    ...(expected !== undefined ? { expected } : {}),
    ...(tags ? { tags } : {}),
  };
}

function timeOf(value: Date | string | undefined, what: string): number | null {
  if (value === undefined) return null;
  const time = value instanceof Date ? value.getTime() : Date.parse(value);
  if (Number.isNaN(time)) throw new ArgumentError(`${what} is not a time: ${String(value)}`);
  return time;
}

/** The task text of a recorded turn: its trigger message, as the user wrote it. */
async function taskOfTurn(store: Store, turn: TurnRecord): Promise<string | null> {
  const through = turn.contextMessageSequence;
  const trigger = (
    await store.listMessages(turn.conversationId, { throughSequence: through, afterSequence: through - 1 })
  ).at(-1);
  if (!trigger || trigger.role !== 'user') return null;
  const taskText = trigger.metadata['task_text'];
  if (typeof taskText === 'string') return taskText;
  const text = trigger.content.find((part) => part.type === 'text');
  return text && text.type === 'text' ? text.text : null;
}

/** Turns read per page while selecting recorded cases. */
const CASE_PAGE = 100;

/**
 * Cases from recorded runs: each completed root turn of the agent (not one an evaluation
 * ran) whose trigger is a user's task, oldest first; its output is the expected output. The
 * store selects the agent's completed root turns of the time range a page at a time, and the
 * selection stops once it has `limit` cases; each page's conversations and triggers are read
 * together, each conversation once.
 */
export async function recordedCases(store: Store, selection: RecordedSelection): Promise<EvalCase[]> {
  if (!selection || typeof selection.agent !== 'string' || selection.agent === '')
    throw new ArgumentError('recorded cases need { agent }');
  const since = timeOf(selection.since, 'since');
  const until = timeOf(selection.until, 'until');
  const wanted = selection.tags ?? [];
  if (!stringList(wanted)) throw new ArgumentError('tags must be strings');
  const limit = selection.limit ?? Infinity;
  const page = Math.min(CASE_PAGE, Number.isFinite(limit) ? Math.max(limit, 1) : CASE_PAGE);
  const cases: EvalCase[] = [];
  let after: { createdAt: string; id: string } | undefined;
  while (cases.length < limit) {
    const turns = await store.listTurns({
      agentName: selection.agent,
      status: 'completed',
      root: true,
      ...(since !== null ? { createdFrom: new Date(since).toISOString() } : {}),
      ...(until !== null ? { createdBefore: new Date(until).toISOString() } : {}),
      ...(after ? { after } : {}),
      limit: page,
    });
    const conversations = new Map<string, Promise<ConversationRecord>>();
    const conversationOf = (id: string) => {
      if (!conversations.has(id)) conversations.set(id, store.loadConversation(id));
      return conversations.get(id)!;
    };
    const found = await Promise.all(turns.map((turn) => caseOfTurn(store, turn, wanted, conversationOf)));
    for (const item of found) if (item && cases.length < limit) cases.push(item);
    if (turns.length < page) break;
    const last = turns.at(-1)!;
    after = { createdAt: last.createdAt, id: last.id };
  }
  return cases;
}

/** The case a recorded turn makes, or null (an evaluation's own run, other tags, no task). */
async function caseOfTurn(
  store: Store,
  turn: TurnRecord,
  wanted: readonly string[],
  conversationOf: (id: string) => Promise<ConversationRecord>,
): Promise<EvalCase | null> {
  const conversation = await conversationOf(turn.conversationId);
  if (conversation.metadata[EVAL_METADATA_KEY] !== undefined) return null;
  const tags = stringList(conversation.metadata['tags']) ? conversation.metadata['tags'] : [];
  if (!wanted.every((tag) => tags.includes(tag))) return null;
  // A run whose tenant's key was deleted (decision 80) is no longer data: it makes no case.
  const input = await taskOfTurn(store, turn).catch((error: unknown) => {
    if (error instanceof ContentErasedError) return null;
    throw error;
  });
  if (input === null) return null;
  return {
    id: turn.id,
    input,
    ...(turn.outputText !== null ? { expected: turn.outputText } : {}),
    ...(tags.length > 0 ? { tags } : {}),
    recordedTurnId: turn.id,
  };
}
