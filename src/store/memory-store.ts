import { AsyncLocalStorage } from 'node:async_hooks';
import { RecordNotFound, StoreError, ToolError } from '../errors.js';
import { busyConversation, nextDeliveryTrigger, reconcileStaleTurns } from './maintenance.js';
import { markTransaction } from './transaction-marker.js';
import {
  assertToolExecutionStatus,
  buildConversation,
  forkedMessage,
  buildDelivery,
  buildMessage,
  buildToolExecution,
  buildTurn,
  jsonCopy,
  matchExistingDelivery,
  nowIso,
  splitClaim,
  validateConversationUpdate,
  validateDeliveryUpdate,
  validateToolExecutionUpdate,
  validateTurnUpdate,
} from './records.js';
import type {
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
  NewToolExecution,
  NewTurn,
  Store,
  StoreBackend,
  ToolExecutionFilter,
  ToolExecutionRecord,
  ToolExecutionStatus,
  ToolExecutionUpdate,
  TurnRecord,
  TurnStatus,
  TurnUpdate,
  WaitRecord,
  NewStreamPart,
  StreamPartRecord,
} from './types.js';
import { LANE_TURN_STATUSES, STREAM_DELTA_TYPES } from './types.js';
import { buildStreamPart } from './stream-parts.js';

/**
 * Every table, keyed by primary key. Stored records are never mutated in place (an update
 * stores a new object), so a snapshot is a shallow copy of the maps.
 */
interface Tables {
  conversations: Map<string, ConversationRecord>;
  messages: Map<string, MessageRecord>;
  turns: Map<string, TurnRecord>;
  toolExecutions: Map<string, ToolExecutionRecord>;
  deliveries: Map<string, DeliveryRecord>;
  /** Keyed by `turnId target turnId`. */
  waits: Map<string, WaitRecord>;
  /** Keyed by `turnId sequence`. */
  events: Map<string, EventRecord>;
  latestSequence: Map<string, number>;
  latestEventSequence: Map<string, number>;
  /** Keyed by the store-wide sequence. */
  streamParts: Map<number, StreamPartRecord>;
}

function emptyTables(): Tables {
  return {
    conversations: new Map(),
    messages: new Map(),
    turns: new Map(),
    toolExecutions: new Map(),
    deliveries: new Map(),
    waits: new Map(),
    events: new Map(),
    latestSequence: new Map(),
    latestEventSequence: new Map(),
    streamParts: new Map(),
  };
}

function snapshotOf(tables: Tables): Tables {
  return Object.fromEntries(
    Object.entries(tables).map(([name, table]) => [name, new Map(table as Map<string, unknown>)]),
  ) as unknown as Tables;
}

const compare = (a: string | number, b: string | number) => (a < b ? -1 : a > b ? 1 : 0);
const byCreated = (a: { createdAt: string; id: string }, b: { createdAt: string; id: string }) =>
  compare(a.createdAt, b.createdAt) || compare(a.id, b.id);
const byUpdated = (a: TurnRecord, b: TurnRecord) => compare(a.updatedAt, b.updatedAt) || compare(a.id, b.id);
const bounded = <T>(rows: T[], limit: number | undefined): T[] =>
  limit === undefined ? rows : rows.slice(0, Math.max(0, Math.floor(limit)));
const statusList = <S extends string>(status: S | readonly S[]): readonly S[] =>
  typeof status === 'string' ? [status as S] : (status as readonly S[]);
const waitKey = (turnId: string, targetTurnId: string) => `${turnId}\u0000${targetTurnId}`;

/** One open transaction: the async context that owns the mutex and what to restore. */
interface Transaction {
  snapshot: Tables;
}

/**
 * The in-process store (backend `memory`): plain maps behind one process-wide async mutex.
 * `atomic` is reentrant along an async call chain (AsyncLocalStorage tells whether the
 * caller already holds the transaction), and an error in the outermost block restores the
 * snapshot taken when it began. Reads from outside the open transaction see the snapshot,
 * i.e. only committed rows. Nothing here survives the process.
 */
export class MemoryStore implements Store {
  readonly backend: StoreBackend = 'memory';
  #tables: Tables = emptyTables();
  #open: Transaction | null = null;
  #tail: Promise<void> = Promise.resolve();
  readonly #context = new AsyncLocalStorage<Transaction>();

  // Transactions

