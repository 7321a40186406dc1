/**
 * The store contract over SQL, shared by the SQLite, memory and PostgreSQL backends. A
 * driver supplies connections, transactions and named locks; everything else is here once.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { RecordNotFound, StoreError, ToolError, TurnKitError } from '../../errors.js';
import {
  buildConversation,
  buildDelivery,
  buildMessage,
  buildToolExecution,
  buildTurn,
  consumedThrough,
  jsonCopy,
  matchExistingDelivery,
  nowIso,
  splitClaim,
  validateDeliveryUpdate,
  validateToolExecutionUpdate,
  validateTurnUpdate,
} from '../records.js';
import type {
  ClaimToolExecutionOptions,
  ClaimTurnOptions,
  ConversationRecord,
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
  NewToolExecution,
  NewTurn,
  Store,
  StoreBackend,
  ToolExecutionRecord,
  ToolExecutionStatus,
  ToolExecutionUpdate,
  TurnRecord,
  TurnStatus,
  TurnUpdate,
  WaitRecord,
} from '../types.js';
import type { TableSpec } from './schema.js';
import { CONVERSATIONS, DELIVERIES, EVENTS, MESSAGES, TOOL_EXECUTIONS, TURNS, WAITS } from './schema.js';

export type Row = Record<string, unknown>;

export interface SqlConnection {
  /** Runs one statement with `?` placeholders and returns its rows. */
  all(sql: string, params: readonly unknown[]): Promise<Row[]>;
}

export interface SqlDriver {
  readonly backend: StoreBackend;
  /** Runs `fn` in a new transaction on one connection; commits, or rolls back on error. */
  transaction<T>(fn: (connection: SqlConnection) => Promise<T>): Promise<T>;
  /** Serializes on `key` until the current transaction ends. */
  lock(connection: SqlConnection, key: string): Promise<void>;
  /** One statement outside any transaction. */
  query(sql: string, params: readonly unknown[]): Promise<Row[]>;
  /** Translates driver errors into StoreErrors a user can act on. */
  describeError(error: unknown): unknown;
  close(): Promise<void>;
}

interface TxContext {
  connection: SqlConnection;
  locked: Set<string>;
}

function toRow(spec: TableSpec, record: object): Row {
  const row: Row = {};
  for (const [field, column] of Object.entries(spec.columns)) {
    const value = (record as Record<string, unknown>)[field];
    row[column] =
      value === undefined
        ? null
        : spec.json.has(field)
          ? value === null
            ? null
            : JSON.stringify(value)
          : value;
  }
  return row;
}

function fromRow<T>(spec: TableSpec, row: Row): T {
  const record: Record<string, unknown> = {};
  for (const [field, column] of Object.entries(spec.columns)) {
    const value = row[column];
    record[field] = spec.json.has(field)
      ? value === null || value === undefined
        ? null
        : JSON.parse(String(value))
      : value;
  }
  if ('cost' in record) record['cost'] = Number(record['cost'] ?? 0);
  if ('sequence' in record) record['sequence'] = Number(record['sequence']);
  if ('contextMessageSequence' in record)
    record['contextMessageSequence'] = Number(record['contextMessageSequence']);
  return record as T;
}

const ACTIVE = ['pending', 'waiting', 'running'];

export class SqlStore implements Store {
  readonly backend: StoreBackend;
  readonly #driver: SqlDriver;
  readonly #context = new AsyncLocalStorage<TxContext>();

  constructor(driver: SqlDriver) {
    this.#driver = driver;
    this.backend = driver.backend;
  }

