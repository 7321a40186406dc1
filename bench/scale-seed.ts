/**
 * Bulk seeding for `npm run bench:scale`: stores of many turns written by set-based SQL
 * (SQLite: a recursive CTE; PostgreSQL: generate_series), in minutes, not hours. The rows are
 * the shape TurnKit writes (ids, statuses, JSON columns, ISO times), so the store's reads see
 * what a deployment's would; no turn here ever ran.
 */
import Database from 'better-sqlite3';
import pg from 'pg';

export type ScaleBackend = 'sqlite' | 'postgres';

/** Runs one seeding statement; the SQL differs only in the few expressions below. */
export interface SeedTarget {
  readonly backend: ScaleBackend;
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

export async function seedTarget(backend: ScaleBackend, url: string, schema?: string): Promise<SeedTarget> {
  if (backend === 'sqlite') {
    const db = new Database(url);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = OFF');
    return {
      backend,
      exec: async (sql) => void db.exec(sql),
      close: async () => {
        db.pragma('wal_checkpoint(TRUNCATE)');
        db.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`SET search_path TO "${schema}"`);
  return {
    backend,
    exec: async (sql) => void (await client.query(sql)),
    close: async () => {
      await client.query('ANALYZE');
      await client.end();
    },
  };
}

/** `SELECT <columns> FROM` the integers 1..n as `i`. */
function series(t: SeedTarget, n: number, select: string): string {
  if (t.backend === 'postgres') return `SELECT ${select} FROM generate_series(1, ${n}) AS s(i)`;
  return `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${n}) SELECT ${select} FROM s`;
}

/** An id `<prefix>_<i in 24 hex digits>`, as TurnKit's ids look. */
function id(t: SeedTarget, prefix: string, expr: string): string {
  return t.backend === 'postgres'
    ? `'${prefix}_' || lpad(to_hex((${expr})::bigint), 24, '0')`
    : `printf('${prefix}_%024x', ${expr})`;
}

/** The time `seconds` after the epoch second `base`. */
function at(t: SeedTarget, base: number, seconds: string): string {
  return t.backend === 'postgres'
    ? `to_timestamp(${base} + (${seconds}))`
    : `strftime('%Y-%m-%dT%H:%M:%fZ', ${base} + (${seconds}), 'unixepoch')`;
}

const json = (t: SeedTarget, expr: string) => (t.backend === 'postgres' ? `(${expr})::jsonb` : expr);
const text = (expr: string) => `CAST(${expr} AS TEXT)`;

const TURN_COLUMNS = `id, conversation_id, agent_name, root_turn_id, context_message_sequence, status, model,
  options, usage, cost, output_text, submitted_at, started_at, heartbeat_at, completed_at, created_at, updated_at`;

export interface TurnSeed {
  /** Ids are `<prefix>_<hex i>`; conversations `<prefix>c_<hex i / perConversation>`. */
  prefix: string;
  turns: number;
  perConversation: number;
  /** Every `unfinishedEvery`-th turn is `waiting` (0: none). */
  unfinishedEvery: number;
  /** Epoch second of the first turn; turn i is created i seconds later. */
  base: number;
}

/** Conversations and their turns: finished ones, and `waiting` ones spread evenly. */
export async function seedTurns(t: SeedTarget, seed: TurnSeed): Promise<void> {
  const { prefix, turns, perConversation, unfinishedEvery, base } = seed;
  const conversations = Math.ceil(turns / perConversation);
  await t.exec(
    `INSERT INTO turnkit_conversations (id, agent_name, model, metadata, created_at, updated_at) ` +
      series(
        t,
        conversations,
        `${id(t, `${prefix}c`, 'i - 1')}, 'agent_' || ${text('(i - 1) % 5')}, 'scripted', ${json(t, `'{}'`)},
        ${at(t, base, `(i - 1) * ${perConversation}`)}, ${at(t, base, `(i - 1) * ${perConversation}`)}`,
      ),
  );
  const open = unfinishedEvery > 0 ? `i % ${unfinishedEvery} = 0` : '1 = 0';
  await t.exec(
    `INSERT INTO turnkit_turns (${TURN_COLUMNS}) ` +
      series(
        t,
        turns,
        `${id(t, prefix, 'i')}, ${id(t, `${prefix}c`, `(i - 1) / ${perConversation}`)}, 'agent_' || ${text('((i - 1) / ' + perConversation + ') % 5')},
        ${id(t, prefix, 'i')}, 0, CASE WHEN ${open} THEN 'waiting' ELSE 'completed' END, 'scripted',
        ${json(t, `'{"principal":{"user":"u' || ${text('i % 100')} || '"}}'`)},
        ${json(t, `'{"inputTokens":120,"outputTokens":40}'`)}, 0.0012, 'answer ' || ${text('i')},
        ${at(t, base, 'i')}, ${at(t, base, 'i')}, ${at(t, base, 'i')},
        CASE WHEN ${open} THEN NULL ELSE ${at(t, base, 'i + 1')} END, ${at(t, base, 'i')}, ${at(t, base, 'i + 1')}`,
      ),
  );
}

/** `count` calls awaiting approval, on the newest unfinished turns of a seed (the highest ids). */
export async function seedApprovals(t: SeedTarget, seed: TurnSeed, count: number): Promise<void> {
  const open = Math.floor(seed.turns / seed.unfinishedEvery);
  await t.exec(
    `INSERT INTO turnkit_tool_executions (id, turn_id, tool_call_id, tool_name, arguments, status, created_at, updated_at) ` +
      series(
        t,
        count,
        `${id(t, `${seed.prefix}x`, 'i')}, ${id(t, seed.prefix, `(${open} + 1 - i) * ${seed.unfinishedEvery}`)}, 'call_' || ${text('i')},
        'wire', ${json(t, `'{"amount":1}'`)}, 'awaiting_approval', ${at(t, seed.base, 'i')}, ${at(t, seed.base, 'i')}`,
      ),
  );
}

/** One conversation of `count` messages (user and assistant text, alternating). */
export async function seedMessages(
  t: SeedTarget,
  conversationId: string,
  count: number,
  base: number,
): Promise<void> {
  await t.exec(
    `INSERT INTO turnkit_conversations (id, agent_name, model, metadata, created_at, updated_at)
      VALUES ('${conversationId}', 'agent_0', 'scripted', ${json(t, `'{}'`)}, ${at(t, base, '0')}, ${at(t, base, '0')})`,
  );
  await t.exec(
    `INSERT INTO turnkit_messages (id, conversation_id, role, kind, sequence, content, metadata, created_at) ` +
      series(
        t,
        count,
        `${id(t, `msg_${conversationId}`, 'i')}, '${conversationId}', CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
        'text', i, ${json(t, `'"message ' || ${text('i')} || ' of a long conversation"'`)}, ${json(t, `'{}'`)}, ${at(t, base, 'i')}`,
      ),
  );
}