  #inTransaction(): boolean {
    return this.#open !== null && this.#context.getStore() === this.#open;
  }

  async #acquire(): Promise<() => void> {
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    return release;
  }

  atomic<T>(_conversationId: string | null, fn: () => Promise<T>): Promise<T> {
    return this.#transaction(fn);
  }

  atomicGraph<T>(fn: () => Promise<T>): Promise<T> {
    return this.#transaction(fn);
  }

  async #transaction<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#inTransaction()) return fn();
    return markTransaction(async () => {
      const release = await this.#acquire();
      const transaction: Transaction = { snapshot: snapshotOf(this.#tables) };
      this.#open = transaction;
      try {
        return await this.#context.run(transaction, fn);
      } catch (error) {
        this.#tables = transaction.snapshot;
        throw error;
      } finally {
        this.#open = null;
        release();
      }
    });
  }

  /** Committed rows for readers outside the open transaction, live rows inside it. */
  get #read(): Tables {
    return this.#open && !this.#inTransaction() ? this.#open.snapshot : this.#tables;
  }

  /**
   * A single write: validation happens before the first mutation and the body is
   * synchronous, so it is atomic by itself; outside a transaction it still queues on the
   * mutex so a rollback of someone else's block can never erase it.
   */
  async #write<T>(fn: (tables: Tables) => T): Promise<T> {
    if (this.#inTransaction()) return jsonCopy(fn(this.#tables));
    const release = await this.#acquire();
    try {
      return jsonCopy(fn(this.#tables));
    } finally {
      release();
    }
  }

  #get<T>(table: Map<string, T>, name: string, id: string): T {
    const row = table.get(id);
    if (row === undefined) throw new RecordNotFound(name, id);
    return row;
  }

  #insertNew<T>(table: Map<string, T>, name: string, id: string, row: T): void {
    if (table.has(id)) throw new StoreError(`${name} ${id} already exists`);
    table.set(id, row);
  }

  // Conversations

  async createConversation(attrs: NewConversation): Promise<ConversationRecord> {
    const record = buildConversation(attrs);
    return this.#write((t) => {
      this.#insertNew(t.conversations, 'conversation', record.id, record);
      return record;
    });
  }

  async loadConversation(id: string): Promise<ConversationRecord> {
    return jsonCopy(this.#get(this.#read.conversations, 'conversation', id));
  }

  async updateConversation(id: string, attrs: ConversationUpdate): Promise<ConversationRecord> {
    validateConversationUpdate(attrs);
    const changes = jsonCopy(attrs);
    return this.#write((t) => {
      const next = { ...this.#get(t.conversations, 'conversation', id), ...changes, updatedAt: nowIso() };
      t.conversations.set(id, next);
      return next;
    });
  }

  async listForks(conversationId: string): Promise<ConversationRecord[]> {
    const rows = [...this.#read.conversations.values()].filter(
      (conversation) => conversation.forkedFromConversationId === conversationId,
    );
    return jsonCopy(rows.sort(byCreated));
  }

  // Messages

  async latestMessageSequence(conversationId: string): Promise<number> {
    return this.#read.latestSequence.get(conversationId) ?? 0;
  }

  async nextMessageSequence(conversationId: string): Promise<number> {
    return (await this.latestMessageSequence(conversationId)) + 1;
  }

  async appendMessage(attrs: NewMessage): Promise<MessageRecord> {
    const built = buildMessage(attrs);
    return this.#write((t) => {
      this.#get(t.conversations, 'conversation', attrs.conversationId);
      const sequence = (t.latestSequence.get(attrs.conversationId) ?? 0) + 1;
      const record: MessageRecord = { ...built, sequence };
      this.#insertNew(t.messages, 'message', record.id, record);
      t.latestSequence.set(attrs.conversationId, sequence);
      return record;
    });
  }

  async copyMessages(options: CopyMessagesOptions): Promise<number> {
    return this.#write((t) => {
      this.#get(t.conversations, 'conversation', options.from);
      this.#get(t.conversations, 'conversation', options.to);
      if ((t.latestSequence.get(options.to) ?? 0) > 0)
        throw new StoreError(
          `conversation ${options.to} already has messages: a fork's history is copied first`,
        );
      const sources = [...t.messages.values()]
        .filter((m) => m.conversationId === options.from && m.sequence <= options.throughSequence)
        .sort((a, b) => a.sequence - b.sequence);
      for (const source of sources) {
        const copy = forkedMessage(source, options.to);
        this.#insertNew(t.messages, 'message', copy.id, copy);
      }
      const last = sources.at(-1);
      if (last) t.latestSequence.set(options.to, last.sequence);
      return sources.length;
    });
  }

  async loadMessage(id: string): Promise<MessageRecord> {
    return jsonCopy(this.#get(this.#read.messages, 'message', id));
  }

  async listMessages(conversationId: string, options: ListMessagesOptions = {}): Promise<MessageRecord[]> {
    const { throughSequence, turnId, toolExecutionId, kind, afterSequence, beforeSequence } = options;
    const rows = [...this.#read.messages.values()].filter((message) => {
      if (message.conversationId !== conversationId) return false;
      if (kind !== undefined && message.kind !== kind) return false;
      if (afterSequence !== undefined && message.sequence <= afterSequence) return false;
      if (beforeSequence !== undefined && message.sequence >= beforeSequence) return false;
      if (throughSequence !== undefined) {
        if (!(message.sequence <= throughSequence || (turnId !== undefined && message.turnId === turnId)))
          return false;
      } else if (turnId !== undefined && message.turnId !== turnId) return false;
      return toolExecutionId === undefined || message.toolExecutionId === toolExecutionId;
    });
    rows.sort((a, b) => a.sequence - b.sequence || byCreated(a, b));
    return jsonCopy(rows);
  }

  // Turns

  async createTurn(attrs: NewTurn): Promise<TurnRecord> {
    const record = buildTurn(attrs);
    return this.#write((t) => {
      this.#get(t.conversations, 'conversation', record.conversationId);
      this.#insertNew(t.turns, 'turn', record.id, record);
      return record;
    });
  }

  async loadTurn(id: string): Promise<TurnRecord> {
    return jsonCopy(this.#get(this.#read.turns, 'turn', id));
  }

  async updateTurn(id: string, attrs: TurnUpdate): Promise<TurnRecord> {
    validateTurnUpdate(attrs);
    const changes = jsonCopy(attrs);
    return this.#write((t) => {
      const next = { ...this.#get(t.turns, 'turn', id), ...changes, updatedAt: nowIso() };
      t.turns.set(id, next);
      return next;
    });
  }

  async claimTurn(id: string, options?: ClaimTurnOptions): Promise<TurnRecord | null> {
    const { from, to, attrs } = splitClaim<TurnStatus, TurnUpdate>(options, {
      from: 'pending',
      to: 'running',
    });
    validateTurnUpdate({ ...attrs, status: to });
    for (const status of from) validateTurnUpdate({ status });
    const changes = jsonCopy(attrs);
    return this.#write((t) => {
      const current = this.#get(t.turns, 'turn', id);
      if (!from.includes(current.status)) return null;
      const next = { ...current, ...changes, status: to, updatedAt: nowIso() };
      t.turns.set(id, next);
      return next;
    });
  }

  async listTurns(filter: ListTurnsFilter = {}): Promise<TurnRecord[]> {
    const statuses = filter.status === undefined ? undefined : statusList(filter.status);
    const rows = [...this.#read.turns.values()].filter(
      (turn) =>
        (filter.rootTurnId === undefined || turn.rootTurnId === filter.rootTurnId) &&
        (filter.conversationId === undefined || turn.conversationId === filter.conversationId) &&
        (filter.agentName === undefined || turn.agentName === filter.agentName) &&
        (filter.parentTurnId === undefined || turn.parentTurnId === filter.parentTurnId) &&
        (filter.parentToolExecutionId === undefined ||
          turn.parentToolExecutionId === filter.parentToolExecutionId) &&
        (statuses === undefined || statuses.includes(turn.status)) &&
        (filter.after === undefined || byCreated(turn, filter.after) > 0),
    );
    return jsonCopy(bounded(rows.sort(byCreated), filter.limit));
  }

  async listSubmittedTurns(options: { limit?: number } = {}): Promise<TurnRecord[]> {
    const rows = [...this.#read.turns.values()].filter((turn) => turn.submittedAt !== null);
    return jsonCopy(bounded(rows.sort(byCreated), options.limit));
  }

  async listActionableTurns(options: { limit: number }): Promise<TurnRecord[]> {
    const rows = [...this.#read.turns.values()].filter(
      (turn) => turn.submittedAt !== null && LANE_TURN_STATUSES.includes(turn.status),
    );
    return jsonCopy(bounded(rows.sort(byUpdated), options.limit));
  }

  async listStaleInlineTurns(options: { before: string; limit: number }): Promise<TurnRecord[]> {
    const rows = [...this.#read.turns.values()].filter(
      (turn) =>
        turn.submittedAt === null &&
        (turn.status === 'pending' || turn.status === 'running') &&
        (turn.heartbeatAt ?? turn.startedAt ?? turn.createdAt) < options.before,
    );
    return jsonCopy(bounded(rows.sort(byUpdated), options.limit));
  }

  busyConversation(id: string, options?: { includePending?: boolean }): Promise<boolean> {
    return busyConversation(this, id, options);
  }

  nextDeliveryTrigger(conversationId: string): Promise<MessageRecord | null> {
    return nextDeliveryTrigger(this, conversationId);
  }

  // Deliveries

  async createDelivery(attrs: NewDelivery): Promise<DeliveryRecord> {
    const record = buildDelivery(attrs);
    return this.#write((t) => {
      for (const existing of t.deliveries.values()) {
        if (existing.key === attrs.key) return matchExistingDelivery(existing, attrs);
      }
      this.#insertNew(t.deliveries, 'delivery', record.id, record);
      return record;
    });
  }

  async loadDelivery(id: string): Promise<DeliveryRecord> {
    return jsonCopy(this.#get(this.#read.deliveries, 'delivery', id));
  }

  async updateDelivery(id: string, attrs: DeliveryUpdate): Promise<DeliveryRecord> {
    validateDeliveryUpdate(attrs);
    const changes = jsonCopy(attrs);
    return this.#write((t) => {
      const next = { ...this.#get(t.deliveries, 'delivery', id), ...changes };
      t.deliveries.set(id, next);
      return next;
    });
  }

  async listDeliveries(filter: ListDeliveriesFilter = {}): Promise<DeliveryRecord[]> {
    const rows = [...this.#read.deliveries.values()].filter(
      (delivery) =>
        (filter.sourceConversationId === undefined ||
          delivery.sourceConversationId === filter.sourceConversationId) &&
        (filter.destinationConversationId === undefined ||
          delivery.destinationConversationId === filter.destinationConversationId) &&
        (!filter.pending || delivery.deliveredAt === null),
    );
    return jsonCopy(bounded(rows.sort(byCreated), filter.limit));
  }

  // Waits

  async createWait(attrs: { turnId: string; targetTurnId: string }): Promise<WaitRecord> {
    if (attrs.turnId === attrs.targetTurnId) throw new ToolError('a turn cannot wait for itself');
    const record: WaitRecord = {
      turnId: attrs.turnId,
      targetTurnId: attrs.targetTurnId,
      createdAt: nowIso(),
    };
    return this.#write((t) => {
      const key = waitKey(attrs.turnId, attrs.targetTurnId);
      const existing = t.waits.get(key);
      if (existing) return existing;
      t.waits.set(key, record);
      return record;
    });
  }

  async listWaits(filter: { turnId?: string; targetTurnId?: string } = {}): Promise<WaitRecord[]> {
    const rows = [...this.#read.waits.values()].filter(
      (wait) =>
        (filter.turnId === undefined || wait.turnId === filter.turnId) &&
        (filter.targetTurnId === undefined || wait.targetTurnId === filter.targetTurnId),
    );
    rows.sort(
      (a, b) =>
        compare(a.createdAt, b.createdAt) ||
        compare(a.turnId, b.turnId) ||
        compare(a.targetTurnId, b.targetTurnId),
    );
    return jsonCopy(rows);
  }

  // Tool executions

  async createToolExecution(attrs: NewToolExecution): Promise<ToolExecutionRecord> {
    const record = buildToolExecution(attrs);
    return this.#write((t) => {
      this.#get(t.turns, 'turn', record.turnId);
      for (const existing of t.toolExecutions.values()) {
        if (existing.turnId === record.turnId && existing.toolCallId === record.toolCallId) {
          throw new StoreError(
            `turn ${record.turnId} already has an execution for tool call ${record.toolCallId}`,
          );
        }
      }
      this.#insertNew(t.toolExecutions, 'tool execution', record.id, record);
      return record;
    });
  }

  async loadToolExecution(id: string): Promise<ToolExecutionRecord> {
    return jsonCopy(this.#get(this.#read.toolExecutions, 'tool execution', id));
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
    assertToolExecutionStatus(to);
    for (const status of from) assertToolExecutionStatus(status);
    const changes = jsonCopy(attrs);
    return this.#write((t) => {
      const current = this.#get(t.toolExecutions, 'tool execution', id);
      if (!from.includes(current.status)) return null;
      const next = { ...current, ...changes, status: to, updatedAt: nowIso() };
      t.toolExecutions.set(id, next);
      return next;
    });
  }

  async listToolExecutions(filter: ToolExecutionFilter): Promise<ToolExecutionRecord[]> {
    return jsonCopy(this.#selectToolExecutions(filter).sort(byCreated));
  }

  async countToolExecutions(
    filter: ToolExecutionFilter & { exceptStatuses?: readonly ToolExecutionStatus[] },
  ): Promise<Record<string, number>> {
    const except = new Set(filter.exceptStatuses ?? []);
    for (const status of except) assertToolExecutionStatus(status);
    const counts: Record<string, number> = {};
    for (const row of this.#selectToolExecutions(filter)) {
      if (!except.has(row.status)) counts[row.toolName] = (counts[row.toolName] ?? 0) + 1;
    }
    return counts;
  }

  #selectToolExecutions(filter: ToolExecutionFilter): ToolExecutionRecord[] {
    const ids = new Set('turnId' in filter ? [filter.turnId] : filter.turnIds);
    const callIds = filter.toolCallIds === undefined ? null : new Set(filter.toolCallIds);
    return [...this.#read.toolExecutions.values()].filter(
      (execution) =>
        ids.has(execution.turnId) &&
        (callIds === null || callIds.has(execution.toolCallId)) &&
        (filter.toolName === undefined || execution.toolName === filter.toolName) &&
        (filter.hasError === undefined || (execution.error != null) === filter.hasError),
    );
  }

  // Events

  async appendEvent(attrs: {
    turnId: string;
    conversationId: string;
    type: string;
    payload?: JsonObject;
  }): Promise<EventRecord> {
    const payload = jsonCopy(attrs.payload ?? {});
    return this.#write((t) => {
      const sequence = (t.latestEventSequence.get(attrs.turnId) ?? 0) + 1;
      const record: EventRecord = {
        turnId: attrs.turnId,
        sequence,
        conversationId: attrs.conversationId,
        type: attrs.type,
        payload,
        createdAt: nowIso(),
      };
      t.events.set(`${attrs.turnId}\u0000${sequence}`, record);
      t.latestEventSequence.set(attrs.turnId, sequence);
      return record;
    });
  }

  async listEvents(
    turnId: string,
    options: { afterSequence?: number; limit?: number } = {},
  ): Promise<EventRecord[]> {
    const after = options.afterSequence ?? 0;
    const rows = [...this.#read.events.values()].filter(
      (event) => event.turnId === turnId && event.sequence > after,
    );
    return jsonCopy(
      bounded(
        rows.sort((a, b) => a.sequence - b.sequence),
        options.limit,
      ),
    );
  }

  // Live stream parts

  /** Sequences are never reused, even after a rollback (as a SQL sequence). */
  #streamSequence = 0;

  async appendStreamParts(parts: readonly NewStreamPart[]): Promise<StreamPartRecord[]> {
    const records = parts.map(buildStreamPart);
    return this.#write((t) =>
      records.map((record) => {
        const stored: StreamPartRecord = { sequence: ++this.#streamSequence, ...record };
        t.streamParts.set(stored.sequence, stored);
        return stored;
      }),
    );
  }

  async listStreamParts(
    rootTurnId: string,
    options: { afterSequence?: number; limit?: number } = {},
  ): Promise<StreamPartRecord[]> {
    const after = options.afterSequence ?? 0;
    const parts = [...this.#read.streamParts.values()];
    const latest = new Map<string, number>();
    for (const part of parts) {
      if (part.type !== 'step.started') continue;
      const key = `${part.turnId}\u0000${part.step}`;
      latest.set(key, Math.max(latest.get(key) ?? 0, part.sequence));
    }
    const visible = parts.filter(
      (part) =>
        part.rootTurnId === rootTurnId &&
        part.sequence > after &&
        (!STREAM_DELTA_TYPES.includes(part.type) ||
          part.attempt === latest.get(`${part.turnId}\u0000${part.step}`)),
    );
    return jsonCopy(
      bounded(
        visible.sort((a, b) => a.sequence - b.sequence),
        options.limit,
      ),
    );
  }

  async hasStreamPart(rootTurnId: string, sequence: number): Promise<boolean> {
    return this.#read.streamParts.get(sequence)?.rootTurnId === rootTurnId;
  }

  // Maintenance

  reconcileStaleTurns(options: { before: string; limit?: number }): Promise<TurnRecord[]> {
    return reconcileStaleTurns(this, options);
  }

  async close(): Promise<void> {}
}
