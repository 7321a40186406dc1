/**
 * The relational schema (spec §2.8) and the column mapping of every table, shared by the
 * SQLite and PostgreSQL backends. Tables keep TurnKit's names with a `turnkit_` prefix and
 * snake_case columns. Column types come from the dialect: JSON documents are TEXT in SQLite
 * and jsonb in PostgreSQL, times ISO-8601 TEXT (which sorts chronologically) in SQLite and
 * timestamptz in PostgreSQL, cost REAL in SQLite and numeric(14,6) in PostgreSQL.
 */

import { budgetLedgerStatements } from './budget-ledger.js';

/** How a column is encoded on the way in and decoded on the way out. */
export type ColumnKind = 'text' | 'int' | 'bigint' | 'json' | 'time' | 'cost';

/** The column types of one SQL dialect. */
export interface DialectTypes {
  text: string;
  int: string;
  /** A 64-bit integer (stream sequences). */
  bigint: string;
  json: string;
  time: string;
  cost: string;
  /** An auto-incrementing integer primary key. */
  serial: string;
}

export interface Migration {
  version: number;
  name: string;
  statements(types: DialectTypes, dialect: 'sqlite' | 'postgres'): string[];
}

/**
 * The lane's statuses (`LANE_TURN_STATUSES`) as the partial index `turnkit_turns_lane` states
 * them. A query uses that index only when its WHERE clause contains this very term (SQLite
 * proves a partial index usable by matching terms), so lane queries add it verbatim.
 */
export const LANE_INDEX_PREDICATE = `status IN ('pending', 'waiting', 'running', 'paused')`;

/** Migration 1's conversations and their messages. */
const conversationTables = (t: DialectTypes): string[] => [
  `CREATE TABLE turnkit_conversations (
        id ${t.text} PRIMARY KEY,
        agent_name ${t.text} NOT NULL,
        model ${t.text},
        subject ${t.json},
        metadata ${t.json} NOT NULL,
        created_at ${t.time} NOT NULL,
        updated_at ${t.time} NOT NULL)`,
  `CREATE TABLE turnkit_messages (
        id ${t.text} PRIMARY KEY,
        conversation_id ${t.text} NOT NULL REFERENCES turnkit_conversations (id),
        turn_id ${t.text},
        role ${t.text} NOT NULL,
        kind ${t.text} NOT NULL,
        sequence ${t.int} NOT NULL CHECK (sequence > 0),
        content ${t.json} NOT NULL,
        tool_execution_id ${t.text},
        provider_message_id ${t.text},
        metadata ${t.json} NOT NULL,
        created_at ${t.time} NOT NULL)`,
  `CREATE UNIQUE INDEX turnkit_messages_conversation_sequence ON turnkit_messages (conversation_id, sequence)`,
  `CREATE INDEX turnkit_messages_conversation_turn ON turnkit_messages (conversation_id, turn_id)`,
  `CREATE INDEX turnkit_messages_turn ON turnkit_messages (turn_id)`,
  `CREATE INDEX turnkit_messages_tool_execution ON turnkit_messages (tool_execution_id)`,
];

/** Migration 1's turns and their tool executions. */
const turnTables = (t: DialectTypes): string[] => [
  `CREATE TABLE turnkit_turns (
        id ${t.text} PRIMARY KEY,
        conversation_id ${t.text} NOT NULL REFERENCES turnkit_conversations (id),
        agent_name ${t.text} NOT NULL,
        parent_turn_id ${t.text},
        parent_tool_execution_id ${t.text},
        root_turn_id ${t.text} NOT NULL,
        context_message_sequence ${t.int} NOT NULL DEFAULT 0,
        status ${t.text} NOT NULL,
        model ${t.text},
        options ${t.json} NOT NULL,
        usage ${t.json},
        cost ${t.cost} NOT NULL DEFAULT 0,
        error ${t.json},
        output_text ${t.text},
        output_data ${t.json},
        submitted_at ${t.time},
        claim_token ${t.text},
        started_at ${t.time},
        heartbeat_at ${t.time},
        completed_at ${t.time},
        created_at ${t.time} NOT NULL,
        updated_at ${t.time} NOT NULL)`,
  `CREATE INDEX turnkit_turns_conversation ON turnkit_turns (conversation_id)`,
  `CREATE INDEX turnkit_turns_root ON turnkit_turns (root_turn_id)`,
  `CREATE INDEX turnkit_turns_parent ON turnkit_turns (parent_turn_id)`,
  `CREATE INDEX turnkit_turns_parent_tool_execution ON turnkit_turns (parent_tool_execution_id)`,
  `CREATE INDEX turnkit_turns_heartbeat ON turnkit_turns (status, heartbeat_at)`,
  `CREATE INDEX turnkit_turns_maintenance ON turnkit_turns (status, submitted_at, updated_at)`,
  `CREATE TABLE turnkit_tool_executions (
        id ${t.text} PRIMARY KEY,
        turn_id ${t.text} NOT NULL REFERENCES turnkit_turns (id),
        tool_call_id ${t.text} NOT NULL,
        tool_name ${t.text} NOT NULL,
        arguments ${t.json} NOT NULL,
        status ${t.text} NOT NULL,
        result ${t.json},
        error ${t.json},
        started_at ${t.time},
        completed_at ${t.time},
        created_at ${t.time} NOT NULL,
        updated_at ${t.time} NOT NULL)`,
  `CREATE UNIQUE INDEX turnkit_tool_executions_call ON turnkit_tool_executions (turn_id, tool_call_id)`,
  `CREATE INDEX turnkit_tool_executions_status ON turnkit_tool_executions (turn_id, status)`,
];

