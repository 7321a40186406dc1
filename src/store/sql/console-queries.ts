/**
 * The web console's reads in SQL, for SQLite and PostgreSQL (decision 63). Each filters,
 * orders and limits in the database and pages by keyset (`createdAt, id`), walking an index
 * (migration 6, schema.ts), so a page costs the same in a store of ten thousand turns as in
 * one of a million. A list of ids is only ever the page's own, padded to a power of two so
 * that PostgreSQL sees few distinct statement texts.
 */
import type {
  ConsoleAwaitingCall,
  ConsoleConversationQuery,
  ConsoleConversationRow,
  ConsoleKey,
  ConsoleReads,
  ConsoleTurnQuery,
  ConsoleWaitReason,
} from '../console-reads.js';
import { UNFINISHED_FOR_APPROVAL } from '../console-reads.js';
import type { MessageRecord, ToolExecutionRecord, TurnRecord } from '../types.js';
import type { Row, SqlDriver } from './driver.js';
import type { TableSpec } from './schema.js';
import { MESSAGES, TOOL_EXECUTIONS, TURNS } from './schema.js';

type FromRow = <T>(spec: TableSpec, row: Row) => T;

const marks = (count: number) => Array.from({ length: count }, () => '?').join(', ');

/** The page's ids, padded (by repeating the last) to a power of two. */
function padded(ids: readonly string[]): string[] {
  let size = 1;
  while (size < ids.length) size *= 2;
  return [...ids, ...Array.from({ length: size - ids.length }, () => ids.at(-1)!)];
}

function limitOf(limit: number): number {
  return Math.max(1, Math.min(10_000, Math.floor(limit)));
}

export class SqlConsoleReads implements ConsoleReads {
  constructor(
    private readonly driver: SqlDriver,
    private readonly fromRow: FromRow,
  ) {}

