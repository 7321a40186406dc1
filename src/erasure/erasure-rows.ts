/**
 * The store's side of an erasure (decision 78): finding the subject's conversations a page at
 * a time, the group each one takes with it (its forks and its sub-agents' conversations), what
 * the group holds, and deleting it a batch per transaction. Every statement here is safe to run
 * again: a batch that committed is simply not found the next time.
 */
import type { Row } from '../store/sql/driver.js';
import type { SqlStatements } from '../store/sql/sql-store.js';
import { canonicalJson } from '../store/records.js';
import { ENDED } from '../store/retention/prune-pass.js';
import type { ErasedKind } from './erasure-types.js';

/** Conversations read per page of the walk over the store. */
const FIND_PAGE = 200;
/** Forks read per page. */
const PAGE = 500;

export interface FoundPage {
  /** The next of the subject's conversations after the cursor, with its place in the walk. */
  found: { id: string; createdAt: string } | null;
  /** Where the walk stands when nothing was found on this page (null: at the end). */
  next: { createdAt: string; id: string } | null;
}

const timeText = (value: unknown) => (value instanceof Date ? value.toISOString() : String(value));

const principalOf = (row: Row): string | null => {
  const metadata = typeof row['metadata'] === 'string' ? JSON.parse(row['metadata']) : row['metadata'];
  const principal = (metadata as Record<string, unknown> | null)?.['principal'];
  return principal === undefined || principal === null ? null : canonicalJson(principal);
};

/**
 * One page of the walk over conversations (oldest first) for those whose principal is the
 * subject's. The principal is a JSON document in the conversation's metadata, compared as
 * canonical JSON; the walk reads `FIND_PAGE` rows whatever it finds.
 */
export async function findPrincipalConversation(
  sql: SqlStatements,
  principal: unknown,
  after: { createdAt: string; id: string } | null,
): Promise<FoundPage> {
  const wanted = canonicalJson(principal);
  const time = sql.dialect.param('time');
  const rows = await sql.read(
    `SELECT id, created_at, metadata FROM turnkit_conversations
      ${after ? `WHERE (created_at, id) > (${time}, ?)` : ''} ORDER BY created_at, id LIMIT ${FIND_PAGE}`,
    after ? [after.createdAt, after.id] : [],
  );
  for (const row of rows)
    if (principalOf(row) === wanted)
      return { found: { id: String(row['id']), createdAt: timeText(row['created_at']) }, next: null };
  const last = rows.at(-1);
  return {
    found: null,
    next:
      rows.length === FIND_PAGE && last
        ? { createdAt: timeText(last['created_at']), id: String(last['id']) }
        : null,
  };
}

/**
 * The conversations erasing `root` removes, in the order they go: its forks (and theirs) and
 * the conversations its turn trees reach (sub-agents', joined runs') first, `root` last, so a
 * stopped erasure still finds what is left from `root`. Only conversations that exist.
 */
export async function groupOf(sql: SqlStatements, root: string): Promise<string[]> {
  const order: string[] = [];
  const seen = new Set<string>();
  const visit = async (id: string): Promise<void> => {
    if (seen.has(id)) return;
    seen.add(id);
    const [exists] = await sql.read(`SELECT 1 AS found FROM turnkit_conversations WHERE id = ?`, [id]);
    if (!exists) return;
    for (let after = ''; ;) {
      const forks = await sql.read(
        `SELECT id FROM turnkit_conversations WHERE forked_from_conversation_id = ? AND id > ? ORDER BY id LIMIT ${PAGE}`,
        [id, after],
      );
      for (const fork of forks) await visit(String(fork['id']));
      if (forks.length < PAGE) break;
      after = String(forks[forks.length - 1]!['id']);
    }
    const reached = await sql.read(
      `SELECT DISTINCT u.conversation_id FROM turnkit_turns r JOIN turnkit_turns u ON u.root_turn_id = r.id
        WHERE r.conversation_id = ? AND u.conversation_id <> ?`,
      [id, id],
    );
    for (const sub of reached) await visit(String(sub['conversation_id']));
    order.push(id);
  };
  await visit(root);
  return order;
}

const list = (ids: readonly string[]) => `(${ids.map(() => '?').join(', ')})`;

/** Counting queries over a whole group (`M`: its conversation ids; `T`: their turns). */
function countQueries(m: string): Record<ErasedKind, string> {
  const t = `(SELECT id FROM turnkit_turns WHERE conversation_id IN ${m})`;
  return {
    conversations: `SELECT COUNT(*) AS n FROM turnkit_conversations WHERE id IN ${m}`,
    messages: `SELECT COUNT(*) AS n FROM turnkit_messages WHERE conversation_id IN ${m}`,
    turns: `SELECT COUNT(*) AS n FROM turnkit_turns WHERE conversation_id IN ${m}`,
    toolExecutions: `SELECT COUNT(*) AS n FROM turnkit_tool_executions WHERE turn_id IN ${t}`,
    events: `SELECT COUNT(*) AS n FROM turnkit_events WHERE turn_id IN ${t}`,
    streamParts: `SELECT COUNT(*) AS n FROM turnkit_stream_parts WHERE turn_id IN ${t}`,
    waits: `SELECT COUNT(*) AS n FROM turnkit_waits WHERE turn_id IN ${t} OR target_turn_id IN ${t}`,
    deliveries: `SELECT COUNT(*) AS n FROM turnkit_deliveries
      WHERE destination_conversation_id IN ${m} OR source_conversation_id IN ${m}`,
    scheduleSpend: `SELECT COUNT(*) AS n FROM turnkit_schedule_spend WHERE root_turn_id IN ${t}`,
    budgetLedger: `SELECT COUNT(*) AS n FROM turnkit_budget_ledger WHERE root_turn_id IN ${t}`,
  };
}

