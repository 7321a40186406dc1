/**
 * The store contract over SQL, once, for SQLite and PostgreSQL. A driver (driver.ts) supplies
 * the dialect, connections, transactions and named locks; every rule about rows lives here,
 * and every rule about defaults and validation lives in records.ts.
 *
 * Transactions. `atomic` and `atomicGraph` open a transaction on one connection and keep it
 * in an AsyncLocalStorage context, so every store call made along the block's async call
 * chain — nested `atomic` blocks included, on any conversation — joins that transaction and
 * takes its further locks inside it. An error escaping the outermost block rolls back
 * everything it wrote; nested blocks do not roll back on their own. Store calls inside one
 * transaction are serialized (a `Promise.all` inside a block cannot interleave two
 * multi-statement operations on the connection). A write outside any block is its own short
 * transaction (or, where the driver allows it, one autocommit statement that is atomic by
 * itself). Reads outside a block see committed rows only.
 *
 * Lock order, everywhere: graph → root conversation → own conversation. `appendMessage`
 * takes its conversation's lock itself (inside the caller's transaction, or in its own).
 */
import type { StoreIdentity } from '../types.js';
import { AsyncLocalStorage } from 'node:async_hooks';
import { ArgumentError, RecordNotFound, StoreError, ToolError, TurnKitError } from '../../errors.js';
import { reconcileStaleTurns } from '../maintenance.js';
import { markTransaction } from '../transaction-marker.js';
import { buildStreamPart, STREAM_CHANNEL, StreamWatchers } from '../stream-parts.js';
import {
  assertToolExecutionStatus,
  buildConversation,
  forkedMessage,
  buildDelivery,
  buildMessage,
  buildToolExecution,
  buildTurn,
  matchExistingDelivery,
  nowIso,
  splitClaim,
  validateConversationUpdate,
  validateDeliveryUpdate,
  validateToolExecutionUpdate,
  validateTurnUpdate,
} from '../records.js';
import type {
  BudgetUsage,
  ClaimToolExecutionOptions,
  ClaimTurnOptions,
  ConversationRecord,
  ConversationUpdate,
  CopyMessagesOptions,
  DeliveryRecord,
  DeliveryUpdate,
  EventRecord,
  JsonObject,
  ListDeliveriesFilter,
  ListMessagesOptions,
  ListTurnsFilter,
  MessageRecord,
  NewConversation,
  NewDelivery,
  NewMessage,
  NewStreamPart,
  NewToolExecution,
  NewTurn,
  Store,
  StoreBackend,
  StreamPartRecord,
  ToolExecutionFilter,
  ToolExecutionRecord,
  ToolExecutionStatus,
  ToolExecutionUpdate,
  TurnRecord,
  TurnStatus,
  TurnUpdate,
  ScheduleSpendRecord,
  WaitRecord,
  AfterTurnEnd,
} from '../types.js';
import { LANE_TURN_STATUSES, TERMINAL_TURN_STATUSES } from '../types.js';
import type { ConsoleReadable, ConsoleReads } from '../console-reads.js';
import { SqlConsoleReads } from './console-queries.js';
import type { TenantKeysOptions } from './sealed-columns.js';
import { SealedColumns } from './sealed-columns.js';
import type { LockKey, Row, SqlConnection, SqlDialect, SqlDriver } from './driver.js';
import { BUDGET_LEDGER_TABLE } from './budget-ledger.js';
import type { Column, TableSpec } from './schema.js';
import {
  LANE_INDEX_PREDICATE,
  CONVERSATIONS,
  DELIVERIES,
  EVENTS,
  MESSAGES,
  STREAM_PARTS,
  TOOL_EXECUTIONS,
  TURNS,
  SCHEDULE_SPEND,
  WAITS,
} from './schema.js';

/** One open transaction: its connection, the locks it holds, the queue of its operations. */
interface TxContext {
  connection: SqlConnection;
  locked: Set<LockKey>;
  tail: Promise<void>;
  /** Set when the transaction ended; stray async work that kept the context must not use it. */
  closed: boolean;
}

const LANE_STATUSES = LANE_TURN_STATUSES;
const STREAM_LOCK = 'stream:';
const EVENT_SEQUENCE_ATTEMPTS = 50;
/** Events one INSERT writes at most (seven bound values each). */
const EVENTS_PER_INSERT = 200;

function encode(column: Column, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (column.kind) {
    case 'json':
      return JSON.stringify(value);
    case 'time': {
      const time = typeof value === 'string' || value instanceof Date ? new Date(value) : new Date(NaN);
      if (Number.isNaN(time.getTime())) {
        throw new ArgumentError(`${column.field} must be an ISO-8601 time, got ${JSON.stringify(value)}`);
      }
      return time.toISOString();
    }
    case 'int':
    case 'bigint':
    case 'cost':
      if (typeof value !== 'number' || !Number.isFinite(value)) {
        throw new ArgumentError(`${column.field} must be a finite number, got ${JSON.stringify(value)}`);
      }
      return value;
    case 'text':
      if (typeof value !== 'string') {
        throw new ArgumentError(`${column.field} must be a string, got ${JSON.stringify(value)}`);
      }
      return value;
  }
}

/** A time exactly as `Date#toISOString` spells it (years 0000–9999). */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function decode(column: Column, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (column.kind) {
    case 'json':
      return typeof value === 'string' ? JSON.parse(value) : value;
    case 'time':
      // As `encode` wrote it (toISOString) is already the answer; other spellings are parsed.
      if (typeof value === 'string' && ISO_TIME.test(value)) return value;
      return value instanceof Date ? value.toISOString() : new Date(String(value)).toISOString();
    case 'int':
    case 'bigint':
    case 'cost':
      return Number(value);
    case 'text':
      return String(value);
  }
}

function fromRow<T>(spec: TableSpec, row: Row): T {
  const record: Record<string, unknown> = {};
  for (const column of spec.columns) record[column.field] = decode(column, row[column.column]);
  return record as T;
}

/** Messages a fork reads per query, and writes per INSERT at most (11 parameters a row). */
const COPY_PAGE = 512;
const COPY_ROWS = 64;

/** Every column of a record, in the spec's order (null for absent ones), for a multi-row INSERT. */
function pick(record: object, columns: readonly Column[]): Record<string, unknown> {
  const r = record as Record<string, unknown>;
  return Object.fromEntries(columns.map((column) => [column.field, r[column.field] ?? null]));
}

/** The columns (and encoded values) of the defined keys of `attrs`. */
function assignments(spec: TableSpec, attrs: object): { columns: Column[]; values: unknown[] } {
  const columns: Column[] = [];
  const values: unknown[] = [];
  for (const [field, value] of Object.entries(attrs)) {
    if (value === undefined) continue;
    const column = spec.byField.get(field);
    if (!column) throw new ArgumentError(`${spec.noun} has no attribute ${field}`);
    columns.push(column);
    values.push(encode(column, value));
  }
  return { columns, values };
}

/** Stream parts one INSERT writes at most (about ten bound values each). */
const STREAM_PARTS_PER_INSERT = 500;