/** Migration 1's deliveries, waits and events. */
const deliveryTables = (t: DialectTypes): string[] => [
  `CREATE TABLE turnkit_deliveries (
        id ${t.text} PRIMARY KEY,
        source_conversation_id ${t.text},
        destination_conversation_id ${t.text} NOT NULL,
        source_turn_id ${t.text},
        key ${t.text} NOT NULL,
        payload ${t.json} NOT NULL,
        message_id ${t.text},
        delivered_at ${t.time},
        created_at ${t.time} NOT NULL)`,
  `CREATE UNIQUE INDEX turnkit_deliveries_key ON turnkit_deliveries (key)`,
  `CREATE INDEX turnkit_deliveries_source ON turnkit_deliveries (source_conversation_id, created_at)`,
  `CREATE INDEX turnkit_deliveries_destination ON turnkit_deliveries (destination_conversation_id, delivered_at)`,
  `CREATE INDEX turnkit_deliveries_pending ON turnkit_deliveries (delivered_at, created_at)`,
  `CREATE TABLE turnkit_waits (
        turn_id ${t.text} NOT NULL,
        target_turn_id ${t.text} NOT NULL,
        created_at ${t.time} NOT NULL)`,
  `CREATE UNIQUE INDEX turnkit_waits_edge ON turnkit_waits (turn_id, target_turn_id)`,
  `CREATE INDEX turnkit_waits_target ON turnkit_waits (target_turn_id)`,
  `CREATE TABLE turnkit_events (
        turn_id ${t.text} NOT NULL,
        sequence ${t.int} NOT NULL CHECK (sequence > 0),
        type ${t.text} NOT NULL,
        conversation_id ${t.text} NOT NULL,
        payload ${t.json} NOT NULL,
        created_at ${t.time} NOT NULL,
        PRIMARY KEY (turn_id, sequence))`,
];

