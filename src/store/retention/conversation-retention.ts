/**
 * Whole conversations leave by age (no activity since the cutoff) or by a keep-latest count
 * (decision 64), with every row they hold: stream parts, events, waits, tool executions,
 * deliveries to them, messages, turns, and their sub-agents' conversations. A conversation
 * with an unfinished turn never leaves, and neither does one whose turn trees reach into
 * another conversation. The rows go a batch per transaction, each under the conversation's
 * lock after checking again that no turn of it is unfinished: a post that arrives meanwhile
 * stops the deletion, and the next pass decides again.
 */
import type { LockKey, Row } from '../sql/driver.js';
import type { PrunedKind, PrunePass } from './prune-pass.js';
import { ENDED, epochOf } from './prune-pass.js';

export interface ConversationLimits {
  /** Conversations with no activity since this time leave. */
  inactiveBeforeMs: number | null;
  /** Only this many conversations, newest first, are kept. */
  keepLatest: number | null;
}

interface Candidate {
  id: string;
  createdMs: number;
}

const PAGE = 100;

/** Conversations a retention policy counts and removes: not a sub-agent's, not TurnKit's own. */
function ownedByUsers(pass: PrunePass): string {
  const sub = pass.sql.dialect.jsonHasString('metadata', 'parent_conversation_id');
  return `agent_name NOT LIKE 'turnkit:%' AND (CASE WHEN ${sub} THEN 0 ELSE 1 END) = 1`;
}

/**
 * The tables a conversation's rows live in, in the order they are deleted, keyed by the
 * conversation. A table added later that holds rows of a conversation or its turns needs its
 * entry here, or removing the conversation leaves those rows behind (or fails on a foreign key).
 */
const PER_CONVERSATION: readonly { kind: PrunedKind; table: string; key: string; rows: string }[] = [
  {
    kind: 'streamParts',
    table: 'turnkit_stream_parts',
    key: 'sequence',
    rows: `SELECT p.sequence FROM turnkit_stream_parts p JOIN turnkit_turns t ON t.id = p.root_turn_id WHERE t.conversation_id = ?`,
  },
  {
    kind: 'events',
    table: 'turnkit_events',
    key: '(turn_id, sequence)',
    rows: `SELECT e.turn_id, e.sequence FROM turnkit_events e JOIN turnkit_turns t ON t.id = e.turn_id WHERE t.conversation_id = ?`,
  },
  {
    kind: 'waits',
    table: 'turnkit_waits',
    key: '(turn_id, target_turn_id)',
    rows: `SELECT w.turn_id, w.target_turn_id FROM turnkit_waits w JOIN turnkit_turns t ON t.id = w.turn_id WHERE t.conversation_id = ?`,
  },
  {
    kind: 'toolExecutions',
    table: 'turnkit_tool_executions',
    key: 'id',
    rows: `SELECT x.id FROM turnkit_tool_executions x JOIN turnkit_turns t ON t.id = x.turn_id WHERE t.conversation_id = ?`,
  },
  {
    kind: 'deliveries',
    table: 'turnkit_deliveries',
    key: 'id',
    rows: `SELECT id FROM turnkit_deliveries WHERE destination_conversation_id = ?`,
  },
  {
    kind: 'messages',
    table: 'turnkit_messages',
    key: 'id',
    rows: `SELECT id FROM turnkit_messages WHERE conversation_id = ?`,
  },
  {
    kind: 'turns',
    table: 'turnkit_turns',
    key: 'id',
    rows: `SELECT id FROM turnkit_turns WHERE conversation_id = ?`,
  },
  {
    kind: 'conversations',
    table: 'turnkit_conversations',
    key: 'id',
    rows: `SELECT id FROM turnkit_conversations WHERE id = ?`,
  },
];

export async function pruneConversations(pass: PrunePass, limits: ConversationLimits): Promise<void> {
  const keepAfter = limits.keepLatest === null ? null : await newestKept(pass, limits.keepLatest);
  let after: Candidate | null = null;
  for (;;) {
    const page = await candidates(pass, after);
    for (const candidate of page) {
      const outsideKept = keepAfter !== null && before(candidate, keepAfter);
      const pastAge = limits.inactiveBeforeMs !== null && candidate.createdMs < limits.inactiveBeforeMs;
      // Ordered by creation: once one is inside both limits, every later one is too.
      if (!outsideKept && !pastAge) return;
      const group = await removableGroup(pass, candidate.id);
      if (group === null) {
        pass.report.keptConversations++;
        continue;
      }
      if (!outsideKept && (await lastActivity(pass, group)) >= limits.inactiveBeforeMs!) continue;
      await removeGroup(pass, candidate.id, group);
    }
    if (page.length < PAGE) return;
    after = page[page.length - 1]!;
  }
}

const before = (a: Candidate, b: Candidate) =>
  a.createdMs < b.createdMs || (a.createdMs === b.createdMs && a.id < b.id);

/** The oldest conversation of the newest `keep` (null: fewer than that, or none kept). */
async function newestKept(pass: PrunePass, keep: number): Promise<Candidate | null> {
  if (keep === 0) return { id: '\uffff', createdMs: Number.MAX_SAFE_INTEGER };
  const [row] = await pass.sql.read(
    `SELECT id, created_at FROM turnkit_conversations WHERE ${ownedByUsers(pass)}
      ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ${keep - 1}`,
  );
  return row ? candidateOf(row) : null;
}

