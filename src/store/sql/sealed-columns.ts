/**
 * Which columns hold a tenant's content, and sealing them at the store's write and read
 * boundary (decision 80). Writes replace each content value with sealed text under its
 * tenant's key (a JSON column keeps `{"turnkit_sealed": "<text>"}`, a text column the text);
 * reads open them, so every reader of the store (client, console, streams, evals, the model
 * request) sees plain records. The tenant is the conversation's (`tenantOf`); a row without
 * its conversation id in hand finds it by its turn or tool execution, once per process (the
 * ids never change owner).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { ConfigError, ContentErasedError } from '../../errors.js';
import type { ConversationRecord, JsonObject } from '../types.js';
import { ContentSealer, SEALED_PREFIX } from '../sealing/content-sealer.js';
import type { TenantKeyProvider } from '../sealing/tenant-keys.js';
import type { SqlConnection } from './driver.js';
import type { TableSpec } from './schema.js';
import {
  CONVERSATIONS,
  DELIVERIES,
  EVENTS,
  MESSAGES,
  STREAM_PARTS,
  TOOL_EXECUTIONS,
  TURNS,
} from './schema.js';

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

/**
 * One content value: a whole column, or (`path`) a value inside a JSON column whose other
 * keys stay plain because SQL reads them (a turn's `options.state.iterations` feeds the budget
 * ledger, a tool execution's `error.details` too).
 */
interface SealedValue {
  field: string;
  path?: readonly string[];
}

/** Where a table's rows find their conversation, and which of their values are content. */
interface SealedTable {
  values: readonly SealedValue[];
  /** The record field holding the conversation id, or the turn id that leads to it. */
  owner: { conversation: string } | { turn: string };
  /** Written for a tenant without a key as content that reads as erased, instead of refused. */
  markErased?: boolean;
}

/** The turn state's content: the step's parts and output, judges' and audits' findings, provider errors. */
const TURN_STATE_CONTENT = [
  'parts',
  'candidate',
  'output_data',
  'after_results',
  'output_judged',
  'output_audit',
  'model_errors',
];

const SEALED_TABLES = new Map<TableSpec, SealedTable>([
  // The principal stays plain: it names the tenant.
  [
    CONVERSATIONS,
    { values: [{ field: 'metadata', path: ['turnkit_subject_prompt'] }], owner: { conversation: 'id' } },
  ],
  [
    MESSAGES,
    {
      values: [{ field: 'content' }, { field: 'metadata', path: ['task_text'] }],
      owner: { conversation: 'conversationId' },
    },
  ],
  [
    TURNS,
    {
      values: [
        { field: 'outputText' },
        { field: 'outputData' },
        { field: 'error', path: ['message'] },
        { field: 'options', path: ['subject_prompt'] },
        { field: 'options', path: ['instructions'] },
        ...TURN_STATE_CONTENT.map((key) => ({ field: 'options', path: ['state', key] })),
      ],
      owner: { conversation: 'conversationId' },
    },
  ],
  [
    TOOL_EXECUTIONS,
    {
      values: [{ field: 'arguments' }, { field: 'result' }, { field: 'error', path: ['message'] }],
      owner: { turn: 'turnId' },
    },
  ],
  [DELIVERIES, { values: [{ field: 'payload' }], owner: { conversation: 'destinationConversationId' } }],
  [EVENTS, { values: [{ field: 'payload' }], owner: { conversation: 'conversationId' }, markErased: true }],
  [STREAM_PARTS, { values: [{ field: 'payload' }], owner: { turn: 'rootTurnId' }, markErased: true }],
]);

/** What a list that spans tenants shows for a value whose tenant was erased (lenient reads). */
const ERASED_PLACEHOLDER: Record<string, unknown> = { arguments: {}, content: [], message: '[erased]' };

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

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The object holding a path's last key (undefined when the path is not there), and that key. */
function holder(
  record: Record<string, unknown>,
  value: SealedValue,
): [Record<string, unknown>, string] | undefined {
  const keys = [value.field, ...(value.path ?? [])];
  let at: unknown = record;
  for (const key of keys.slice(0, -1)) {
    if (!isObject(at)) return undefined;
    at = at[key];
  }
  return isObject(at) ? [at, keys.at(-1)!] : undefined;
}

/** A copy of `record` down `value`'s path, so the leaf can be replaced without touching the caller's objects. */
function copyPath(record: Record<string, unknown>, value: SealedValue): void {
  let at = record;
  for (const key of [value.field, ...(value.path ?? [])].slice(0, -1)) {
    if (!isObject(at[key])) return;
    at[key] = { ...(at[key] as Record<string, unknown>) };
    at = at[key] as Record<string, unknown>;
  }
}

/** A whole JSON column keeps `{"turnkit_sealed": text}`; a text column and a value inside JSON, the text. */
const wrapped = (spec: TableSpec, value: SealedValue) =>
  value.path === undefined && spec.byField.get(value.field)!.kind === 'json';