  get #time(): string {
    return this.driver.dialect.param('time');
  }

  /** True when the principal in `options` is `needle`, or an object with a top-level field equal to it. */
  #principal(options: string, needle: string): { sql: string; params: unknown[] } {
    if (this.driver.dialect.name === 'sqlite')
      return {
        sql: `EXISTS (SELECT 1 FROM json_each(${options}, '$.principal') AS p WHERE p.type = 'text' AND p.value = ?)`,
        params: [needle],
      };
    const principal = `${options} -> 'principal'`;
    const object = `CASE WHEN jsonb_typeof(${principal}) = 'object' THEN ${principal} ELSE '{}'::jsonb END`;
    return {
      sql: `(${principal} = to_jsonb(?::text) OR EXISTS (SELECT 1 FROM jsonb_each(${object}) AS p WHERE p.value = to_jsonb(?::text)))`,
      params: [needle, needle],
    };
  }

  #tokens(usage: string): string {
    return this.driver.dialect.name === 'sqlite'
      ? `COALESCE(json_extract(${usage}, '$.total_tokens'), 0)`
      : `COALESCE((${usage} ->> 'total_tokens')::numeric, 0)`;
  }

  async #rows<T>(spec: TableSpec, sql: string, params: unknown[]): Promise<T[]> {
    const rows = await this.driver.query(sql, params);
    return rows.map((row) => this.fromRow<T>(spec, row));
  }

  async turns(query: ConsoleTurnQuery): Promise<TurnRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    const add = (sql: string, ...values: unknown[]) => {
      where.push(sql);
      params.push(...values);
    };
    if (query.agent) add('agent_name = ?', query.agent);
    if (query.status) add('status = ?', query.status);
    if (query.conversation) add('conversation_id = ?', query.conversation);
    if (query.roots) add('parent_turn_id IS NULL');
    if (query.since) add(`created_at >= ${this.#time}`, query.since);
    if (query.until) add(`created_at < ${this.#time}`, query.until);
    if (query.principal) {
      const match = this.#principal('options', query.principal);
      add(match.sql, ...match.params);
    }
    const desc = (query.order ?? 'desc') === 'desc';
    if (query.after)
      add(`(created_at, id) ${desc ? '<' : '>'} (${this.#time}, ?)`, query.after.createdAt, query.after.id);
    const direction = desc ? 'DESC' : 'ASC';
    return this.#rows<TurnRecord>(
      TURNS,
      `SELECT * FROM turnkit_turns${where.length ? ` WHERE ${where.join(' AND ')}` : ''}
        ORDER BY created_at ${direction}, id ${direction} LIMIT ${limitOf(query.limit)}`,
      params,
    );
  }

  async conversations(query: ConsoleConversationQuery): Promise<ConsoleConversationRow[]> {
    const turnWhere = ['t.conversation_id = c.id'];
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.roots) turnWhere.push('t.parent_turn_id IS NULL');
    if (query.principal) {
      const match = this.#principal('t.options', query.principal);
      turnWhere.push(match.sql);
      params.push(...match.params);
    }
    where.push(`EXISTS (SELECT 1 FROM turnkit_turns t WHERE ${turnWhere.join(' AND ')})`);
    const add = (sql: string, ...values: unknown[]) => {
      where.push(sql);
      params.push(...values);
    };
    if (query.agent) add('c.agent_name = ?', query.agent);
    if (query.since) add(`c.created_at >= ${this.#time}`, query.since);
    if (query.until) add(`c.created_at < ${this.#time}`, query.until);
    if (query.after) add(`(c.created_at, c.id) < (${this.#time}, ?)`, query.after.createdAt, query.after.id);
    const page = await this.driver.query(
      `SELECT c.id, c.agent_name, c.created_at,
          (SELECT l.id FROM turnkit_turns l WHERE l.conversation_id = c.id
            ORDER BY l.created_at DESC, l.id DESC LIMIT 1) AS last_turn_id
        FROM turnkit_conversations c WHERE ${where.join(' AND ')}
        ORDER BY c.created_at DESC, c.id DESC LIMIT ${limitOf(query.limit)}`,
      params,
    );
    if (page.length === 0) return [];
    const ids = padded(page.map((row) => String(row['id'])));
    const lastIds = padded(page.map((row) => String(row['last_turn_id'])));
    const [totals, lastTurns] = await Promise.all([
      this.driver.query(
        `SELECT conversation_id, count(*) AS turns, COALESCE(sum(cost), 0) AS cost,
            COALESCE(sum(${this.#tokens('usage')}), 0) AS tokens
          FROM turnkit_turns WHERE conversation_id IN (${marks(ids.length)}) GROUP BY conversation_id`,
        ids,
      ),
      this.#rows<TurnRecord>(
        TURNS,
        `SELECT * FROM turnkit_turns WHERE id IN (${marks(lastIds.length)})`,
        lastIds,
      ),
    ]);
    const totalOf = new Map(totals.map((row) => [String(row['conversation_id']), row]));
    const turnOf = new Map(lastTurns.map((turn) => [turn.id, turn]));
    return page.map((row) => {
      const id = String(row['id']);
      const total = totalOf.get(id) ?? {};
      const createdAt = row['created_at'];
      return {
        id,
        agentName: String(row['agent_name']),
        createdAt:
          createdAt instanceof Date ? createdAt.toISOString() : new Date(String(createdAt)).toISOString(),
        turns: Number(total['turns'] ?? 0),
        cost: Number(total['cost'] ?? 0),
        tokens: Number(total['tokens'] ?? 0),
        lastTurn: turnOf.get(String(row['last_turn_id']))!,
      };
    });
  }

  async awaitingApprovals(query: { after?: ConsoleKey; limit: number }): Promise<ConsoleAwaitingCall[]> {
    const params: unknown[] = ['awaiting_approval', ...UNFINISHED_FOR_APPROVAL];
    let after = '';
    if (query.after) {
      after = ` AND (e.created_at, e.id) > (${this.#time}, ?)`;
      params.push(query.after.createdAt, query.after.id);
    }
    // The executions are walked in order by their (status, created_at, id) index; each one's
    // turn is probed by its key. A scalar subquery, not EXISTS: PostgreSQL never turns it into
    // a join, so no statistics can make it merge-join the executions with the turns' primary
    // key, which walks every turn up to the highest id with a call waiting (decision 76).
    const executions = await this.#rows<ToolExecutionRecord>(
      TOOL_EXECUTIONS,
      `SELECT e.* FROM turnkit_tool_executions e
        WHERE e.status = ? AND (SELECT t.status FROM turnkit_turns t WHERE t.id = e.turn_id)
          IN (${marks(UNFINISHED_FOR_APPROVAL.length)})${after}
        ORDER BY e.created_at, e.id LIMIT ${limitOf(query.limit)}`,
      params,
    );
    if (executions.length === 0) return [];
    const ids = padded([...new Set(executions.map((e) => e.turnId))]);
    const turns = await this.#rows<TurnRecord>(
      TURNS,
      `SELECT * FROM turnkit_turns WHERE id IN (${marks(ids.length)})`,
      ids,
    );
    const turnOf = new Map(turns.map((turn) => [turn.id, turn]));
    return executions.map((execution) => ({ execution, turn: turnOf.get(execution.turnId)! }));
  }

  transcript(turn: TurnRecord, query: { afterSequence: number; limit: number }): Promise<MessageRecord[]> {
    return this.#rows<MessageRecord>(
      MESSAGES,
      `SELECT * FROM turnkit_messages WHERE conversation_id = ? AND sequence > ?
          AND (sequence <= ? OR turn_id = ?)
        ORDER BY sequence LIMIT ${limitOf(query.limit)}`,
      [turn.conversationId, query.afterSequence, turn.contextMessageSequence, turn.id],
    );
  }

  toolExecutions(
    turnId: string,
    query: { after?: ConsoleKey; limit: number },
  ): Promise<ToolExecutionRecord[]> {
    const params: unknown[] = [turnId];
    let after = '';
    if (query.after) {
      after = ` AND (created_at, id) > (${this.#time}, ?)`;
      params.push(query.after.createdAt, query.after.id);
    }
    return this.#rows<ToolExecutionRecord>(
      TOOL_EXECUTIONS,
      `SELECT * FROM turnkit_tool_executions WHERE turn_id = ?${after}
        ORDER BY created_at, id LIMIT ${limitOf(query.limit)}`,
      params,
    );
  }

  async waitReasons(turnIds: readonly string[]): Promise<Map<string, ConsoleWaitReason>> {
    const reasons = new Map<string, ConsoleWaitReason>();
    if (turnIds.length === 0) return reasons;
    const ids = padded([...new Set(turnIds)]);
    const rows = await this.driver.query(
      `SELECT DISTINCT turn_id, 'sub-agents' AS reason FROM turnkit_waits WHERE turn_id IN (${marks(ids.length)})
        UNION ALL SELECT DISTINCT turn_id, 'approval' AS reason FROM turnkit_tool_executions
          WHERE status = 'awaiting_approval' AND turn_id IN (${marks(ids.length)})`,
      [...ids, ...ids],
    );
    // An approval is what a person can act on: it wins over sub-agents.
    for (const row of rows)
      if (!reasons.has(String(row['turn_id'])) || row['reason'] === 'approval')
        reasons.set(String(row['turn_id']), row['reason'] as ConsoleWaitReason);
    return reasons;
  }
}