const candidateOf = (row: Row): Candidate => ({
  id: String(row['id']),
  createdMs: epochOf(row['created_at']),
});

async function candidates(pass: PrunePass, after: Candidate | null): Promise<Candidate[]> {
  const { param } = pass.sql.dialect;
  const from = after ? ` AND (created_at, id) > (${param('time')}, ${param('text')})` : '';
  const rows = await pass.sql.read(
    `SELECT id, created_at FROM turnkit_conversations WHERE ${ownedByUsers(pass)}${from}
      ORDER BY created_at, id LIMIT ${PAGE}`,
    after ? [pass.time(after.createdMs), after.id] : [],
  );
  return rows.map(candidateOf);
}

/**
 * The conversation and its sub-agents' conversations (the conversations its turn trees reach),
 * or null when it must stay: a turn of them is unfinished, or belongs to another tree.
 */
async function removableGroup(pass: PrunePass, id: string): Promise<string[] | null> {
  const subs = await pass.sql.read(
    `SELECT DISTINCT u.conversation_id FROM turnkit_turns r JOIN turnkit_turns u ON u.root_turn_id = r.id
      WHERE r.conversation_id = ? AND u.conversation_id <> ?`,
    [id, id],
  );
  const group = [...subs.map((row) => String(row['conversation_id'])), id];
  for (const member of group) {
    if (await unfinishedTurn((sql, params) => pass.sql.read(sql, params), member)) return null;
    const [foreign] = await pass.sql.read(
      `SELECT 1 AS found FROM turnkit_turns t JOIN turnkit_turns r ON r.id = t.root_turn_id
        WHERE t.conversation_id = ? AND r.conversation_id <> ? LIMIT 1`,
      [member, id],
    );
    if (foreign) return null;
  }
  return group;
}

async function unfinishedTurn(
  query: (sql: string, params: readonly unknown[]) => Promise<unknown[]>,
  conversationId: string,
): Promise<boolean> {
  const rows = await query(
    `SELECT 1 AS found FROM turnkit_turns WHERE conversation_id = ? AND status NOT IN (${ENDED}) LIMIT 1`,
    [conversationId],
  );
  return rows.length > 0;
}

/** The group's last activity: its newest turn change, message or conversation update. */
async function lastActivity(pass: PrunePass, group: readonly string[]): Promise<number> {
  let latest = 0;
  for (const id of group) {
    const [row] = await pass.sql.read(
      `SELECT (SELECT MAX(updated_at) FROM turnkit_turns WHERE conversation_id = ?) AS turn_at,
        (SELECT created_at FROM turnkit_messages WHERE conversation_id = ? ORDER BY sequence DESC LIMIT 1) AS message_at,
        (SELECT updated_at FROM turnkit_conversations WHERE id = ?) AS conversation_at`,
      [id, id, id],
    );
    for (const value of Object.values(row ?? {}))
      if (value !== null) latest = Math.max(latest, epochOf(value));
  }
  return latest;
}

/** A dry run's stream parts and events the earlier walks of the pass already counted are left out. */
function notCounted(pass: PrunePass, kind: PrunedKind): string {
  if (kind === 'streamParts' && pass.cutoffs.streamParts !== null)
    return ` AND EXISTS (SELECT 1 FROM turnkit_turns u WHERE u.root_turn_id = p.root_turn_id
      AND (u.completed_at IS NULL OR u.completed_at >= ${pass.timeParam}))`;
  if (kind === 'events' && pass.cutoffs.events !== null) return ` AND e.created_at >= ${pass.timeParam}`;
  return '';
}

function notCountedParams(pass: PrunePass, kind: PrunedKind): string[] {
  const cutoff = kind === 'streamParts' || kind === 'events' ? pass.cutoffs[kind] : null;
  return cutoff === null ? [] : [pass.time(cutoff)];
}

/** Sub-agents' conversations first, the conversation itself last: a stopped pass leaves it findable. */
async function removeGroup(pass: PrunePass, root: string, group: readonly string[]): Promise<void> {
  for (const id of group) {
    for (const table of PER_CONVERSATION) {
      if (pass.dryRun) {
        const [row] = await pass.sql.read(
          `SELECT COUNT(*) AS n FROM (${table.rows}${notCounted(pass, table.kind)}) rows_of`,
          [id, ...notCountedParams(pass, table.kind)],
        );
        pass.counted(table.kind, Number(row?.['n'] ?? 0));
        continue;
      }
      const keys: LockKey[] = id === root ? [`conv:${root}`] : [`conv:${root}`, `conv:${id}`];
      const statement = `DELETE FROM ${table.table} WHERE ${table.key} IN (${table.rows}${pass.limit}) RETURNING 1 AS gone`;
      for (;;) {
        const deleted = await pass.deleteBatch(table.kind, keys, statement, [id], async (query) => {
          // Checked again under the lock: a post may have started a turn since the group was chosen.
          return !(await unfinishedTurn(query, root)) && !(await unfinishedTurn(query, id));
        });
        if (deleted === null) {
          pass.report.keptConversations++;
          return;
        }
        if (deleted < pass.batchSize) break;
      }
    }
  }
}
