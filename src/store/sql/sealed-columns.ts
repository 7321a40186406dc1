/**
 * Which columns hold a tenant's content, and sealing them at the store's write and read
 * boundary (decision 80). Writes replace each content value with sealed text under its
 * tenant's key (a JSON column keeps `{"turnkit_sealed": "<text>"}`, a text column the text);
 * reads open them, so every reader of the store (client, console, streams, evals, the model
 * request) sees plain records. The tenant is the conversation's (`tenantOf`); a row without
 * its conversation id in hand finds it by its turn or tool execution, once per process (the
 * ids never change owner).
 */
import { ConfigError, ContentErasedError } from '../../errors.js';
import type { ConversationRecord, JsonObject } from '../types.js';
import { ContentSealer, SEALED_PREFIX } from '../sealing/content-sealer.js';
import type { TenantKeyProvider } from '../sealing/tenant-keys.js';
import type { SqlConnection } from './driver.js';
import type { TableSpec } from './schema.js';
import { DELIVERIES, EVENTS, MESSAGES, STREAM_PARTS, TOOL_EXECUTIONS, TURNS } from './schema.js';

/** How a store seals content with per-tenant keys. */
export interface TenantKeysOptions {
  provider: TenantKeyProvider;
  /**
   * The tenant whose key seals a conversation's content; undefined keeps it plain. Default:
   * the conversation's principal (`metadata.principal`): a string principal itself, else its
   * `tenant`, else its `id`.
   */
  tenantOf?: (conversation: Pick<ConversationRecord, 'id' | 'agentName' | 'metadata'>) => string | undefined;
  /** How long a fetched key is used before the provider is asked again (default 60 000 ms). */
  cacheMs?: number;
}

const SEALED_KEY = 'turnkit_sealed';

/** Where a table's rows find their conversation, and which of their fields are content. */
interface SealedTable {
  fields: readonly string[];
  /** The record field holding the conversation id, or the turn id that leads to it. */
  owner: { conversation: string } | { turn: string };
  /** Written for a tenant without a key as content that reads as erased, instead of refused. */
  markErased?: boolean;
}

const SEALED_TABLES = new Map<TableSpec, SealedTable>([
  [MESSAGES, { fields: ['content'], owner: { conversation: 'conversationId' } }],
  [TURNS, { fields: ['outputText', 'outputData'], owner: { conversation: 'conversationId' } }],
  [TOOL_EXECUTIONS, { fields: ['arguments', 'result', 'error'], owner: { turn: 'turnId' } }],
  [DELIVERIES, { fields: ['payload'], owner: { conversation: 'destinationConversationId' } }],
  [EVENTS, { fields: ['payload'], owner: { conversation: 'conversationId' }, markErased: true }],
  [STREAM_PARTS, { fields: ['payload'], owner: { turn: 'rootTurnId' }, markErased: true }],
]);

/** What a list that spans tenants shows for a field whose tenant was erased (lenient reads). */
const ERASED_PLACEHOLDER: Record<string, unknown> = { arguments: {}, content: [] };

/** The default tenant: a string principal, or a principal's `tenant`, else its `id`. */
export function tenantOfPrincipal(conversation: { metadata: JsonObject }): string | undefined {
  const principal = conversation.metadata['principal'];
  if (typeof principal === 'string' && principal !== '') return principal;
  if (!principal || typeof principal !== 'object' || Array.isArray(principal)) return undefined;
  for (const field of ['tenant', 'id']) {
    const value = (principal as Record<string, unknown>)[field];
    if (typeof value === 'string' || typeof value === 'number') return String(value);
  }
  return undefined;
}

const sealedText = (value: unknown, kind: 'json' | 'text'): string | undefined => {
  if (kind === 'text') return typeof value === 'string' && value.startsWith(SEALED_PREFIX) ? value : undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const text = (value as Record<string, unknown>)[SEALED_KEY];
  return typeof text === 'string' && Object.keys(value).length === 1 ? text : undefined;
};

/** A tool execution's error keeps its details plain (the budget ledger reads them): only the message is sealed. */
const isErrorField = (spec: TableSpec, field: string) => spec === TOOL_EXECUTIONS && field === 'error';

/** Caps a lookup cache: cleared whole when it grows past this many ids. */
const CACHE_IDS = 20_000;

export class SealedColumns {
  readonly #sealer: ContentSealer | undefined;
  readonly #tenantOf: TenantKeysOptions['tenantOf'];
  readonly #tenants = new Map<string, string | null>();
  readonly #turnConversations = new Map<string, string>();
  readonly #executionTurns = new Map<string, string>();

  constructor(options: TenantKeysOptions | undefined) {
    this.#sealer = options ? new ContentSealer(options.provider, options) : undefined;
    this.#tenantOf = options?.tenantOf ?? tenantOfPrincipal;
  }

  get enabled(): boolean {
    return this.#sealer !== undefined;
  }

  /** Drops what this process cached about a conversation (its metadata changed). */
  forgetConversation(id: string): void {
    this.#tenants.delete(id);
  }