  async #all(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    const context = this.#context.getStore();
    try {
      return context ? await context.connection.all(sql, params) : await this.#driver.query(sql, params);
    } catch (error) {
      throw this.#driver.describeError(error);
    }
  }

  /** Joins the current transaction or opens one, and holds every lock in `keys`. */
  async #tx<T>(keys: readonly string[], fn: () => Promise<T>): Promise<T> {
    const current = this.#context.getStore();
    if (current) {
      for (const key of keys) {
        if (current.locked.has(key)) continue;
        await this.#driver.lock(current.connection, key);
        current.locked.add(key);
      }
      return fn();
    }
    try {
      return await this.#driver.transaction((connection) => {
        const context: TxContext = { connection, locked: new Set() };
        return this.#context.run(context, async () => {
          for (const key of keys) {
            await this.#driver.lock(connection, key);
            context.locked.add(key);
          }
          return fn();
        });
      });
    } catch (error) {
      if (error instanceof TurnKitError) throw error;
      throw this.#driver.describeError(error);
    }
  }

  atomic<T>(conversationId: string | null, fn: () => Promise<T>): Promise<T> {
    return this.#tx(conversationId ? [`conv:${conversationId}`] : [], fn);
  }

  atomicGraph<T>(fn: () => Promise<T>): Promise<T> {
    return this.#tx(['graph'], fn);
  }

  async #insert(spec: TableSpec, record: object): Promise<void> {
    const row = toRow(spec, record);
    const columns = Object.keys(row);
    await this.#all(
      `INSERT INTO ${spec.table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
      Object.values(row),
    );
  }

  async #one<T>(spec: TableSpec, name: string, id: string): Promise<T> {
    const [row] = await this.#all(`SELECT * FROM ${spec.table} WHERE id = ?`, [id]);
    if (!row) throw new RecordNotFound(name, id);
    return fromRow<T>(spec, row);
  }

  /** UPDATE … SET attrs WHERE id = ? [AND extra] RETURNING *; null when nothing matched. */
  async #update<T>(
    spec: TableSpec,
    id: string,
    attrs: Record<string, unknown>,
    where = '',
    whereParams: unknown[] = [],
  ) {
    const row = toRow(
      { ...spec, columns: Object.fromEntries(Object.keys(attrs).map((k) => [k, spec.columns[k]!])) },
      attrs,
    );
    const sets = Object.keys(row).map((column) => `${column} = ?`);
    const rows = await this.#all(
      `UPDATE ${spec.table} SET ${sets.join(', ')} WHERE id = ?${where ? ` AND ${where}` : ''} RETURNING *`,
      [...Object.values(row), id, ...whereParams],
    );
    return rows[0] ? fromRow<T>(spec, rows[0]) : null;
  }

  // Conversations

  async createConversation(attrs: NewConversation): Promise<ConversationRecord> {
    const record = buildConversation(attrs);
    await this.#insert(CONVERSATIONS, record);
    return record;
  }

  loadConversation(id: string): Promise<ConversationRecord> {
    return this.#one(CONVERSATIONS, 'conversation', id);
  }

  async updateConversation(
    id: string,
    attrs: { metadata?: JsonObject; model?: string | null },
  ): Promise<ConversationRecord> {
    const updated = await this.#update<ConversationRecord>(CONVERSATIONS, id, {
      ...jsonCopy(attrs),
      updatedAt: nowIso(),
    });
    if (!updated) throw new RecordNotFound('conversation', id);
    return updated;
  }

  // Messages

  async latestMessageSequence(conversationId: string): Promise<number> {
    const [row] = await this.#all(
      `SELECT MAX(sequence) AS latest FROM turnkit_messages WHERE conversation_id = ?`,
      [conversationId],
    );
    return Number(row?.['latest'] ?? 0);
  }

  async nextMessageSequence(conversationId: string): Promise<number> {
    return (await this.latestMessageSequence(conversationId)) + 1;
  }

  async appendMessage(attrs: NewMessage): Promise<MessageRecord> {
    const built = buildMessage(attrs);
    // The sequence is allocated under the conversation lock; the unique index is the backstop.
    return this.atomic(attrs.conversationId, async () => {
      await this.loadConversation(attrs.conversationId);
      const record: MessageRecord = {
        ...built,
        sequence: await this.nextMessageSequence(attrs.conversationId),
      };
      await this.#insert(MESSAGES, record);
      return record;
    });
  }

  loadMessage(id: string): Promise<MessageRecord> {
    return this.#one(MESSAGES, 'message', id);
  }

  async listMessages(conversationId: string, options: ListMessagesOptions = {}): Promise<MessageRecord[]> {
    const where = ['conversation_id = ?'];
    const params: unknown[] = [conversationId];
    if (options.throughSequence !== undefined) {
      where.push(options.turnId ? '(sequence <= ? OR turn_id = ?)' : 'sequence <= ?');
      params.push(options.throughSequence, ...(options.turnId ? [options.turnId] : []));
    } else if (options.turnId) {
      where.push('turn_id = ?');
      params.push(options.turnId);
    }
    if (options.toolExecutionId) {
      where.push('tool_execution_id = ?');
      params.push(options.toolExecutionId);
    }
    const rows = await this.#all(
      `SELECT * FROM turnkit_messages WHERE ${where.join(' AND ')} ORDER BY sequence, created_at, id`,
      params,
    );
    return rows.map((row) => fromRow<MessageRecord>(MESSAGES, row));
  }

  // Turns

  async createTurn(attrs: NewTurn): Promise<TurnRecord> {
    const record = buildTurn(attrs);
    await this.loadConversation(record.conversationId);
    await this.#insert(TURNS, record);
    return record;
  }

  loadTurn(id: string): Promise<TurnRecord> {
    return this.#one(TURNS, 'turn', id);
  }

  async updateTurn(id: string, attrs: TurnUpdate): Promise<TurnRecord> {
    validateTurnUpdate(attrs);
    const updated = await this.#update<TurnRecord>(TURNS, id, { ...jsonCopy(attrs), updatedAt: nowIso() });
    if (!updated) throw new RecordNotFound('turn', id);
    return updated;
  }

  async claimTurn(id: string, options?: ClaimTurnOptions): Promise<TurnRecord | null> {
    const { from, to, attrs } = splitClaim<TurnStatus, TurnUpdate>(options, {
      from: 'pending',
      to: 'running',
    });
    validateTurnUpdate({ ...attrs, status: to });
    for (const status of from) validateTurnUpdate({ status });
    const claimed = await this.#update<TurnRecord>(
      TURNS,
      id,
      { ...jsonCopy(attrs), status: to, updatedAt: nowIso() },
      `status IN (${from.map(() => '?').join(', ')})`,
      [...from],
    );
    if (!claimed) await this.loadTurn(id);
    return claimed;
  }

  async listTurns(filter: ListTurnsFilter = {}): Promise<TurnRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    const eq = (column: string, value: string | undefined) => {
      if (value === undefined) return;
      where.push(`${column} = ?`);
      params.push(value);
    };
    eq('root_turn_id', filter.rootTurnId);
    eq('conversation_id', filter.conversationId);
    eq('agent_name', filter.agentName);
    eq('parent_turn_id', filter.parentTurnId);
    eq('parent_tool_execution_id', filter.parentToolExecutionId);
    if (filter.status !== undefined) {
      const statuses = typeof filter.status === 'string' ? [filter.status] : [...filter.status];
      where.push(`status IN (${statuses.map(() => '?').join(', ')})`);
      params.push(...statuses);
    }
    const limit = filter.limit !== undefined ? ` LIMIT ${Math.max(0, Math.floor(filter.limit))}` : '';
    const rows = await this.#all(
      `SELECT * FROM turnkit_turns${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, id${limit}`,
      params,
    );
    return rows.map((row) => fromRow<TurnRecord>(TURNS, row));
  }

  async listSubmittedTurns(options: { limit?: number } = {}): Promise<TurnRecord[]> {
    const limit = options.limit !== undefined ? ` LIMIT ${Math.max(0, Math.floor(options.limit))}` : '';
    const rows = await this.#all(
      `SELECT * FROM turnkit_turns WHERE submitted_at IS NOT NULL ORDER BY created_at, id${limit}`,
    );
    return rows.map((row) => fromRow<TurnRecord>(TURNS, row));
  }

  async listActionableTurns(options: { limit: number }): Promise<TurnRecord[]> {
    const rows = await this.#all(
      `SELECT * FROM turnkit_turns WHERE submitted_at IS NOT NULL AND status IN (?, ?, ?) ORDER BY updated_at, id LIMIT ${Math.max(0, Math.floor(options.limit))}`,
      ACTIVE,
    );
    return rows.map((row) => fromRow<TurnRecord>(TURNS, row));
  }

  async listStaleInlineTurns(options: { before: string; limit: number }): Promise<TurnRecord[]> {
    const rows = await this.#all(
      `SELECT * FROM turnkit_turns WHERE submitted_at IS NULL AND status IN ('pending', 'running')
        AND COALESCE(heartbeat_at, started_at, created_at) < ? ORDER BY updated_at, id LIMIT ${Math.max(0, Math.floor(options.limit))}`,
      [options.before],
    );
    return rows.map((row) => fromRow<TurnRecord>(TURNS, row));
  }

  async busyConversation(id: string, options: { includePending?: boolean } = {}): Promise<boolean> {
    const pending = options.includePending ?? true;
    const rows = await this.#all(
      `SELECT id FROM turnkit_turns WHERE conversation_id = ? AND (status IN ('running', 'waiting')${
        pending ? ` OR (status = 'pending' AND submitted_at IS NOT NULL)` : ''
      }) LIMIT 1`,
      [id],
    );
    return rows.length > 0;
  }

  async nextDeliveryTrigger(conversationId: string): Promise<MessageRecord | null> {
    const through = consumedThrough(await this.listTurns({ conversationId }));
    const candidates = (await this.listMessages(conversationId)).filter(
      (message) => message.sequence > through && typeof message.metadata['delivery_id'] === 'string',
    );
    return candidates.at(-1) ?? null;
  }

  async reconcileStaleTurns(options: { before: string; limit?: number }): Promise<TurnRecord[]> {
    const candidates = await this.listStaleInlineTurns({
      before: options.before,
      limit: options.limit ?? 100,
    });
    const stale: TurnRecord[] = [];
    for (const candidate of candidates) {
      const root =
        candidate.rootTurnId === candidate.id ? candidate : await this.loadTurn(candidate.rootTurnId);
      const row = await this.atomic(root.conversationId, async () => {
        const fresh = await this.loadTurn(candidate.id);
        const anchor = fresh.heartbeatAt ?? fresh.startedAt ?? fresh.createdAt;
        if (fresh.submittedAt !== null || anchor >= options.before) return null;
        return this.claimTurn(fresh.id, {
          from: ['pending', 'running'],
          to: 'stale',
          claimToken: null,
          completedAt: nowIso(),
        });
      });
      if (row) stale.push(row);
    }
    return stale;
  }

  // Deliveries

  async createDelivery(attrs: NewDelivery): Promise<DeliveryRecord> {
    const record = buildDelivery(attrs);
    const row = toRow(DELIVERIES, record);
    const columns = Object.keys(row);
    const inserted = await this.#all(
      `INSERT INTO turnkit_deliveries (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})
        ON CONFLICT (key) DO NOTHING RETURNING *`,
      Object.values(row),
    );
    if (inserted[0]) return fromRow<DeliveryRecord>(DELIVERIES, inserted[0]);
    const [existing] = await this.#all(`SELECT * FROM turnkit_deliveries WHERE key = ?`, [attrs.key]);
    return matchExistingDelivery(fromRow<DeliveryRecord>(DELIVERIES, existing!), attrs);
  }

  loadDelivery(id: string): Promise<DeliveryRecord> {
    return this.#one(DELIVERIES, 'delivery', id);
  }

  async updateDelivery(id: string, attrs: DeliveryUpdate): Promise<DeliveryRecord> {
    validateDeliveryUpdate(attrs);
    const updated = await this.#update<DeliveryRecord>(DELIVERIES, id, { ...attrs });
    if (!updated) throw new RecordNotFound('delivery', id);
    return updated;
  }

  async listDeliveries(filter: ListDeliveriesFilter = {}): Promise<DeliveryRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.sourceConversationId) {
      where.push('source_conversation_id = ?');
      params.push(filter.sourceConversationId);
    }
    if (filter.destinationConversationId) {
      where.push('destination_conversation_id = ?');
      params.push(filter.destinationConversationId);
    }
    if (filter.pending) where.push('delivered_at IS NULL');
    const limit = filter.limit !== undefined ? ` LIMIT ${Math.max(0, Math.floor(filter.limit))}` : '';
    const rows = await this.#all(
      `SELECT * FROM turnkit_deliveries${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, id${limit}`,
      params,
    );
    return rows.map((row) => fromRow<DeliveryRecord>(DELIVERIES, row));
  }

  // Waits

  async createWait(attrs: { turnId: string; targetTurnId: string }): Promise<WaitRecord> {
    if (attrs.turnId === attrs.targetTurnId) {
      throw new ToolError('a turn cannot wait for itself');
    }
    const record: WaitRecord = {
      turnId: attrs.turnId,
      targetTurnId: attrs.targetTurnId,
      createdAt: nowIso(),
    };
    await this.#all(
      `INSERT INTO turnkit_waits (turn_id, target_turn_id, created_at) VALUES (?, ?, ?) ON CONFLICT (turn_id, target_turn_id) DO NOTHING`,
      [record.turnId, record.targetTurnId, record.createdAt],
    );
    const [row] = await this.#all(`SELECT * FROM turnkit_waits WHERE turn_id = ? AND target_turn_id = ?`, [
      attrs.turnId,
      attrs.targetTurnId,
    ]);
    return fromRow<WaitRecord>(WAITS, row!);
  }

  async listWaits(filter: { turnId?: string; targetTurnId?: string } = {}): Promise<WaitRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.turnId) {
      where.push('turn_id = ?');
      params.push(filter.turnId);
    }
    if (filter.targetTurnId) {
      where.push('target_turn_id = ?');
      params.push(filter.targetTurnId);
    }
    const rows = await this.#all(
      `SELECT * FROM turnkit_waits${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, turn_id, target_turn_id`,
      params,
    );
    return rows.map((row) => fromRow<WaitRecord>(WAITS, row));
  }

  // Tool executions

  async createToolExecution(attrs: NewToolExecution): Promise<ToolExecutionRecord> {
    const record = buildToolExecution(attrs);
    await this.loadTurn(record.turnId);
    try {
      await this.#insert(TOOL_EXECUTIONS, record);
    } catch (error) {
      if (
        error instanceof StoreError &&
        /unique|duplicate/i.test(String((error.cause as Error)?.message ?? error.message))
      ) {
        throw new StoreError(
          `turn ${attrs.turnId} already has an execution for tool call ${attrs.toolCallId}`,
          {
            cause: error,
          },
        );
      }
      throw error;
    }
    return record;
  }

  loadToolExecution(id: string): Promise<ToolExecutionRecord> {
    return this.#one(TOOL_EXECUTIONS, 'tool execution', id);
  }

  async claimToolExecution(
    id: string,
    options?: ClaimToolExecutionOptions,
  ): Promise<ToolExecutionRecord | null> {
    const { from, to, attrs } = splitClaim<ToolExecutionStatus, ToolExecutionUpdate>(options, {
      from: 'running',
      to: 'completed',
    });
    validateToolExecutionUpdate(attrs);
    const claimed = await this.#update<ToolExecutionRecord>(
      TOOL_EXECUTIONS,
      id,
      { ...jsonCopy(attrs), status: to, updatedAt: nowIso() },
      `status IN (${from.map(() => '?').join(', ')})`,
      [...from],
    );
    if (!claimed) await this.loadToolExecution(id);
    return claimed;
  }

  async listToolExecutions(
    filter: { turnId: string } | { turnIds: readonly string[] },
  ): Promise<ToolExecutionRecord[]> {
    const ids = 'turnId' in filter ? [filter.turnId] : [...filter.turnIds];
    if (ids.length === 0) return [];
    const rows = await this.#all(
      `SELECT * FROM turnkit_tool_executions WHERE turn_id IN (${ids.map(() => '?').join(', ')}) ORDER BY created_at, id`,
      ids,
    );
    return rows.map((row) => fromRow<ToolExecutionRecord>(TOOL_EXECUTIONS, row));
  }

  // Events

  appendEvent(attrs: {
    turnId: string;
    conversationId: string;
    type: string;
    payload?: JsonObject;
  }): Promise<EventRecord> {
    return this.#tx([`events:${attrs.turnId}`], async () => {
      const [row] = await this.#all(`SELECT MAX(sequence) AS latest FROM turnkit_events WHERE turn_id = ?`, [
        attrs.turnId,
      ]);
      const record: EventRecord = {
        turnId: attrs.turnId,
        sequence: Number(row?.['latest'] ?? 0) + 1,
        conversationId: attrs.conversationId,
        type: attrs.type,
        payload: jsonCopy(attrs.payload ?? {}),
        createdAt: nowIso(),
      };
      await this.#insert(EVENTS, record);
      return record;
    });
  }

  async listEvents(
    turnId: string,
    options: { afterSequence?: number; limit?: number } = {},
  ): Promise<EventRecord[]> {
    const limit = options.limit !== undefined ? ` LIMIT ${Math.max(0, Math.floor(options.limit))}` : '';
    const rows = await this.#all(
      `SELECT * FROM turnkit_events WHERE turn_id = ? AND sequence > ? ORDER BY sequence${limit}`,
      [turnId, options.afterSequence ?? 0],
    );
    return rows.map((row) => fromRow<EventRecord>(EVENTS, row));
  }

  close(): Promise<void> {
    return this.#driver.close();
  }
}
