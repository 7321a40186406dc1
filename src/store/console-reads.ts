/**
 * The web console's reads (decision 63): every one takes a page and is answered by an index,
 * so its cost follows the page, not the store. The SQL stores answer them in SQL
 * (sql/console-queries.ts). Every store TurnKit opens is one (the memory store is SQLite in
 * memory, decision 60), so there is no fallback that loads a whole table to page it in memory
 * (decision 77): a store without its own reads is refused with a ConfigError.
 */
import { ConfigError } from '../errors.js';
import type { MessageRecord, Store, ToolExecutionRecord, TurnRecord, TurnStatus } from './types.js';

/** A keyset position: the last row of the previous page. */
export interface ConsoleKey {
  createdAt: string;
  id: string;
}

/** The turn list's filters, all applied by the store before its limit. */
export interface ConsoleTurnQuery {
  agent?: string;
  status?: TurnStatus;
  /** A principal that is this string, or an object with a top-level string field equal to it. */
  principal?: string;
  conversation?: string;
  /** Created at or after `since`, before `until` (ISO times). */
  since?: string;
  until?: string;
  /** Only turns no other turn started. */
  roots?: boolean;
  /** Newest first (default) or oldest first. */
  order?: 'desc' | 'asc';
  /** Rows after this one, in the query's order. */
  after?: ConsoleKey;
  limit: number;
}

/** The conversation list's filters (over the conversation, or any of its turns). */
export interface ConsoleConversationQuery {
  agent?: string;
  principal?: string;
  since?: string;
  until?: string;
  /** Only conversations with a turn no other turn started. */
  roots?: boolean;
  after?: ConsoleKey;
  limit: number;
}

/** One conversation with its turns aggregated over all of them. */
export interface ConsoleConversationRow {
  id: string;
  agentName: string;
  createdAt: string;
  turns: number;
  cost: number;
  tokens: number;
  /** Its newest turn. */
  lastTurn: TurnRecord;
}

/** A call awaiting a person's decision, with the turn it belongs to. */
export interface ConsoleAwaitingCall {
  execution: ToolExecutionRecord;
  turn: TurnRecord;
}

export interface ConsoleReads {
  /** Turns by the query, in `createdAt, id` order (descending by default). */
  turns(query: ConsoleTurnQuery): Promise<TurnRecord[]>;
  /** Conversations newest first (by creation), each aggregated over all its turns. */
  conversations(query: ConsoleConversationQuery): Promise<ConsoleConversationRow[]>;
  /** Calls awaiting approval in unfinished turns, oldest first. */
  awaitingApprovals(query: { after?: ConsoleKey; limit: number }): Promise<ConsoleAwaitingCall[]>;
  /** A turn's view of its conversation (its snapshot, then its own messages) after a sequence. */
  transcript(turn: TurnRecord, query: { afterSequence: number; limit: number }): Promise<MessageRecord[]>;
  /** A turn's tool executions, oldest first. */
  toolExecutions(
    turnId: string,
    query: { after?: ConsoleKey; limit: number },
  ): Promise<ToolExecutionRecord[]>;
  /** What each of these (a page's) turns waits for: a person's approval, or sub-agents. */
  waitReasons(turnIds: readonly string[]): Promise<Map<string, ConsoleWaitReason>>;
}

export type ConsoleWaitReason = 'approval' | 'sub-agents';

/** A store that answers the console's reads itself (the SQL stores). */
export interface ConsoleReadable {
  consoleReads(): ConsoleReads;
}

export const UNFINISHED_FOR_APPROVAL: readonly TurnStatus[] = ['running', 'waiting', 'paused', 'pending'];

/**
 * The store's own console reads. A `Store` that has none (written outside TurnKit) is a
 * ConfigError: the console would have to load every turn to page them.
 */
export function consoleReadsOf(store: Store): ConsoleReads {
  const own = (store as Partial<ConsoleReadable>).consoleReads;
  if (typeof own !== 'function')
    throw new ConfigError(
      'the web console needs a store that answers its paged reads (SQLite, PostgreSQL or memory:, as openStore opens them); this store has no consoleReads()',
    );
  return own.call(store);
}