function limitClause(limit: number | undefined): string {
  if (limit === undefined) return '';
  if (typeof limit !== 'number' || Number.isNaN(limit)) {
    throw new ArgumentError(`limit must be a number, got ${JSON.stringify(limit)}`);
  }
  return limit === Infinity ? '' : ` LIMIT ${Math.max(0, Math.floor(limit))}`;
}

const list = <S extends string>(value: S | readonly S[]): readonly S[] =>
  typeof value === 'string' ? [value as S] : (value as readonly S[]);
const marks = (values: readonly unknown[]) => values.map(() => '?').join(', ');

/** The WHERE clause of a tool-execution filter; null when it selects nothing. */
function toolExecutionWhere(filter: ToolExecutionFilter): { sql: string; params: unknown[] } | null {
  const turnIds = 'turnId' in filter ? [filter.turnId] : [...new Set(filter.turnIds)];
  if (turnIds.length === 0) return null;
  const clauses = [`turn_id IN (${marks(turnIds)})`];
  const params: unknown[] = [...turnIds];
  if (filter.toolCallIds !== undefined) {
    const callIds = [...new Set(filter.toolCallIds)];
    if (callIds.length === 0) return null;
    clauses.push(`tool_call_id IN (${marks(callIds)})`);
    params.push(...callIds);
  }
  if (filter.toolName !== undefined) {
    clauses.push('tool_name = ?');
    params.push(filter.toolName);
  }
  if (filter.hasError !== undefined) clauses.push(filter.hasError ? 'error IS NOT NULL' : 'error IS NULL');
  return { sql: clauses.join(' AND '), params };
}

/** What retention (../retention/) runs its own statements with. */
export interface SqlStatements {
  readonly dialect: SqlDialect;
  /** A read of committed rows. */
  read(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** One short transaction of its own (never a caller's) holding `keys`. */
  batch<T>(keys: readonly LockKey[], fn: (connection: SqlConnection) => Promise<T>): Promise<T>;
}

/**
 * The console's reads with content opened (decision 80): a list that spans tenants (turns,
 * conversations, calls awaiting approval) shows an erased tenant's content as a placeholder;
 * one turn's transcript and tool executions raise ContentErasedError.
 */
function openedConsoleReads(reads: ConsoleReads, sealed: SealedColumns): ConsoleReads {
  return {
    turns: async (query) => sealed.open(TURNS, await reads.turns(query), 'lenient'),
    conversations: async (query) => {
      const rows = await reads.conversations(query);
      await sealed.open(
        TURNS,
        rows.map((row) => row.lastTurn),
        'lenient',
      );
      return rows;
    },
    awaitingApprovals: async (query) => {
      const calls = await reads.awaitingApprovals(query);
      await sealed.open(
        TOOL_EXECUTIONS,
        calls.map((call) => call.execution),
        'lenient',
      );
      await sealed.open(
        TURNS,
        calls.map((call) => call.turn),
        'lenient',
      );
      return calls;
    },
    transcript: async (turn, query) => sealed.open(MESSAGES, await reads.transcript(turn, query)),
    toolExecutions: async (turnId, query) =>
      sealed.open(TOOL_EXECUTIONS, await reads.toolExecutions(turnId, query)),
    waitReasons: (turnIds) => reads.waitReasons(turnIds),
  };
}

export class SqlStore implements Store, ConsoleReadable {
  readonly backend: StoreBackend;
  readonly identity: StoreIdentity;
  readonly #driver: SqlDriver;
  readonly #context = new AsyncLocalStorage<TxContext>();
  /** Which transaction's operation queue the current async chain is running in. */
  readonly #operation = new AsyncLocalStorage<TxContext>();
  readonly #autocommit: SqlConnection;
  /** Content columns sealed with per-tenant keys (decision 80); a no-op without keys. */
  readonly #sealed: SealedColumns;
  #closed = false;

  protected constructor(driver: SqlDriver, identity: StoreIdentity, tenantKeys?: TenantKeysOptions) {
    this.#driver = driver;
    this.identity = identity;
    this.backend = driver.backend;
    this.#autocommit = { query: (sql, params) => driver.query(sql, params) };
    this.#sealed = new SealedColumns(tenantKeys);
  }

  /** Rows as records, their content opened (decision 80). */
  #records<T extends object>(
    spec: TableSpec,
    rows: Row[],
    mode: 'strict' | 'lenient' = 'strict',
  ): Promise<T[]> {
    return this.#sealed.open(
      spec,
      rows.map((row) => fromRow<T>(spec, row)),
      mode,
    );
  }