function sealedText(stored: unknown, isWrapped: boolean): string | undefined {
  if (!isWrapped) return typeof stored === 'string' && stored.startsWith(SEALED_PREFIX) ? stored : undefined;
  if (!isObject(stored)) return undefined;
  const text = stored[SEALED_KEY];
  return typeof text === 'string' && Object.keys(stored).length === 1 ? text : undefined;
}

/** Records a lenient read gave placeholders for erased content, with the error a strict read raises. */
const ERASED = new WeakMap<object, ContentErasedError>();

/**
 * Throws the ContentErasedError of a record read leniently (a turn) whose content was erased:
 * for doors that hand that content out (`run.result()`).
 */
export function assertNotErased(record: object): void {
  const erased = ERASED.get(record);
  if (erased) throw erased;
}

const tolerating = new AsyncLocalStorage<true>();

/**
 * Runs `fn` so that it can end a turn whose tenant was erased: its reads give erased content
 * as placeholders (as lenient reads do), and its writes of content for a tenant without a key
 * store content that reads as erased instead of being refused. For the paths that end a turn
 * (fail, cancel), which must not fail because the turn's content is gone.
 */
export function toleratingErasure<T>(fn: () => Promise<T>): Promise<T> {
  return tolerating.run(true, fn);
}

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

  /** The store closed: stop listening to the provider. */
  close(): void {
    this.#sealer?.close();
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
    return row
      ? SealedColumns.#remember(this.#turnConversations, turnId, String(row['conversation_id']))
      : undefined;
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
    // A conversation names its own tenant (its row may not exist yet); metadata is replaced whole.
    if (spec === CONVERSATIONS)
      return this.#tenantOf!({
        id: String(record['id'] ?? id),
        agentName: String(record['agentName'] ?? ''),
        metadata: record['metadata'] as JsonObject,
      });
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
   * `record` with its content sealed under its tenant's key (a copy; the record itself when
   * nothing is to be sealed). `id`: the row an update changes, when the record is partial.
   */
  async seal<T extends object>(
    connection: SqlConnection,
    spec: TableSpec,
    record: T,
    id?: string,
  ): Promise<T> {
    const table = SEALED_TABLES.get(spec);
    const sealer = this.#sealer;
    if (!table || !sealer) return record;
    const present = table.values.filter((value) => {
      const at = holder(record as Record<string, unknown>, value);
      return at !== undefined && at[0][at[1]] !== undefined && at[0][at[1]] !== null;
    });
    if (present.length === 0) return record;
    const tenant = await this.#tenant(connection, spec, record as Record<string, unknown>, id);
    if (tenant === undefined) return record;
    const sealed: Record<string, unknown> = { ...(record as Record<string, unknown>) };
    const options = { erasedMark: table.markErased === true || tolerating.getStore() === true };
    for (const value of present) {
      copyPath(sealed, value);
      const [at, key] = holder(sealed, value)!;
      const text = await sealer.seal(tenant, at[key], options);
      at[key] = wrapped(spec, value) ? { [SEALED_KEY]: text } : text;
    }
    return sealed as T;
  }

  /** Each sealed value of the records, where it sits. */
  #sealedValues(spec: TableSpec, records: readonly object[]) {
    const found: { text: string; record: object; at: Record<string, unknown>; key: string }[] = [];
    const table = SEALED_TABLES.get(spec);
    if (!table) return found;
    for (const record of records as Record<string, unknown>[])
      for (const value of table.values) {
        const at = holder(record, value);
        const text = at && sealedText(at[0][at[1]], wrapped(spec, value));
        if (text) found.push({ text, record, at: at[0], key: at[1] });
      }
    return found;
  }

  /**
   * Opens the records' sealed fields in place. `strict` (every read of one conversation's
   * rows): an erased tenant's content is a ContentErasedError. `lenient` (lists that span
   * tenants, the console's): it reads as a placeholder, so other tenants' rows still show.
   */
  async open<T extends object>(
    spec: TableSpec,
    records: T[],
    mode: 'strict' | 'lenient' = 'strict',
  ): Promise<T[]> {
    const values = this.#sealedValues(spec, records);
    if (values.length === 0) return records;
    if (tolerating.getStore()) mode = 'lenient';
    const sealer = this.#sealer;
    if (!sealer)
      throw new ConfigError(
        'the store holds content sealed with tenant keys: open it with tenantKeys (or TURNKIT_TENANT_KEYS) to read it',
      );
    await sealer.prepare(values.map((value) => value.text));
    for (const { text, record, at, key } of values) {
      try {
        at[key] = sealer.open(text);
      } catch (failure) {
        if (mode === 'strict' || !(failure instanceof ContentErasedError)) throw failure;
        at[key] = ERASED_PLACEHOLDER[key] ?? null;
        ERASED.set(record, failure);
      }
    }
    return records;
  }
}