  static #remember<T>(map: Map<string, T>, key: string, value: T): T {
    if (map.size >= CACHE_IDS) map.clear();
    map.set(key, value);
    return value;
  }

  async #tenantOfConversation(connection: SqlConnection, id: string): Promise<string | undefined> {
    const known = this.#tenants.get(id);
    if (known !== undefined) return known ?? undefined;
    const [row] = await connection.query(
      `SELECT id, agent_name, metadata FROM turnkit_conversations WHERE id = ?`,
      [id],
    );
    if (!row) return undefined;
    const metadata = row['metadata'];
    const tenant = this.#tenantOf!({
      id,
      agentName: String(row['agent_name']),
      metadata: (typeof metadata === 'string' ? JSON.parse(metadata) : metadata) as JsonObject,
    });
    return SealedColumns.#remember(this.#tenants, id, tenant ?? null) ?? undefined;
  }

  async #conversationOfTurn(connection: SqlConnection, turnId: string): Promise<string | undefined> {
    const known = this.#turnConversations.get(turnId);
    if (known !== undefined) return known;
    const [row] = await connection.query(`SELECT conversation_id FROM turnkit_turns WHERE id = ?`, [turnId]);
    return row ? SealedColumns.#remember(this.#turnConversations, turnId, String(row['conversation_id'])) : undefined;
  }

  async #turnOfExecution(connection: SqlConnection, id: string): Promise<string | undefined> {
    const known = this.#executionTurns.get(id);
    if (known !== undefined) return known;
    const [row] = await connection.query(`SELECT turn_id FROM turnkit_tool_executions WHERE id = ?`, [id]);
    return row ? SealedColumns.#remember(this.#executionTurns, id, String(row['turn_id'])) : undefined;
  }

  /**
   * The tenant of a record of `spec` (a new row, or the row `id` an update changes); undefined
   * when its conversation has none (or the row does not exist: the write then fails on its own).
   */
  async #tenant(connection: SqlConnection, spec: TableSpec, record: Record<string, unknown>, id?: string) {
    const owner = SEALED_TABLES.get(spec)!.owner;
    let conversationId: string | undefined;
    if ('conversation' in owner && typeof record[owner.conversation] === 'string') {
      conversationId = record[owner.conversation] as string;
    } else {
      let turnId = 'turn' in owner ? (record[owner.turn] as string | undefined) : undefined;
      if (turnId === undefined && id !== undefined)
        turnId = spec === TURNS ? id : await this.#turnOfExecution(connection, id);
      if (turnId !== undefined) conversationId = await this.#conversationOfTurn(connection, turnId);
    }
    return conversationId === undefined ? undefined : this.#tenantOfConversation(connection, conversationId);
  }

  /**
   * `record` with its content fields sealed under its tenant's key (a copy; the record itself
   * when nothing is to be sealed). `id`: the row an update changes, when the record is partial.
   */
  async seal<T extends object>(connection: SqlConnection, spec: TableSpec, record: T, id?: string): Promise<T> {
    const table = SEALED_TABLES.get(spec);
    const sealer = this.#sealer;
    if (!table || !sealer) return record;
    const values = record as Record<string, unknown>;
    const present = table.fields.filter((field) => values[field] !== undefined && values[field] !== null);
    if (present.length === 0) return record;
    const tenant = await this.#tenant(connection, spec, values, id);
    if (tenant === undefined) return record;
    const sealed: Record<string, unknown> = { ...values };
    const options = { erasedMark: table.markErased === true };
    for (const field of present) {
      const value = values[field];
      if (isErrorField(spec, field)) {
        const error = value as { message?: unknown };
        if (typeof error.message === 'string')
          sealed[field] = { ...error, message: await sealer.seal(tenant, error.message, options) };
      } else {
        const text = await sealer.seal(tenant, value, options);
        sealed[field] = spec.byField.get(field)!.kind === 'text' ? text : { [SEALED_KEY]: text };
      }
    }
    return sealed as T;
  }

  /** Each content field's sealed text, with a setter for its opened value. */
  #sealedFields(spec: TableSpec, records: readonly object[]) {
    const found: { text: string; record: Record<string, unknown>; field: string; error: boolean }[] = [];
    const table = SEALED_TABLES.get(spec);
    if (!table) return found;
    for (const record of records as Record<string, unknown>[])
      for (const field of table.fields) {
        const value = record[field];
        if (isErrorField(spec, field)) {
          const message = (value as { message?: unknown } | null)?.message;
          const text = sealedText(message, 'text');
          if (text) found.push({ text, record, field, error: true });
          continue;
        }
        const text = sealedText(value, spec.byField.get(field)!.kind === 'text' ? 'text' : 'json');
        if (text) found.push({ text, record, field, error: false });
      }
    return found;
  }

  /**
   * Opens the records' sealed fields in place. `strict` (every read of one conversation's
   * rows): an erased tenant's content is a ContentErasedError. `lenient` (lists that span
   * tenants, the console's): it reads as a placeholder, so other tenants' rows still show.
   */
  async open<T extends object>(spec: TableSpec, records: T[], mode: 'strict' | 'lenient' = 'strict'): Promise<T[]> {
    const fields = this.#sealedFields(spec, records);
    if (fields.length === 0) return records;
    const sealer = this.#sealer;
    if (!sealer)
      throw new ConfigError(
        `the store holds content sealed with tenant keys: open it with tenantKeys (or TURNKIT_TENANT_KEYS) to read it`,
      );
    await sealer.prepare(fields.map((f) => f.text));
    for (const { text, record, field, error } of fields) {
      let value: unknown;
      try {
        value = sealer.open(text);
      } catch (failure) {
        if (mode === 'strict' || !(failure instanceof ContentErasedError)) throw failure;
        value = error ? '[erased]' : (ERASED_PLACEHOLDER[field] ?? null);
      }
      record[field] = error ? { ...(record[field] as object), message: value } : value;
    }
    return records;
  }
}
