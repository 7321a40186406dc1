/**
 * The web console's reads (decision 63): every one takes a page and is answered by an index,
 * so its cost follows the page, not the store. The SQL stores answer them in SQL
 * (sql/console-queries.ts); `consoleReadsOf` gives any other `Store` a plain implementation
 * over the store contract, for stores that do not offer their own.
 */
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

/** The store's own console reads, or the plain ones over the store contract. */
export function consoleReadsOf(store: Store): ConsoleReads {
  const own = (store as Partial<ConsoleReadable>).consoleReads;
  return typeof own === 'function' ? own.call(store) : new ContractConsoleReads(store);
}

const afterKey = (row: ConsoleKey, after: ConsoleKey | undefined, order: 'asc' | 'desc') => {
  if (!after) return true;
  const cmp = row.createdAt.localeCompare(after.createdAt) || row.id.localeCompare(after.id);
  return order === 'asc' ? cmp > 0 : cmp < 0;
};
const byKey = (a: ConsoleKey, b: ConsoleKey) =>
  a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id);

function principalMatches(principal: unknown, needle: string): boolean {
  if (principal === needle) return true;
  return (
    typeof principal === 'object' &&
    principal !== null &&
    !Array.isArray(principal) &&
    Object.values(principal).some((value) => value === needle)
  );
}

/**
 * The console's reads over the store contract alone: they load what the contract can select
 * and page in memory. For stores without their own (the memory store of unit tests).
 */
class ContractConsoleReads implements ConsoleReads {
  constructor(private readonly store: Store) {}

  async turns(query: ConsoleTurnQuery): Promise<TurnRecord[]> {
    const order = query.order ?? 'desc';
    const rows = await this.store.listTurns({
      ...(query.agent ? { agentName: query.agent } : {}),
      ...(query.status ? { status: query.status } : {}),
      ...(query.conversation ? { conversationId: query.conversation } : {}),
    });
    const selected = rows.filter(
      (turn) =>
        (!query.roots || turn.parentTurnId === null) &&
        (!query.since || turn.createdAt >= query.since) &&
        (!query.until || turn.createdAt < query.until) &&
        (!query.principal || principalMatches(turn.options['principal'], query.principal)) &&
        afterKey(turn, query.after, order),
    );
    selected.sort((a, b) => (order === 'asc' ? byKey(a, b) : byKey(b, a)));
    return selected.slice(0, query.limit);
  }

  async conversations(query: ConsoleConversationQuery): Promise<ConsoleConversationRow[]> {
    const all = await this.store.listTurns({});
    const byConversation = new Map<string, TurnRecord[]>();
    for (const turn of all)
      byConversation.set(turn.conversationId, [...(byConversation.get(turn.conversationId) ?? []), turn]);
    const rows: ConsoleConversationRow[] = [];
    for (const [id, turns] of byConversation) {
      const conversation = await this.store.loadConversation(id);
      const key = { createdAt: conversation.createdAt, id };
      if (query.agent && conversation.agentName !== query.agent) continue;
      if (query.since && key.createdAt < query.since) continue;
      if (query.until && key.createdAt >= query.until) continue;
      if (query.roots && !turns.some((t) => t.parentTurnId === null)) continue;
      if (query.principal && !turns.some((t) => principalMatches(t.options['principal'], query.principal!)))
        continue;
      if (!afterKey(key, query.after, 'desc')) continue;
      rows.push({
        id,
        agentName: conversation.agentName,
        createdAt: conversation.createdAt,
        turns: turns.length,
        cost: turns.reduce((sum, t) => sum + t.cost, 0),
        tokens: turns.reduce((sum, t) => sum + (t.usage?.total_tokens ?? 0), 0),
        lastTurn: turns.reduce((last, t) => (byKey(t, last) > 0 ? t : last)),
      });
    }
    return rows.sort((a, b) => byKey(b, a)).slice(0, query.limit);
  }

  async awaitingApprovals(query: { after?: ConsoleKey; limit: number }): Promise<ConsoleAwaitingCall[]> {
    const turns = await this.store.listTurns({ status: UNFINISHED_FOR_APPROVAL });
    const calls: ConsoleAwaitingCall[] = [];
    for (const turn of turns)
      for (const execution of await this.store.listToolExecutions({ turnId: turn.id }))
        if (execution.status === 'awaiting_approval' && afterKey(execution, query.after, 'asc'))
          calls.push({ execution, turn });
    return calls.sort((a, b) => byKey(a.execution, b.execution)).slice(0, query.limit);
  }

  async transcript(
    turn: TurnRecord,
    query: { afterSequence: number; limit: number },
  ): Promise<MessageRecord[]> {
    const messages = await this.store.listMessages(turn.conversationId, {
      throughSequence: turn.contextMessageSequence,
      turnId: turn.id,
      afterSequence: query.afterSequence,
    });
    return messages.slice(0, query.limit);
  }

  async toolExecutions(
    turnId: string,
    query: { after?: ConsoleKey; limit: number },
  ): Promise<ToolExecutionRecord[]> {
    const rows = await this.store.listToolExecutions({ turnId });
    return rows.filter((row) => afterKey(row, query.after, 'asc')).slice(0, query.limit);
  }

  async waitReasons(turnIds: readonly string[]): Promise<Map<string, ConsoleWaitReason>> {
    const reasons = new Map<string, ConsoleWaitReason>();
    for (const turnId of turnIds) {
      if ((await this.store.listWaits({ turnId })).length > 0) reasons.set(turnId, 'sub-agents');
      const executions = await this.store.listToolExecutions({ turnId });
      if (executions.some((e) => e.status === 'awaiting_approval')) reasons.set(turnId, 'approval');
    }
    return reasons;
  }
}