/**
 * Versioned migrations, applied in order on open inside one transaction that holds the
 * migration lock (see migrate.ts). Never edit a released migration: add a new version.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'turnkit 0.6 data model',
    statements: (t) => [...conversationTables(t), ...turnTables(t), ...deliveryTables(t)],
  },
  {
    version: 2,
    name: 'live stream parts',
    statements: (t) => [
      `CREATE TABLE turnkit_stream_parts (
        sequence ${t.serial},
        root_turn_id ${t.text} NOT NULL,
        turn_id ${t.text} NOT NULL,
        step ${t.text},
        attempt ${t.bigint},
        type ${t.text} NOT NULL,
        payload ${t.json} NOT NULL,
        created_at ${t.time} NOT NULL)`,
      `CREATE INDEX turnkit_stream_parts_root ON turnkit_stream_parts (root_turn_id, sequence)`,
      `CREATE INDEX turnkit_stream_parts_step ON turnkit_stream_parts (turn_id, step, type)`,
    ],
  },
  {
    version: 3,
    name: 'indexed reads for long conversations',
    // A turn reads its conversation from the latest summary on (summaries by kind, then a
    // sequence range), and the delivery check finds the newest consumed snapshot by index.
    statements: () => [
      `CREATE INDEX turnkit_messages_conversation_kind ON turnkit_messages (conversation_id, kind, sequence)`,
      `CREATE INDEX turnkit_turns_conversation_context ON turnkit_turns (conversation_id, context_message_sequence)`,
    ],
  },
  {
    version: 4,
    name: 'conversation forks',
    // A fork's origin (decision 47): nullable, so TurnKit's readers and writers are unaffected.
    statements: (t) => [
      `ALTER TABLE turnkit_conversations ADD COLUMN forked_from_conversation_id ${t.text}`,
      `ALTER TABLE turnkit_conversations ADD COLUMN forked_from_message_id ${t.text}`,
      `CREATE INDEX turnkit_conversations_forked_from ON turnkit_conversations (forked_from_conversation_id, created_at)`,
    ],
  },
  {
    version: 5,
    name: 'costs that do not grow with the store',
    // A conversation's open turns by a partial index (the lane, the claim, posts, notices), the
    // orders and filters of listings, and the budget ledger (decision 59), backfilled.
    statements: (t, dialect) => [
      `CREATE INDEX turnkit_turns_lane ON turnkit_turns (conversation_id, status, created_at, id) WHERE ${LANE_INDEX_PREDICATE}`,
      `CREATE INDEX turnkit_turns_created ON turnkit_turns (created_at, id)`,
      `CREATE INDEX turnkit_turns_agent ON turnkit_turns (agent_name, status, created_at, id)`,
      `CREATE INDEX turnkit_turns_status ON turnkit_turns (status, created_at, id)`,
      // A turn's messages in order from the index alone, which the planner takes with or
      // without statistics (finding 13: it scanned the conversation instead).
      `DROP INDEX turnkit_messages_conversation_turn`,
      `CREATE INDEX turnkit_messages_conversation_turn ON turnkit_messages (conversation_id, turn_id, sequence)`,
      ...budgetLedgerStatements(t, dialect),
    ],
  },
  {
    version: 6,
    name: 'console pages',
    // The web console's keyset pages (decision 63, console-queries.ts): calls awaiting
    // approval by status, conversations newest first, a conversation's newest turn.
    statements: () => [
      `CREATE INDEX turnkit_tool_executions_status_created ON turnkit_tool_executions (status, created_at, id)`,
      `CREATE INDEX turnkit_conversations_created ON turnkit_conversations (created_at, id)`,
      `CREATE INDEX turnkit_conversations_agent_created ON turnkit_conversations (agent_name, created_at, id)`,
      `CREATE INDEX turnkit_turns_conversation_created ON turnkit_turns (conversation_id, created_at, id)`,
    ],
  },
  {
    version: 7,
    name: 'retention walks',
    // Retention (decision 64) walks events and conversations oldest first, a page at a time.
    statements: () => [
      `CREATE INDEX turnkit_events_created ON turnkit_events (created_at, turn_id, sequence)`,
    ],
  },
  {
    version: 8,
    name: 'schedule spend reservations',
    // A schedule's per-day cap is reserved by each firing with its turn (decision 58).
    statements: (t) => [
      `CREATE TABLE turnkit_schedule_spend (
        schedule_id ${t.text} NOT NULL,
        day ${t.text} NOT NULL,
        root_turn_id ${t.text} NOT NULL,
        reserved ${t.cost} NOT NULL,
        created_at ${t.time} NOT NULL,
        PRIMARY KEY (schedule_id, day, root_turn_id))`,
    ],
  },
  {
    version: 9,
    name: 'store identity',
    // One row, written on the first open after this migration (store-identity-row.ts):
    // turns carry the id, so a worker of another store refuses them (decision 67).
    statements: (t) => [
      `CREATE TABLE turnkit_store (
        id ${t.text} PRIMARY KEY,
        default_task_queue ${t.text} NOT NULL,
        created_at ${t.time} NOT NULL)`,
    ],
  },
  {
    version: 10,
    name: 'erasures',
    // One row per erasure (decision 78): its subject while it runs (cleared at the end), where
    // it stands, and what it counted. The erasure workflow's input is this row's id alone.
    statements: (t) => [
      `CREATE TABLE turnkit_erasures (
        id ${t.text} PRIMARY KEY,
        subject ${t.json},
        state ${t.json} NOT NULL,
        report ${t.json} NOT NULL,
        created_at ${t.time} NOT NULL,
        updated_at ${t.time} NOT NULL,
        completed_at ${t.time})`,
    ],
  },
  {
    version: 11,
    name: "a turn's executions by tool and in order",
    // A turn's executions of one tool (the skills a model step offers, a replayed tool's
    // earlier calls) by an index, not a walk of all the turn's executions: a long turn's
    // per-step reads stay the same size as it runs; and a turn's executions in order, a
    // console page at a time (decision 76).
    statements: () => [
      `CREATE INDEX turnkit_tool_executions_turn_tool ON turnkit_tool_executions (turn_id, tool_name, created_at, id)`,
      `CREATE INDEX turnkit_tool_executions_turn_created ON turnkit_tool_executions (turn_id, created_at, id)`,
    ],
  },
];

export const LATEST_SCHEMA_VERSION = MIGRATIONS.reduce((max, m) => Math.max(max, m.version), 0);

export interface Column {
  field: string;
  column: string;
  kind: ColumnKind;
}

export interface TableSpec {
  table: string;
  /** How errors name a row of this table ("turn", "tool execution", …). */
  noun: string;
  columns: readonly Column[];
  byField: ReadonlyMap<string, Column>;
}