/** The rows a group holds, by kind (each row once, whichever member it links to). */
export async function countGroup(
  sql: SqlStatements,
  group: readonly string[],
): Promise<Record<ErasedKind, number>> {
  const counts = {} as Record<ErasedKind, number>;
  const queries = countQueries(list(group));
  for (const [kind, query] of Object.entries(queries) as [ErasedKind, string][]) {
    const slots = query.split('?').length - 1;
    const params = Array.from({ length: slots / group.length }, () => group).flat();
    const [row] = await sql.read(query, params);
    counts[kind] = Number(row?.['n'] ?? 0);
  }
  return counts;
}

/**
 * One conversation's tables in the order they are emptied, each a `DELETE` of at most a batch
 * (the `?` is the conversation's id, repeated `uses` times). Turns go after everything that
 * references them; their budget ledger rows go with them (a trigger); the conversation last.
 */
const TURNS_OF = `(SELECT id FROM turnkit_turns WHERE conversation_id = ?)`;
const DELETES: readonly { table: string; key: string; rows: string; uses: number }[] = [
  {
    table: 'turnkit_stream_parts',
    key: 'sequence',
    rows: `SELECT sequence FROM turnkit_stream_parts WHERE turn_id IN ${TURNS_OF}`,
    uses: 1,
  },
  {
    table: 'turnkit_events',
    key: '(turn_id, sequence)',
    rows: `SELECT turn_id, sequence FROM turnkit_events WHERE turn_id IN ${TURNS_OF}`,
    uses: 1,
  },
  {
    table: 'turnkit_waits',
    key: '(turn_id, target_turn_id)',
    rows: `SELECT turn_id, target_turn_id FROM turnkit_waits WHERE turn_id IN ${TURNS_OF} OR target_turn_id IN ${TURNS_OF}`,
    uses: 2,
  },
  {
    table: 'turnkit_tool_executions',
    key: 'id',
    rows: `SELECT id FROM turnkit_tool_executions WHERE turn_id IN ${TURNS_OF}`,
    uses: 1,
  },
  {
    table: 'turnkit_deliveries',
    key: 'id',
    rows: `SELECT id FROM turnkit_deliveries WHERE destination_conversation_id = ? OR source_conversation_id = ?`,
    uses: 2,
  },
  {
    table: 'turnkit_messages',
    key: 'id',
    rows: `SELECT id FROM turnkit_messages WHERE conversation_id = ?`,
    uses: 1,
  },
  {
    table: 'turnkit_schedule_spend',
    key: '(schedule_id, day, root_turn_id)',
    rows: `SELECT schedule_id, day, root_turn_id FROM turnkit_schedule_spend WHERE root_turn_id IN ${TURNS_OF}`,
    uses: 1,
  },
  {
    table: 'turnkit_turns',
    key: 'id',
    rows: `SELECT id FROM turnkit_turns WHERE conversation_id = ?`,
    uses: 1,
  },
  {
    table: 'turnkit_conversations',
    key: 'id',
    rows: `SELECT id FROM turnkit_conversations WHERE id = ?`,
    uses: 1,
  },
];

/**
 * Deletes up to `batches` batches of `conversationId`'s rows, a transaction each (holding the
 * conversation's lock), table by table in `DELETES` order. Returns true once nothing of the
 * conversation is left.
 */
export async function deleteConversationRows(
  sql: SqlStatements,
  conversationId: string,
  batchSize: number,
  batches: number,
  onBatch: () => void,
): Promise<boolean> {
  let used = 0;
  for (const step of DELETES) {
    for (;;) {
      if (used >= batches) return false;
      const statement = `DELETE FROM ${step.table} WHERE ${step.key} IN (${step.rows} LIMIT ${batchSize}) RETURNING 1 AS gone`;
      const params = Array.from({ length: step.uses }, () => conversationId);
      const deleted = await sql.batch(
        [`conv:${conversationId}`],
        async (c) => (await c.query(statement, params)).length,
      );
      if (deleted === 0) break;
      used++;
      onBatch();
      if (deleted < batchSize) break;
    }
  }
  return true;
}

/**
 * The conversation's turn ids, a page at a time after `after`; with `open`, only the turns that
 * have not ended (their workflows may run).
 */
export async function turnIdsPage(
  sql: SqlStatements,
  conversationId: string,
  after: string | null,
  limit: number,
  open = false,
): Promise<string[]> {
  const rows = await sql.read(
    `SELECT id FROM turnkit_turns WHERE conversation_id = ?${open ? ` AND status NOT IN (${ENDED})` : ''}${after !== null ? ' AND id > ?' : ''} ORDER BY id LIMIT ${limit}`,
    after !== null ? [conversationId, after] : [conversationId],
  );
  return rows.map((row) => String(row['id']));
}