  async #record<T extends object>(
    spec: TableSpec,
    row: Row,
    mode: 'strict' | 'lenient' = 'strict',
  ): Promise<T> {
    return (await this.#records<T>(spec, [row], mode))[0]!;
  }

  /** The dialect's placeholder for a value of `column`'s kind. */
  #param(spec: TableSpec, field: string): string {
    return this.#driver.dialect.param(spec.byField.get(field)!.kind);
  }

  #current(): TxContext | undefined {
    const context = this.#context.getStore();
    return context && !context.closed ? context : undefined;
  }

  #describe(error: unknown): unknown {
    if (error instanceof TurnKitError) return error;
    return this.#driver.describeError(error);
  }

  #assertOpen(): void {
    if (this.#closed) throw new StoreError(`the ${this.backend} store is closed`);
  }

  /** Runs `fn` as one operation of the transaction: queued behind its other operations. */
  async #serial<T>(context: TxContext, fn: () => Promise<T>): Promise<T> {
    if (this.#operation.getStore() === context) return fn();
    const previous = context.tail;
    let release!: () => void;
    context.tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    try {
      return await this.#operation.run(context, fn);
    } finally {
      release();
    }
  }

  /**
   * Takes each key once per transaction. A root's stream lock also notifies the stream's
   * listeners at commit, in the same statement: every taker of it appends parts of that root.
   */
  async #acquire(context: TxContext, keys: readonly LockKey[]): Promise<void> {
    for (const key of keys) {
      if (context.locked.has(key)) continue;
      const root = key.startsWith(STREAM_LOCK) ? key.slice(STREAM_LOCK.length) : null;
      await this.#driver.lock(
        context.connection,
        key,
        root === null ? undefined : { channel: STREAM_CHANNEL, payload: root },
      );
      context.locked.add(key);
    }
  }

  /** Joins the current transaction or opens one; either way holds every lock in `keys`. */
  async #transaction<T>(keys: readonly LockKey[], fn: (context: TxContext) => Promise<T>): Promise<T> {
    this.#assertOpen();
    const current = this.#current();
    if (current) {
      await this.#serial(current, () => this.#acquire(current, keys));
      return fn(current);
    }
    let opened: TxContext | undefined;
    try {
      return await markTransaction(() =>
        this.#driver.transaction((connection) => {
          const context: TxContext = {
            connection,
            locked: new Set(),
            tail: Promise.resolve(),
            closed: false,
          };
          opened = context;
          return this.#context.run(context, async () => {
            await this.#serial(context, () => this.#acquire(context, keys));
            return fn(context);
          });
        }),
      );
    } catch (error) {
      throw this.#describe(error);
    } finally {
      if (opened) opened.closed = true;
    }
  }

  /** A read: inside the current transaction when there is one, else on committed rows. */
  async #read<T>(fn: (connection: SqlConnection) => Promise<T>): Promise<T> {
    this.#assertOpen();
    const context = this.#current();
    try {
      return context ? await this.#serial(context, () => fn(context.connection)) : await fn(this.#autocommit);
    } catch (error) {
      throw this.#describe(error);
    }
  }

  /**
   * A write. Inside a transaction it takes `keys` and runs there. Inserts a unique index may
   * refuse (which callers catch and go on from) are `ON CONFLICT DO NOTHING`, so a refusal is
   * no failed statement and leaves the caller's block usable without a savepoint. Should
   * another write fail after all, the block fails at COMMIT and nothing it wrote is kept.
   * Outside a transaction it opens its own, unless it needs no lock and the driver runs
   * autocommit writes (each write operation without keys is correct statement by statement).
   */
  async #write<T>(keys: readonly LockKey[], fn: (connection: SqlConnection) => Promise<T>): Promise<T> {
    this.#assertOpen();
    const context = this.#current();
    try {
      if (context) {
        return await this.#serial(context, async () => {
          await this.#acquire(context, keys);
          return fn(context.connection);
        });
      }
      if (keys.length === 0 && this.#driver.autocommitWrites) return await fn(this.#autocommit);
      return await this.#transaction(keys, (opened) => this.#serial(opened, () => fn(opened.connection)));
    } catch (error) {
      throw this.#describe(error);
    }
  }

  async atomic<T>(conversationId: string | null, fn: () => Promise<T>): Promise<T> {
    return this.#transaction(conversationId === null ? [] : [`conv:${conversationId}`], () => fn());
  }

  async atomicGraph<T>(fn: () => Promise<T>): Promise<T> {
    return this.#transaction(['graph'], () => fn());
  }

  // Shared statements

  /**
   * INSERT … ON CONFLICT DO NOTHING RETURNING *; with `parent`, only when that row exists (else
   * RecordNotFound). A row a unique index refused is a StoreError naming the duplicate.
   */
  async #insert<T>(
    connection: SqlConnection,
    spec: TableSpec,
    record: object,
    parent?: { spec: TableSpec; id: string; extra?: { column: string; sql: string; params: unknown[] } },
  ): Promise<T> {
    const { columns, values } = assignments(spec, await this.#sealed.seal(connection, spec, record));
    const names = columns.map((c) => c.column);
    const placeholders = columns.map((c) => this.#driver.dialect.param(c.kind));
    const params = [...values];
    if (parent?.extra) {
      names.push(parent.extra.column);
      placeholders.push(parent.extra.sql);
      params.push(...parent.extra.params);
    }
    let sql = `INSERT INTO ${spec.table} (${names.join(', ')}) `;
    if (parent) {
      sql += `SELECT ${placeholders.join(', ')} WHERE EXISTS (SELECT 1 FROM ${parent.spec.table} WHERE id = ?)`;
      params.push(parent.id);
    } else {
      sql += `VALUES (${placeholders.join(', ')})`;
    }
    const [row] = await connection.query(`${sql} ON CONFLICT DO NOTHING RETURNING *`, params);
    if (row) return this.#record(spec, row, 'lenient') as Promise<T>;
    if (parent && !(await this.#exists(connection, parent.spec, parent.id)))
      throw new RecordNotFound(parent.spec.noun, parent.id);
    throw this.#duplicate(spec, record);
  }

  #duplicate(spec: TableSpec, record: object): StoreError {
    const r = record as Record<string, unknown>;
    if (spec === TOOL_EXECUTIONS)
      return new StoreError(`turn ${r['turnId']} already has an execution for tool call ${r['toolCallId']}`);
    if (spec === MESSAGES)
      return new StoreError(`conversation ${r['conversationId']} already has a message with that sequence`);
    return new StoreError(`${spec.noun} ${String(r['id'])} already exists`);
  }

  async #load<T extends object>(spec: TableSpec, id: string): Promise<T> {
    const [row] = await this.#read((c) => c.query(`SELECT * FROM ${spec.table} WHERE id = ?`, [id]));
    if (!row) throw new RecordNotFound(spec.noun, id);
    // A turn or a conversation is read leniently: status, claim and controls still work for an
    // erased tenant (its content reads as null; `run.result()` raises). Rows of content are strict.
    return this.#record<T>(spec, row, spec === TURNS || spec === CONVERSATIONS ? 'lenient' : 'strict');
  }

  /** UPDATE … SET attrs WHERE id = ? [AND status IN (…)] RETURNING *; null when nothing matched. */
  async #update<T extends object>(
    connection: SqlConnection,
    spec: TableSpec,
    id: string,
    attrs: object,
    statuses?: readonly string[],
  ): Promise<T | null> {
    const { columns, values } = assignments(spec, await this.#sealed.seal(connection, spec, attrs, id));
    if (columns.length === 0) {
      const [row] = await connection.query(`SELECT * FROM ${spec.table} WHERE id = ?`, [id]);
      return row ? this.#record<T>(spec, row, 'lenient') : null;
    }
    const sets = columns.map((c) => `${c.column} = ${this.#driver.dialect.param(c.kind)}`);
    const where = statuses ? ` AND status IN (${marks(statuses)})` : '';
    const rows = await connection.query(
      `UPDATE ${spec.table} SET ${sets.join(', ')} WHERE id = ?${where} RETURNING *`,
      [...values, id, ...(statuses ?? [])],
    );
    // Lenient: a status change of an erased tenant's row is not refused after it committed.
    return rows[0] ? this.#record<T>(spec, rows[0], 'lenient') : null;
  }

  async #exists(connection: SqlConnection, spec: TableSpec, id: string): Promise<boolean> {
    return (await connection.query(`SELECT 1 AS found FROM ${spec.table} WHERE id = ?`, [id])).length > 0;
  }

  // Conversations

  async createConversation(attrs: NewConversation): Promise<ConversationRecord> {
    const record = buildConversation(attrs);
    return this.#write([], (c) => this.#insert(c, CONVERSATIONS, record));
  }

  async loadConversation(id: string): Promise<ConversationRecord> {
    return this.#load(CONVERSATIONS, id);
  }

  async updateConversation(id: string, attrs: ConversationUpdate): Promise<ConversationRecord> {
    validateConversationUpdate(attrs);
    this.#sealed.forgetConversation(id);
    const changes = { ...attrs, updatedAt: nowIso() };
    const updated = await this.#write([], (c) =>
      this.#update<ConversationRecord>(c, CONVERSATIONS, id, changes),
    );
    if (!updated) throw new RecordNotFound('conversation', id);
    return updated;
  }

  async listForks(conversationId: string): Promise<ConversationRecord[]> {
    const rows = await this.#read((c) =>
      c.query(
        `SELECT * FROM turnkit_conversations WHERE forked_from_conversation_id = ? ORDER BY created_at, id`,
        [conversationId],
      ),
    );
    return this.#records<ConversationRecord>(CONVERSATIONS, rows, 'lenient');
  }

  // Messages

  async latestMessageSequence(conversationId: string): Promise<number> {
    const [row] = await this.#read((c) =>
      c.query(`SELECT MAX(sequence) AS latest FROM turnkit_messages WHERE conversation_id = ?`, [
        conversationId,
      ]),
    );
    return Number(row?.['latest'] ?? 0);
  }

  async nextMessageSequence(conversationId: string): Promise<number> {
    return (await this.latestMessageSequence(conversationId)) + 1;
  }

  async appendMessage(attrs: NewMessage): Promise<MessageRecord> {
    const built = buildMessage(attrs);
    // Allocated under the conversation lock (taken here even outside atomic); the unique
    // (conversation_id, sequence) index is the backstop.
    return this.#write([`conv:${attrs.conversationId}`], (c) =>
      this.#insert<MessageRecord>(c, MESSAGES, built, {
        spec: CONVERSATIONS,
        id: attrs.conversationId,
        extra: {
          column: 'sequence',
          sql: `(SELECT COALESCE(MAX(sequence), 0) + 1 FROM turnkit_messages WHERE conversation_id = ?)`,
          params: [attrs.conversationId],
        },
      }),
    );
  }

  /** Pages of the source read and written back as multi-row INSERTs, under the fork's lock. */
  async copyMessages(options: CopyMessagesOptions): Promise<number> {
    const { from, to, throughSequence } = options;
    return this.#write([`conv:${to}`], async (c) => {
      for (const id of [from, to])
        if (!(await this.#exists(c, CONVERSATIONS, id))) throw new RecordNotFound('conversation', id);
      const [taken] = await c.query(
        `SELECT 1 AS found FROM turnkit_messages WHERE conversation_id = ? LIMIT 1`,
        [to],
      );
      if (taken)
        throw new StoreError(`conversation ${to} already has messages: a fork's history is copied first`);
      let after = 0;
      let copied = 0;
      for (;;) {
        const rows = await c.query(
          `SELECT * FROM turnkit_messages WHERE conversation_id = ? AND sequence > ? AND sequence <= ?
            ORDER BY sequence LIMIT ${COPY_PAGE}`,
          [from, after, throughSequence],
        );
        if (rows.length === 0) return copied;
        const copies = rows.map((row) => forkedMessage(fromRow<MessageRecord>(MESSAGES, row), to));
        const columns = MESSAGES.columns;
        const tuple = `(${columns.map((column) => this.#driver.dialect.param(column.kind)).join(', ')})`;
        // Statements of a few fixed sizes (64, then 32, 16, … 1 rows), so PostgreSQL prepares
        // seven statements for every fork, whatever its length.
        for (let start = 0; start < copies.length;) {
          let size = COPY_ROWS;
          while (size > copies.length - start) size /= 2;
          const chunk = copies.slice(start, start + size);
          await c.query(
            `INSERT INTO turnkit_messages (${columns.map((column) => column.column).join(', ')})
              VALUES ${chunk.map(() => tuple).join(', ')}`,
            chunk.flatMap((copy) => assignments(MESSAGES, pick(copy, columns)).values),
          );
          start += size;
        }
        copied += copies.length;
        after = copies.at(-1)!.sequence;
        if (rows.length < COPY_PAGE) return copied;
      }
    });
  }

  async loadMessage(id: string): Promise<MessageRecord> {
    return this.#load(MESSAGES, id);
  }

  async listMessages(conversationId: string, options: ListMessagesOptions = {}): Promise<MessageRecord[]> {
    const where = ['conversation_id = ?'];
    const params: unknown[] = [conversationId];
    if (options.throughSequence !== undefined) {
      if (options.turnId !== undefined) {
        where.push('(sequence <= ? OR turn_id = ?)');
        params.push(options.throughSequence, options.turnId);
      } else {
        where.push('sequence <= ?');
        params.push(options.throughSequence);
      }
    } else if (options.turnId !== undefined) {
      where.push('turn_id = ?');
      params.push(options.turnId);
    }
    if (options.toolExecutionId !== undefined) {
      where.push('tool_execution_id = ?');
      params.push(options.toolExecutionId);
    }
    if (options.kind !== undefined) {
      where.push('kind = ?');
      params.push(options.kind);
    }
    if (options.afterSequence !== undefined) {
      where.push('sequence > ?');
      params.push(options.afterSequence);
    }
    if (options.beforeSequence !== undefined) {
      where.push('sequence < ?');
      params.push(options.beforeSequence);
    }
    const rows = await this.#read((c) =>
      c.query(
        // By sequence alone (unique in a conversation): a turn's messages then come in order
        // from the (conversation_id, turn_id, sequence) index, statistics or not.
        `SELECT * FROM turnkit_messages WHERE ${where.join(' AND ')} ORDER BY sequence${limitClause(options.limit)}`,
        params,
      ),
    );
    return this.#records<MessageRecord>(MESSAGES, rows);
  }

  // Turns

  async createTurn(attrs: NewTurn): Promise<TurnRecord> {
    const record = buildTurn(attrs);
    return this.#write([], (c) =>
      this.#insert<TurnRecord>(c, TURNS, record, { spec: CONVERSATIONS, id: record.conversationId }),
    );
  }

  async loadTurn(id: string): Promise<TurnRecord> {
    return this.#load(TURNS, id);
  }

  async updateTurn(id: string, attrs: TurnUpdate): Promise<TurnRecord> {
    validateTurnUpdate(attrs);
    const changes = { ...attrs, updatedAt: nowIso() };
    const updated = await this.#write([], (c) => this.#update<TurnRecord>(c, TURNS, id, changes));
    if (!updated) throw new RecordNotFound('turn', id);
    return updated;
  }

  /** True compare-and-set: UPDATE … WHERE id = ? AND status IN (from) RETURNING *. */
  async claimTurn(id: string, options?: ClaimTurnOptions): Promise<TurnRecord | null> {
    const { from, to, attrs } = splitClaim<TurnStatus, TurnUpdate>(options, {
      from: 'pending',
      to: 'running',
    });
    validateTurnUpdate({ ...attrs, status: to });
    for (const status of from) validateTurnUpdate({ status });
    const changes = { ...attrs, status: to, updatedAt: nowIso() };
    return this.#write([], async (c) => {
      const claimed = await this.#update<TurnRecord>(c, TURNS, id, changes, from);
      if (!claimed && !(await this.#exists(c, TURNS, id))) throw new RecordNotFound('turn', id);
      return claimed;
    });
  }

  async #listTurns(where: string[], params: unknown[], order: string, limit?: number): Promise<TurnRecord[]> {
    const clause = where.length ? ` WHERE ${where.join(' AND ')}` : '';
    const sql = `SELECT * FROM turnkit_turns${clause} ORDER BY ${order}${limitClause(limit)}`;
    const rows = await this.#read((c) => c.query(sql, params));
    // Lenient: a listing spans tenants (an erased tenant's outputs read as null); loadTurn is strict.
    return this.#records<TurnRecord>(TURNS, rows, 'lenient');
  }

  /**
   * A conversation's open turns, unlimited: sorted here, not by SQL, so that no index ordered by
   * creation time over all the conversation's turns looks cheaper than the lane's partial index
   * (the open turns are few; the finished ones are many).
   */
  async #laneTurns(where: string[], params: unknown[]): Promise<TurnRecord[]> {
    const sql = `SELECT * FROM turnkit_turns WHERE ${where.join(' AND ')}`;
    const rows = await this.#read((c) => c.query(sql, params));
    const turns = await this.#records<TurnRecord>(TURNS, rows, 'lenient');
    return turns.sort((a, b) =>
      a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1,
    );
  }

  async listTurns(filter: ListTurnsFilter = {}): Promise<TurnRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    let lane = false;
    const equal = (column: string, value: string | undefined) => {
      if (value === undefined) return;
      where.push(`${column} = ?`);
      params.push(value);
    };
    equal('root_turn_id', filter.rootTurnId);
    equal('conversation_id', filter.conversationId);
    equal('agent_name', filter.agentName);
    if (filter.parentTurnId === null) where.push('parent_turn_id IS NULL');
    else equal('parent_turn_id', filter.parentTurnId);
    if (filter.seesSequence !== undefined) {
      where.push('context_message_sequence >= ?');
      params.push(filter.seesSequence);
    }
    if (filter.submitted !== undefined)
      where.push(filter.submitted ? 'submitted_at IS NOT NULL' : 'submitted_at IS NULL');
    equal('parent_tool_execution_id', filter.parentToolExecutionId);
    if (filter.status !== undefined) {
      const statuses = list(filter.status);
      if (statuses.length === 0) return [];
      where.push(`status IN (${marks(statuses)})`);
      params.push(...statuses);
      if (statuses.every((status) => LANE_STATUSES.includes(status))) {
        where.push(LANE_INDEX_PREDICATE);
        lane = filter.conversationId !== undefined && filter.limit === undefined;
      }
    }
    if (filter.root) where.push('parent_turn_id IS NULL');
    const created = this.#param(TURNS, 'createdAt');
    const time = (value: string) => encode(TURNS.byField.get('createdAt')!, value);
    if (filter.createdFrom !== undefined) {
      where.push(`created_at >= ${created}`);
      params.push(time(filter.createdFrom));
    }
    if (filter.createdBefore !== undefined) {
      where.push(`created_at < ${created}`);
      params.push(time(filter.createdBefore));
    }
    if (filter.after !== undefined) {
      where.push(`(created_at > ${created} OR (created_at = ${created} AND id > ?))`);
      params.push(time(filter.after.createdAt), time(filter.after.createdAt), filter.after.id);
    }
    if (lane) return this.#laneTurns(where, params);
    // The first turns to see a message: by the (conversation_id, context_message_sequence)
    // index, which is creation order too (a conversation's turns are created in the order of
    // the messages that start them). Ordered by creation time instead, PostgreSQL's generic
    // plan walked every turn of the conversation to find none (decision 76).
    const seeing = filter.seesSequence !== undefined && filter.conversationId !== undefined && !filter.after;
    const order = seeing ? 'context_message_sequence, created_at, id' : 'created_at, id';
    return this.#listTurns(where, params, order, filter.limit);
  }

  async listLane(conversationId: string): Promise<{ turns: TurnRecord[]; latestMessageSequence: number }> {
    // The claiming turn is open itself, so a lane that matters has a row to carry the sequence.
    const rows = await this.#read((c) =>
      c.query(
        `SELECT *, (SELECT MAX(m.sequence) FROM turnkit_messages m WHERE m.conversation_id = ?) AS turnkit_latest
          FROM turnkit_turns WHERE conversation_id = ? AND ${LANE_INDEX_PREDICATE}`,
        [conversationId, conversationId],
      ),
    );
    const latest =
      rows.length > 0
        ? Number(rows[0]!['turnkit_latest'] ?? 0)
        : await this.latestMessageSequence(conversationId);
    const turns = await this.#records<TurnRecord>(TURNS, rows, 'lenient');
    turns.sort((a, b) =>
      a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1,
    );
    return { turns, latestMessageSequence: latest };
  }

  async listSubmittedTurns(options: { limit?: number } = {}): Promise<TurnRecord[]> {
    return this.#listTurns(['submitted_at IS NOT NULL'], [], 'created_at, id', options.limit);
  }

  async listActionableTurns(options: { limit: number }): Promise<TurnRecord[]> {
    return this.#listTurns(
      [`submitted_at IS NOT NULL`, `status IN (${marks(LANE_STATUSES)})`],
      [...LANE_STATUSES],
      'updated_at, id',
      options.limit,
    );
  }

  async listStaleInlineTurns(options: { before: string; limit: number }): Promise<TurnRecord[]> {
    const before = encode(TURNS.byField.get('createdAt')!, options.before);
    return this.#listTurns(
      [
        'submitted_at IS NULL',
        `status IN ('pending', 'running')`,
        `COALESCE(heartbeat_at, started_at, created_at) < ${this.#param(TURNS, 'createdAt')}`,
      ],
      [before],
      'updated_at, id',
      options.limit,
    );
  }

  /** Any running/waiting/paused turn, or (by default) a submitted pending one: by the lane index. */
  async busyConversation(id: string, options: { includePending?: boolean } = {}): Promise<boolean> {
    const pending =
      (options.includePending ?? true) ? ` OR (status = 'pending' AND submitted_at IS NOT NULL)` : '';
    const rows = await this.#read((c) =>
      c.query(
        `SELECT 1 AS busy FROM turnkit_turns WHERE conversation_id = ? AND ${LANE_INDEX_PREDICATE}
          AND (status IN ('running', 'waiting', 'paused')${pending}) LIMIT 1`,
        [id],
      ),
    );
    return rows.length > 0;
  }

  /**
   * The newest delivered message (metadata `delivery_id`) above the highest snapshot of the
   * turns that consumed input (all but unsubmitted pending ones), in one query (the
   * snapshot from the newest turn down, by index, so it costs the same in a long conversation).
   */
  async nextDeliveryTrigger(conversationId: string): Promise<MessageRecord | null> {
    const delivered = this.#driver.dialect.jsonHasString('metadata', 'delivery_id');
    const [row] = await this.#read((c) =>
      c.query(
        `SELECT * FROM turnkit_messages WHERE conversation_id = ? AND ${delivered}
          AND sequence > COALESCE((SELECT context_message_sequence FROM turnkit_turns
            WHERE conversation_id = ? AND NOT (status = 'pending' AND submitted_at IS NULL)
            ORDER BY context_message_sequence DESC LIMIT 1), 0)
          ORDER BY sequence DESC LIMIT 1`,
        [conversationId, conversationId],
      ),
    );
    return row ? this.#record<MessageRecord>(MESSAGES, row) : null;
  }

  /**
   * What follows a turn's end, in one statement: the turns waiting on it that have not ended
   * (by their waits' order), and, given `laneConversationId`, whether that lane has work once
   * the turn lets go of it: an undelivered delivery to it, another submitted pending turn, or
   * a delivered message no turn consumed yet (`nextDeliveryTrigger`).
   */
  async afterTurnEnd(turnId: string, laneConversationId: string | null): Promise<AfterTurnEnd> {
    const ended = TERMINAL_TURN_STATUSES.map((status) => `'${status}'`).join(', ');
    const waiters = `SELECT 0 AS part, w.created_at AS at, w.turn_id AS waiter FROM turnkit_waits w
        JOIN turnkit_turns t ON t.id = w.turn_id
        WHERE w.target_turn_id = ? AND t.status NOT IN (${ended})`;
    const delivered = this.#driver.dialect.jsonHasString('metadata', 'delivery_id');
    const lane = `SELECT 1 AS part, NULL AS at, NULL AS waiter WHERE
        EXISTS (SELECT 1 FROM turnkit_deliveries WHERE destination_conversation_id = ? AND delivered_at IS NULL)
        OR EXISTS (SELECT 1 FROM turnkit_turns WHERE conversation_id = ? AND ${LANE_INDEX_PREDICATE}
          AND status = 'pending' AND submitted_at IS NOT NULL AND id <> ?)
        OR EXISTS (SELECT 1 FROM turnkit_messages WHERE conversation_id = ? AND ${delivered}
          AND sequence > COALESCE((SELECT context_message_sequence FROM turnkit_turns
            WHERE conversation_id = ? AND NOT (status = 'pending' AND submitted_at IS NULL)
            ORDER BY context_message_sequence DESC LIMIT 1), 0))`;
    const rows = await this.#read((c) =>
      laneConversationId === null
        ? c.query(`${waiters} ORDER BY at, waiter`, [turnId])
        : c.query(`${waiters} UNION ALL ${lane} ORDER BY part, at, waiter`, [
            turnId,
            laneConversationId,
            laneConversationId,
            turnId,
            laneConversationId,
            laneConversationId,
          ]),
    );
    return {
      waiters: rows.filter((row) => Number(row['part']) === 0).map((row) => String(row['waiter'])),
      laneWork: rows.some((row) => Number(row['part']) === 1),
    };
  }

  async reconcileStaleTurns(options: { before: string; limit?: number }): Promise<TurnRecord[]> {
    return reconcileStaleTurns(this, options);
  }

  // Deliveries

  /** Race-safe insert-or-return: INSERT … ON CONFLICT DO NOTHING, then the row holding the key. */
  async createDelivery(attrs: NewDelivery): Promise<DeliveryRecord> {
    const record = buildDelivery(attrs);
    return this.#write([], async (c) => {
      const { columns, values } = assignments(DELIVERIES, await this.#sealed.seal(c, DELIVERIES, record));
      const placeholders = columns.map((column) => this.#driver.dialect.param(column.kind));
      const [inserted] = await c.query(
        `INSERT INTO turnkit_deliveries (${columns.map((col) => col.column).join(', ')})
          VALUES (${placeholders.join(', ')}) ON CONFLICT DO NOTHING RETURNING *`,
        values,
      );
      if (inserted) return this.#record<DeliveryRecord>(DELIVERIES, inserted, 'lenient');
      // Refused by the key (the delivery exists: it is returned) or else by the id.
      const [existing] = await c.query(`SELECT * FROM turnkit_deliveries WHERE key = ?`, [record.key]);
      if (!existing) throw this.#duplicate(DELIVERIES, record);
      return matchExistingDelivery(await this.#record<DeliveryRecord>(DELIVERIES, existing), attrs);
    });
  }

  async loadDelivery(id: string): Promise<DeliveryRecord> {
    return this.#load(DELIVERIES, id);
  }

  async updateDelivery(id: string, attrs: DeliveryUpdate): Promise<DeliveryRecord> {
    validateDeliveryUpdate(attrs);
    const changes = { ...attrs };
    const updated = await this.#write([], (c) => this.#update<DeliveryRecord>(c, DELIVERIES, id, changes));
    if (!updated) throw new RecordNotFound('delivery', id);
    return updated;
  }

  async listDeliveries(filter: ListDeliveriesFilter = {}): Promise<DeliveryRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.sourceConversationId !== undefined) {
      where.push('source_conversation_id = ?');
      params.push(filter.sourceConversationId);
    }
    if (filter.destinationConversationId !== undefined) {
      where.push('destination_conversation_id = ?');
      params.push(filter.destinationConversationId);
    }
    if (filter.pending) where.push('delivered_at IS NULL');
    const clause = where.length ? ` WHERE ${where.join(' AND ')}` : '';
    const sql = `SELECT * FROM turnkit_deliveries${clause} ORDER BY created_at, id${limitClause(filter.limit)}`;
    const rows = await this.#read((c) => c.query(sql, params));
    // Lenient only when the listing is not one conversation's (it may span tenants).
    const one = filter.sourceConversationId !== undefined || filter.destinationConversationId !== undefined;
    return this.#records<DeliveryRecord>(DELIVERIES, rows, one ? 'strict' : 'lenient');
  }

  // Waits

  async createWait(attrs: { turnId: string; targetTurnId: string }): Promise<WaitRecord> {
    if (attrs.turnId === attrs.targetTurnId) throw new ToolError('a turn cannot wait for itself');
    const record: WaitRecord = {
      turnId: attrs.turnId,
      targetTurnId: attrs.targetTurnId,
      createdAt: nowIso(),
    };
    const { columns, values } = assignments(WAITS, record);
    const placeholders = columns.map((c) => this.#driver.dialect.param(c.kind));
    return this.#write([], async (c) => {
      const [inserted] = await c.query(
        `INSERT INTO turnkit_waits (${columns.map((col) => col.column).join(', ')})
          VALUES (${placeholders.join(', ')}) ON CONFLICT (turn_id, target_turn_id) DO NOTHING RETURNING *`,
        values,
      );
      if (inserted) return fromRow<WaitRecord>(WAITS, inserted);
      const [existing] = await c.query(
        `SELECT * FROM turnkit_waits WHERE turn_id = ? AND target_turn_id = ?`,
        [attrs.turnId, attrs.targetTurnId],
      );
      return fromRow<WaitRecord>(WAITS, existing!);
    });
  }

  async reserveScheduleSpend(attrs: Omit<ScheduleSpendRecord, 'createdAt'>): Promise<ScheduleSpendRecord> {
    const record: ScheduleSpendRecord = { ...attrs, createdAt: nowIso() };
    const { columns, values } = assignments(SCHEDULE_SPEND, record);
    const placeholders = columns.map((c) => this.#driver.dialect.param(c.kind));
    return this.#write([], async (c) => {
      const [inserted] = await c.query(
        `INSERT INTO turnkit_schedule_spend (${columns.map((col) => col.column).join(', ')})
          VALUES (${placeholders.join(', ')}) ON CONFLICT (schedule_id, day, root_turn_id) DO NOTHING RETURNING *`,
        values,
      );
      if (inserted) return fromRow<ScheduleSpendRecord>(SCHEDULE_SPEND, inserted);
      const [existing] = await c.query(
        `SELECT * FROM turnkit_schedule_spend WHERE schedule_id = ? AND day = ? AND root_turn_id = ?`,
        [attrs.scheduleId, attrs.day, attrs.rootTurnId],
      );
      return fromRow<ScheduleSpendRecord>(SCHEDULE_SPEND, existing!);
    });
  }

  async listScheduleSpend(scheduleId: string, day: string): Promise<ScheduleSpendRecord[]> {
    const rows = await this.#read((c) =>
      c.query(
        `SELECT * FROM turnkit_schedule_spend WHERE schedule_id = ? AND day = ? ORDER BY created_at, root_turn_id`,
        [scheduleId, day],
      ),
    );
    return rows.map((row) => fromRow<ScheduleSpendRecord>(SCHEDULE_SPEND, row));
  }

  async loadTurnWithWaits(id: string): Promise<{ turn: TurnRecord; waits: WaitRecord[] }> {
    const rows = await this.#read((c) =>
      c.query(
        `SELECT t.*, w.target_turn_id AS turnkit_wait_target, w.created_at AS turnkit_wait_created_at
          FROM turnkit_turns t LEFT JOIN turnkit_waits w ON w.turn_id = t.id
          WHERE t.id = ? ORDER BY w.created_at, w.target_turn_id`,
        [id],
      ),
    );
    if (rows.length === 0) throw new RecordNotFound(TURNS.noun, id);
    // Leniently, as `loadTurn` reads a turn.
    const turn = await this.#record<TurnRecord>(TURNS, rows[0]!, 'lenient');
    const waits = rows
      .filter((row) => row['turnkit_wait_target'] !== null && row['turnkit_wait_target'] !== undefined)
      .map((row) =>
        fromRow<WaitRecord>(WAITS, {
          turn_id: id,
          target_turn_id: row['turnkit_wait_target'],
          created_at: row['turnkit_wait_created_at'],
        }),
      );
    return { turn, waits };
  }

  async listWaits(filter: { turnId?: string; targetTurnId?: string } = {}): Promise<WaitRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.turnId !== undefined) {
      where.push('turn_id = ?');
      params.push(filter.turnId);
    }
    if (filter.targetTurnId !== undefined) {
      where.push('target_turn_id = ?');
      params.push(filter.targetTurnId);
    }
    const clause = where.length ? ` WHERE ${where.join(' AND ')}` : '';
    const rows = await this.#read((c) =>
      c.query(`SELECT * FROM turnkit_waits${clause} ORDER BY created_at, turn_id, target_turn_id`, params),
    );
    return rows.map((row) => fromRow<WaitRecord>(WAITS, row));
  }

  // Tool executions

  async createToolExecution(attrs: NewToolExecution): Promise<ToolExecutionRecord> {
    const record = buildToolExecution(attrs);
    return this.#write([], (c) =>
      this.#insert<ToolExecutionRecord>(c, TOOL_EXECUTIONS, record, { spec: TURNS, id: record.turnId }),
    );
  }

  async loadToolExecution(id: string): Promise<ToolExecutionRecord> {
    return this.#load(TOOL_EXECUTIONS, id);
  }

  /** True compare-and-set: UPDATE … WHERE id = ? AND status IN (from) RETURNING *. */
  async claimToolExecution(
    id: string,
    options?: ClaimToolExecutionOptions,
  ): Promise<ToolExecutionRecord | null> {
    const { from, to, attrs } = splitClaim<ToolExecutionStatus, ToolExecutionUpdate>(options, {
      from: 'running',
      to: 'completed',
    });
    validateToolExecutionUpdate(attrs);
    assertToolExecutionStatus(to);
    for (const status of from) assertToolExecutionStatus(status);
    const changes = { ...attrs, status: to, updatedAt: nowIso() };
    return this.#write([], async (c) => {
      const claimed = await this.#update<ToolExecutionRecord>(c, TOOL_EXECUTIONS, id, changes, from);
      if (!claimed && !(await this.#exists(c, TOOL_EXECUTIONS, id))) {
        throw new RecordNotFound('tool execution', id);
      }
      return claimed;
    });
  }

  async listToolExecutions(filter: ToolExecutionFilter): Promise<ToolExecutionRecord[]> {
    const where = toolExecutionWhere(filter);
    if (!where) return [];
    const rows = await this.#read((c) =>
      c.query(
        `SELECT * FROM turnkit_tool_executions WHERE ${where.sql} ORDER BY created_at, id`,
        where.params,
      ),
    );
    return this.#records<ToolExecutionRecord>(TOOL_EXECUTIONS, rows);
  }

  async countToolExecutions(
    filter: ToolExecutionFilter & { exceptStatuses?: readonly ToolExecutionStatus[] },
  ): Promise<Record<string, number>> {
    const except = [...new Set(filter.exceptStatuses ?? [])];
    for (const status of except) assertToolExecutionStatus(status);
    const where = toolExecutionWhere(filter);
    if (!where) return {};
    const sql = except.length ? `${where.sql} AND status NOT IN (${marks(except)})` : where.sql;
    const rows = await this.#read((c) =>
      c.query(
        `SELECT tool_name, COUNT(*) AS n FROM turnkit_tool_executions WHERE ${sql} GROUP BY tool_name`,
        [...where.params, ...except],
      ),
    );
    const counts: Record<string, number> = {};
    for (const row of rows) counts[String(row['tool_name'])] = Number(row['n']);
    return counts;
  }

  // Budgets

  async budgetUsage(rootTurnId: string): Promise<BudgetUsage> {
    const [row] = await this.#read((c) =>
      c.query(
        `SELECT iterations, cost, tool_executions, tool_executions_by_name FROM ${BUDGET_LEDGER_TABLE} WHERE root_turn_id = ?`,
        [rootTurnId],
      ),
    );
    if (!row) return { iterations: 0, cost: 0, toolExecutions: 0, toolExecutionsByName: {} };
    const byName = row['tool_executions_by_name'];
    const counts = (typeof byName === 'string' ? JSON.parse(byName) : byName) as Record<string, unknown>;
    return {
      iterations: Number(row['iterations']),
      cost: Number(row['cost']),
      toolExecutions: Number(row['tool_executions']),
      // Names a tree no longer counts (every execution cancelled since) stay in the map at 0.
      toolExecutionsByName: Object.fromEntries(
        Object.entries(counts)
          .map(([name, count]) => [name, Number(count)] as const)
          .filter(([, count]) => count > 0),
      ),
    };
  }

  // Events

  async appendEvent(attrs: {
    turnId: string;
    conversationId: string;
    type: string;
    payload?: JsonObject;
  }): Promise<EventRecord> {
    const { turnId, conversationId, type, payload } = attrs;
    const [event] = await this.appendEvents({ turnId, conversationId, events: [{ type, payload }] });
    return event!;
  }

  /**
   * One multi-row INSERT (of at most EVENTS_PER_INSERT rows) whose sequences follow the turn's
   * highest, in order, computed in the statement itself. Several events outside a transaction
   * get one of their own, so that no reader sees a part of them.
   */
  async appendEvents(attrs: {
    turnId: string;
    conversationId: string;
    events: readonly { type: string; payload?: JsonObject | undefined }[];
  }): Promise<EventRecord[]> {
    if (attrs.events.length === 0) return [];
    const createdAt = nowIso();
    const records = attrs.events.map(({ type, payload }) => ({
      turnId: attrs.turnId,
      type,
      conversationId: attrs.conversationId,
      payload: payload ?? {},
      createdAt,
    }));
    const insert = async (c: SqlConnection) => {
      const stored: EventRecord[] = [];
      for (let start = 0; start < records.length; start += EVENTS_PER_INSERT)
        stored.push(...(await this.#insertEvents(c, records.slice(start, start + EVENTS_PER_INSERT))));
      return stored;
    };
    if (records.length > 1 && !this.#current())
      return this.#transaction([], (opened) => this.#serial(opened, () => insert(opened.connection)));
    return this.#write([], insert);
  }

  /**
   * Two writers that pick the same sequences collide on the primary key: the loser's rows are
   * refused (ON CONFLICT DO NOTHING), it takes back those it did insert and tries again with a
   * fresh statement, which sees the winner's rows. No lock is held.
   */
  async #insertEvents(c: SqlConnection, records: readonly object[]): Promise<EventRecord[]> {
    const turnId = (records[0] as { turnId: string }).turnId;
    const rows = [];
    for (const record of records) rows.push(assignments(EVENTS, await this.#sealed.seal(c, EVENTS, record)));
    const { columns } = rows[0]!;
    const tuple = `(${[...columns.map((column) => this.#driver.dialect.param(column.kind)), this.#param(EVENTS, 'sequence')].join(', ')})`;
    const sql = `INSERT INTO turnkit_events (${columns.map((column) => column.column).join(', ')}, sequence)
      SELECT ${columns.map((_, i) => `v.column${i + 1}`).join(', ')}, base.latest + v.column${columns.length + 1}
      FROM (VALUES ${rows.map(() => tuple).join(', ')}) AS v,
        (SELECT COALESCE(MAX(sequence), 0) AS latest FROM turnkit_events WHERE turn_id = ?) AS base
      WHERE true ON CONFLICT (turn_id, sequence) DO NOTHING RETURNING *`;
    const params = [...rows.flatMap((row, i) => [...row.values, i + 1]), turnId];
    for (let attempt = 0; attempt < EVENT_SEQUENCE_ATTEMPTS; attempt++) {
      const inserted = await c.query(sql, params);
      if (inserted.length === rows.length) {
        const events = await this.#records<EventRecord>(EVENTS, inserted, 'lenient');
        return events.sort((a, b) => a.sequence - b.sequence);
      }
      if (inserted.length > 0) {
        const sequences = inserted.map((row) => row['sequence']);
        await c.query(`DELETE FROM turnkit_events WHERE turn_id = ? AND sequence IN (${marks(sequences)})`, [
          turnId,
          ...sequences,
        ]);
      }
    }
    throw new StoreError(`could not allocate an event sequence for turn ${turnId}: try again`, {
      retryable: true,
    });
  }

  async listEvents(
    turnId: string,
    options: { afterSequence?: number; limit?: number } = {},
  ): Promise<EventRecord[]> {
    const rows = await this.#read((c) =>
      c.query(
        `SELECT * FROM turnkit_events WHERE turn_id = ? AND sequence > ? ORDER BY sequence${limitClause(options.limit)}`,
        [turnId, options.afterSequence ?? 0],
      ),
    );
    return this.#records<EventRecord>(EVENTS, rows);
  }

  // Live stream parts

  /**
   * Each root's lock is taken before its rows are inserted and held until commit, so within a
   * root the sequence order is the commit order: a reader that saw sequence n never later
   * finds a new row below n. PostgreSQL also notifies listeners at commit (with the lock).
   */
  async appendStreamParts(parts: readonly NewStreamPart[]): Promise<StreamPartRecord[]> {
    if (parts.length === 0) return [];
    const records = parts.map(buildStreamPart);
    const roots = [...new Set(records.map((part) => part.rootTurnId))];
    return this.#write(
      roots.map((root) => `${STREAM_LOCK}${root}` as const),
      async (c) => {
        // One multi-row INSERT per run of parts with the same columns (one run, as the parts
        // are built); the sequence is assigned row by row, so sorting by it keeps the order.
        const runs: { key: string; columns: Column[]; values: unknown[][] }[] = [];
        for (const record of records) {
          const { columns, values } = assignments(
            STREAM_PARTS,
            await this.#sealed.seal(c, STREAM_PARTS, record),
          );
          const key = columns.map((column) => column.column).join(',');
          const last = runs.at(-1);
          // At most STREAM_PARTS_PER_INSERT rows a statement: well under either engine's limit of bound values.
          if (last?.key === key && last.values.length < STREAM_PARTS_PER_INSERT) last.values.push(values);
          else runs.push({ key, columns, values: [values] });
        }
        const stored: StreamPartRecord[] = [];
        for (const { columns, values } of runs) {
          const row = `(${columns.map((column) => this.#driver.dialect.param(column.kind)).join(', ')})`;
          const rows = await c.query(
            `INSERT INTO turnkit_stream_parts (${columns.map((column) => column.column).join(', ')})
              VALUES ${values.map(() => row).join(', ')} RETURNING *`,
            values.flat(),
          );
          for (const inserted of rows)
            stored.push(await this.#record<StreamPartRecord>(STREAM_PARTS, inserted, 'lenient'));
        }
        return stored.sort((a, b) => a.sequence - b.sequence);
      },
    );
  }

  async listStreamParts(
    rootTurnId: string,
    options: { afterSequence?: number; limit?: number } = {},
  ): Promise<StreamPartRecord[]> {
    const rows = await this.#read((c) =>
      c.query(
        `SELECT * FROM turnkit_stream_parts p WHERE p.root_turn_id = ? AND p.sequence > ?
          AND (p.type NOT IN ('text.delta', 'reasoning.delta') OR p.attempt = (
            SELECT MAX(s.sequence) FROM turnkit_stream_parts s
            WHERE s.turn_id = p.turn_id AND s.step = p.step AND s.type = 'step.started'))
          ORDER BY p.sequence${limitClause(options.limit)}`,
        [rootTurnId, options.afterSequence ?? 0],
      ),
    );
    return this.#records<StreamPartRecord>(STREAM_PARTS, rows);
  }

  async hasStreamPart(rootTurnId: string, sequence: number): Promise<boolean> {
    if (!Number.isSafeInteger(sequence)) return false;
    const rows = await this.#read((c) =>
      c.query(`SELECT 1 AS found FROM turnkit_stream_parts WHERE sequence = ? AND root_turn_id = ?`, [
        sequence,
        rootTurnId,
      ]),
    );
    return rows.length > 0;
  }

  #watchers: StreamWatchers | null = null;

  /** One listening connection per store, shared by every reader of this process. */
  get watchStream(): ((rootTurnId: string, wake: () => void) => Promise<() => void>) | undefined {
    const listen = this.#driver.listen?.bind(this.#driver);
    if (!listen) return undefined;
    this.#watchers ??= new StreamWatchers((onPayload, onLost) => listen(STREAM_CHANNEL, onPayload, onLost));
    const watchers = this.#watchers;
    return (rootTurnId, wake) => watchers.watch(rootTurnId, wake);
  }

  /**
   * The web console's paged reads (console-queries.ts).
   * @internal
   */
  consoleReads(): ConsoleReads {
    const reads = new SqlConsoleReads(this.#driver, fromRow);
    return this.#sealed.enabled ? openedConsoleReads(reads, this.#sealed) : reads;
  }

  /**
   * Retention's access to the tables: reads, and batches each in a transaction of its own.
   * @internal
   */
  statements(): SqlStatements {
    return {
      dialect: this.#driver.dialect,
      read: (sql, params = []) => this.#read((c) => c.query(sql, params)),
      batch: (keys, fn) => {
        if (this.#current()) throw new StoreError('retention cannot run inside an atomic block');
        return this.#transaction(keys, (opened) => this.#serial(opened, () => fn(opened.connection)));
      },
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#sealed.close();
    await this.#watchers?.close();
    await this.#driver.close();
  }
}