const snake = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function spec(table: string, noun: string, fields: Record<string, ColumnKind>): TableSpec {
  const columns = Object.entries(fields).map(([field, kind]) => ({ field, column: snake(field), kind }));
  return { table, noun, columns, byField: new Map(columns.map((c) => [c.field, c])) };
}

export const CONVERSATIONS = spec('turnkit_conversations', 'conversation', {
  id: 'text',
  agentName: 'text',
  model: 'text',
  subject: 'json',
  metadata: 'json',
  forkedFromConversationId: 'text',
  forkedFromMessageId: 'text',
  createdAt: 'time',
  updatedAt: 'time',
});

export const MESSAGES = spec('turnkit_messages', 'message', {
  id: 'text',
  conversationId: 'text',
  turnId: 'text',
  role: 'text',
  kind: 'text',
  sequence: 'int',
  content: 'json',
  toolExecutionId: 'text',
  providerMessageId: 'text',
  metadata: 'json',
  createdAt: 'time',
});

export const TURNS = spec('turnkit_turns', 'turn', {
  id: 'text',
  conversationId: 'text',
  agentName: 'text',
  parentTurnId: 'text',
  parentToolExecutionId: 'text',
  rootTurnId: 'text',
  contextMessageSequence: 'int',
  status: 'text',
  model: 'text',
  options: 'json',
  usage: 'json',
  cost: 'cost',
  error: 'json',
  outputText: 'text',
  outputData: 'json',
  submittedAt: 'time',
  claimToken: 'text',
  startedAt: 'time',
  heartbeatAt: 'time',
  completedAt: 'time',
  createdAt: 'time',
  updatedAt: 'time',
});

export const TOOL_EXECUTIONS = spec('turnkit_tool_executions', 'tool execution', {
  id: 'text',
  turnId: 'text',
  toolCallId: 'text',
  toolName: 'text',
  arguments: 'json',
  status: 'text',
  result: 'json',
  error: 'json',
  startedAt: 'time',
  completedAt: 'time',
  createdAt: 'time',
  updatedAt: 'time',
});

export const DELIVERIES = spec('turnkit_deliveries', 'delivery', {
  id: 'text',
  sourceConversationId: 'text',
  destinationConversationId: 'text',
  sourceTurnId: 'text',
  key: 'text',
  payload: 'json',
  messageId: 'text',
  deliveredAt: 'time',
  createdAt: 'time',
});

export const WAITS = spec('turnkit_waits', 'wait', {
  turnId: 'text',
  targetTurnId: 'text',
  createdAt: 'time',
});

export const SCHEDULE_SPEND = spec('turnkit_schedule_spend', 'schedule spend', {
  scheduleId: 'text',
  day: 'text',
  rootTurnId: 'text',
  reserved: 'cost',
  createdAt: 'time',
});

export const STREAM_PARTS = spec('turnkit_stream_parts', 'stream part', {
  sequence: 'bigint',
  rootTurnId: 'text',
  turnId: 'text',
  step: 'text',
  attempt: 'bigint',
  type: 'text',
  payload: 'json',
  createdAt: 'time',
});

export const EVENTS = spec('turnkit_events', 'event', {
  turnId: 'text',
  sequence: 'int',
  type: 'text',
  conversationId: 'text',
  payload: 'json',
  createdAt: 'time',
});
