/**
 * The relational schema (spec §2.8) and the column mapping of each table. One schema serves
 * SQLite and PostgreSQL: JSON documents are stored as text, times as ISO-8601 UTC text (which
 * sorts chronologically), so both backends run the same SQL.
 */

export interface Migration {
  version: number;
  name: string;
  statements: string[];
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'turnkit 0.6 data model',
    statements: [
      `CREATE TABLE turnkit_conversations (
        id TEXT PRIMARY KEY,
        agent_name TEXT NOT NULL,
        model TEXT,
        subject TEXT,
        metadata TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL)`,
      `CREATE TABLE turnkit_messages (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES turnkit_conversations(id),
        turn_id TEXT,
        role TEXT NOT NULL,
        kind TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        content TEXT NOT NULL,
        tool_execution_id TEXT,
        provider_message_id TEXT,
        metadata TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (conversation_id, sequence))`,
      `CREATE INDEX turnkit_messages_conversation_turn ON turnkit_messages (conversation_id, turn_id)`,
      `CREATE INDEX turnkit_messages_turn ON turnkit_messages (turn_id)`,
      `CREATE INDEX turnkit_messages_tool_execution ON turnkit_messages (tool_execution_id)`,
      `CREATE TABLE turnkit_turns (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES turnkit_conversations(id),
        agent_name TEXT NOT NULL,
        parent_turn_id TEXT,
        parent_tool_execution_id TEXT,
        root_turn_id TEXT NOT NULL,
        context_message_sequence INTEGER NOT NULL,
        status TEXT NOT NULL,
        model TEXT,
        options TEXT NOT NULL,
        usage TEXT,
        cost DOUBLE PRECISION NOT NULL DEFAULT 0,
        error TEXT,
        output_text TEXT,
        output_data TEXT,
        submitted_at TEXT,
        claim_token TEXT,
        started_at TEXT,
        heartbeat_at TEXT,
        completed_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL)`,
      `CREATE INDEX turnkit_turns_conversation ON turnkit_turns (conversation_id)`,
      `CREATE INDEX turnkit_turns_root ON turnkit_turns (root_turn_id)`,
      `CREATE INDEX turnkit_turns_parent_execution ON turnkit_turns (parent_tool_execution_id)`,
      `CREATE INDEX turnkit_turns_heartbeat ON turnkit_turns (status, heartbeat_at)`,
      `CREATE INDEX turnkit_turns_maintenance ON turnkit_turns (status, submitted_at, updated_at)`,
      `CREATE TABLE turnkit_tool_executions (
        id TEXT PRIMARY KEY,
        turn_id TEXT NOT NULL REFERENCES turnkit_turns(id),
        tool_call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        arguments TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        error TEXT,
        started_at TEXT,
        completed_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (turn_id, tool_call_id))`,
      `CREATE INDEX turnkit_tool_executions_status ON turnkit_tool_executions (turn_id, status)`,
      `CREATE TABLE turnkit_deliveries (
        id TEXT PRIMARY KEY,
        source_conversation_id TEXT,
        destination_conversation_id TEXT NOT NULL,
        source_turn_id TEXT,
        key TEXT NOT NULL UNIQUE,
        payload TEXT NOT NULL,
        message_id TEXT,
        delivered_at TEXT,
        created_at TEXT NOT NULL)`,
      `CREATE INDEX turnkit_deliveries_source ON turnkit_deliveries (source_conversation_id, created_at)`,
      `CREATE INDEX turnkit_deliveries_destination ON turnkit_deliveries (destination_conversation_id, delivered_at)`,
      `CREATE INDEX turnkit_deliveries_pending ON turnkit_deliveries (delivered_at, created_at)`,
      `CREATE TABLE turnkit_waits (
        turn_id TEXT NOT NULL,
        target_turn_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (turn_id, target_turn_id))`,
      `CREATE INDEX turnkit_waits_target ON turnkit_waits (target_turn_id)`,
      `CREATE TABLE turnkit_events (
        turn_id TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        conversation_id TEXT NOT NULL,
        type TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (turn_id, sequence))`,
    ],
  },
];

export interface TableSpec {
  table: string;
  /** camelCase field → snake_case column. */
  columns: Record<string, string>;
  json: ReadonlySet<string>;
}

function spec(table: string, fields: string[], json: string[]): TableSpec {
  const snake = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  return { table, columns: Object.fromEntries(fields.map((f) => [f, snake(f)])), json: new Set(json) };
}

export const CONVERSATIONS = spec(
  'turnkit_conversations',
  ['id', 'agentName', 'model', 'subject', 'metadata', 'createdAt', 'updatedAt'],
  ['subject', 'metadata'],
);
export const MESSAGES = spec(
  'turnkit_messages',
  [
    'id',
    'conversationId',
    'turnId',
    'role',
    'kind',
    'sequence',
    'content',
    'toolExecutionId',
    'providerMessageId',
    'metadata',
    'createdAt',
  ],
  ['content', 'metadata'],
);
export const TURNS = spec(
  'turnkit_turns',
  [
    'id',
    'conversationId',
    'agentName',
    'parentTurnId',
    'parentToolExecutionId',
    'rootTurnId',
    'contextMessageSequence',
    'status',
    'model',
    'options',
    'usage',
    'cost',
    'error',
    'outputText',
    'outputData',
    'submittedAt',
    'claimToken',
    'startedAt',
    'heartbeatAt',
    'completedAt',
    'createdAt',
    'updatedAt',
  ],
  ['options', 'usage', 'error', 'outputData'],
);
export const TOOL_EXECUTIONS = spec(
  'turnkit_tool_executions',
  [
    'id',
    'turnId',
    'toolCallId',
    'toolName',
    'arguments',
    'status',
    'result',
    'error',
    'startedAt',
    'completedAt',
    'createdAt',
    'updatedAt',
  ],
  ['arguments', 'result', 'error'],
);
export const DELIVERIES = spec(
  'turnkit_deliveries',
  [
    'id',
    'sourceConversationId',
    'destinationConversationId',
    'sourceTurnId',
    'key',
    'payload',
    'messageId',
    'deliveredAt',
    'createdAt',
  ],
  ['payload'],
);
export const WAITS = spec('turnkit_waits', ['turnId', 'targetTurnId', 'createdAt'], []);
export const EVENTS = spec(
  'turnkit_events',
  ['turnId', 'sequence', 'conversationId', 'type', 'payload', 'createdAt'],
  ['payload'],
);
