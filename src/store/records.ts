/**
 * Rules every backend shares: defaults for new rows, validation of updates and statuses,
 * canonical JSON for delivery payloads. Backends only persist; they decide nothing here.
 */
import { ArgumentError, ToolError } from '../errors.js';
import { newId } from '../ids.js';
import type {
  ContentPart,
  ConversationRecord,
  ConversationUpdate,
  DeliveryRecord,
  DeliveryUpdate,
  JsonObject,
  MessageRecord,
  NewConversation,
  NewDelivery,
  NewMessage,
  NewToolExecution,
  NewTurn,
  ToolExecutionRecord,
  ToolExecutionStatus,
  ToolExecutionUpdate,
  TurnRecord,
  TurnStatus,
  TurnUpdate,
} from './types.js';
import {
  CONVERSATION_UPDATE_KEYS,
  DELIVERY_UPDATE_KEYS,
  MESSAGE_KINDS,
  MESSAGE_ROLES,
  TOOL_EXECUTION_STATUSES,
  TOOL_EXECUTION_UPDATE_KEYS,
  BUSY_TURN_STATUSES,
  TURN_STATUSES,
  TURN_UPDATE_KEYS,
} from './types.js';

export function nowIso(): string {
  return new Date().toISOString();
}

/** A deep copy through JSON: what a store hands out can never alias what it keeps. */
export function jsonCopy<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/** JSON with object keys sorted at every level, so equal payloads compare equal as text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value as object)
        .sort()
        .map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]),
    );
  }
  return value;
}

function assertTurnStatus(status: unknown): asserts status is TurnStatus {
  if (!TURN_STATUSES.includes(status as TurnStatus)) {
    throw new ArgumentError(
      `unknown turn status: ${JSON.stringify(status)} (expected one of ${TURN_STATUSES.join(', ')})`,
    );
  }
}

export function assertToolExecutionStatus(status: unknown): asserts status is ToolExecutionStatus {
  if (!TOOL_EXECUTION_STATUSES.includes(status as ToolExecutionStatus)) {
    throw new ArgumentError(
      `unknown tool execution status: ${JSON.stringify(status)} (expected one of ${TOOL_EXECUTION_STATUSES.join(', ')})`,
    );
  }
}

function assertKnownKeys(what: string, attrs: object, allowed: readonly string[]): void {
  const unknown = Object.keys(attrs).filter((key) => !allowed.includes(key));
  if (unknown.length > 0) {
    throw new ArgumentError(
      `unknown ${what} update attributes: ${unknown.join(', ')} (allowed: ${allowed.join(', ')})`,
    );
  }
}

export function validateTurnUpdate(attrs: TurnUpdate): TurnUpdate {
  assertKnownKeys('turn', attrs, TURN_UPDATE_KEYS);
  if (attrs.status !== undefined) assertTurnStatus(attrs.status);
  return attrs;
}

export function validateToolExecutionUpdate(attrs: ToolExecutionUpdate): ToolExecutionUpdate {
  assertKnownKeys('tool execution', attrs, TOOL_EXECUTION_UPDATE_KEYS);
  return attrs;
}

export function validateConversationUpdate(attrs: ConversationUpdate): ConversationUpdate {
  assertKnownKeys('conversation', attrs, CONVERSATION_UPDATE_KEYS);
  return attrs;
}

export function validateDeliveryUpdate(attrs: DeliveryUpdate): DeliveryUpdate {
  assertKnownKeys('delivery', attrs, DELIVERY_UPDATE_KEYS);
  return attrs;
}

/** Splits claim options into the CAS condition and the attributes to write. */
export function splitClaim<S extends string, A extends object>(
  options: (A & { from?: S | readonly S[]; to?: S }) | undefined,
  defaults: { from: S; to: S },
): { from: readonly S[]; to: S; attrs: A } {
  const { from, to, ...attrs } = options ?? ({} as A & { from?: S; to?: S });
  return {
    from:
      from === undefined ? [defaults.from] : typeof from === 'string' ? [from as S] : (from as readonly S[]),
    to: (to ?? defaults.to) as S,
    attrs: attrs as A,
  };
}

export function buildConversation(attrs: NewConversation): ConversationRecord {
  if (!attrs.agentName) throw new ArgumentError('a conversation needs an agentName');
  const now = nowIso();
  return {
    id: attrs.id ?? newId('conv'),
    agentName: attrs.agentName,
    model: attrs.model ?? null,
    subject: attrs.subject ? jsonCopy(attrs.subject) : null,
    metadata: jsonCopy(attrs.metadata ?? {}),
    forkedFromConversationId: attrs.forkedFromConversationId ?? null,
    forkedFromMessageId: attrs.forkedFromMessageId ?? null,
    createdAt: now,
    updatedAt: now,
  };
}

/** Metadata keys a fork's copy of a message drops: it was not delivered to the fork. */
const NOT_FORKED_METADATA = ['delivery_id'];

/**
 * A message as a fork carries it (decision 47): same sequence, role, kind, content, tool
 * execution and time; a new id; no turn (the turns stay the origin's); `delivery_id` dropped,
 * so the fork's lane never takes it for a delivery to answer; and where it came from.
 */
export function forkedMessage(source: MessageRecord, conversationId: string): MessageRecord {
  const metadata: JsonObject = Object.fromEntries(
    Object.entries(jsonCopy(source.metadata)).filter(([key]) => !NOT_FORKED_METADATA.includes(key)),
  );
  metadata['forked_from_message_id'] = source.id;
  if (source.turnId !== null) metadata['forked_from_turn_id'] = source.turnId;
  return {
    ...jsonCopy(source),
    id: newId('msg'),
    conversationId,
    turnId: null,
    metadata,
  };
}

/** Builds a message row without its sequence (the backend allocates it under the lock). */
export function buildMessage(attrs: NewMessage): Omit<MessageRecord, 'sequence'> {
  if (!MESSAGE_ROLES.includes(attrs.role)) {
    throw new ArgumentError(
      `unknown message role: ${JSON.stringify(attrs.role)} (expected ${MESSAGE_ROLES.join(', ')})`,
    );
  }
  const kind = attrs.kind ?? 'text';
  if (!MESSAGE_KINDS.includes(kind)) {
    throw new ArgumentError(
      `unknown message kind: ${JSON.stringify(kind)} (expected ${MESSAGE_KINDS.join(', ')})`,
    );
  }
  const content: ContentPart[] =
    typeof attrs.content === 'string' ? [{ type: 'text', text: attrs.content }] : attrs.content;
  if (!Array.isArray(content))
    throw new ArgumentError('message content must be a string or an array of parts');
  return {
    id: attrs.id ?? newId('msg'),
    conversationId: attrs.conversationId,
    turnId: attrs.turnId ?? null,
    role: attrs.role,
    kind,
    content: jsonCopy(content),
    toolExecutionId: attrs.toolExecutionId ?? null,
    providerMessageId: attrs.providerMessageId ?? null,
    metadata: jsonCopy(attrs.metadata ?? {}),
    createdAt: nowIso(),
  };
}

export function buildTurn(attrs: NewTurn): TurnRecord {
  if (!attrs.agentName) throw new ArgumentError('a turn needs an agentName');
  const status = attrs.status ?? 'pending';
  assertTurnStatus(status);
  const id = attrs.id ?? newId('turn');
  const now = nowIso();
  return {
    id,
    conversationId: attrs.conversationId,
    agentName: attrs.agentName,
    parentTurnId: attrs.parentTurnId ?? null,
    parentToolExecutionId: attrs.parentToolExecutionId ?? null,
    rootTurnId: attrs.rootTurnId ?? id,
    contextMessageSequence: attrs.contextMessageSequence ?? 0,
    status,
    model: attrs.model ?? null,
    options: jsonCopy(attrs.options ?? {}),
    usage: null,
    cost: 0,
    error: null,
    outputText: null,
    outputData: null,
    submittedAt: attrs.submittedAt ?? null,
    claimToken: null,
    startedAt: null,
    heartbeatAt: null,
    completedAt: null,
    createdAt: now,
    updatedAt: now,
  };
}

export function buildToolExecution(attrs: NewToolExecution): ToolExecutionRecord {
  const status = attrs.status ?? 'pending';
  assertToolExecutionStatus(status);
  if (!attrs.toolCallId) throw new ArgumentError('a tool execution needs a toolCallId');
  const now = nowIso();
  return {
    id: attrs.id ?? newId('tool'),
    turnId: attrs.turnId,
    toolCallId: attrs.toolCallId,
    toolName: attrs.toolName,
    arguments: jsonCopy(attrs.arguments ?? {}),
    status,
    result: null,
    error: null,
    startedAt: attrs.startedAt ?? null,
    completedAt: null,
    createdAt: now,
    updatedAt: now,
  };
}

export function buildDelivery(attrs: NewDelivery): DeliveryRecord {
  if (!attrs.key) throw new ArgumentError('a delivery needs a key');
  return {
    id: attrs.id ?? newId('delivery'),
    sourceConversationId: attrs.sourceConversationId ?? null,
    destinationConversationId: attrs.destinationConversationId,
    sourceTurnId: attrs.sourceTurnId ?? null,
    key: attrs.key,
    payload: JSON.parse(canonicalJson(attrs.payload)) as JsonObject,
    messageId: null,
    deliveredAt: null,
    createdAt: nowIso(),
  };
}

/**
 * An exact retry of a delivery returns the original; anything else under the same key is
 * refused without revealing what the original said (BG-40).
 */
export function matchExistingDelivery(existing: DeliveryRecord, attrs: NewDelivery): DeliveryRecord {
  const same =
    existing.sourceConversationId === (attrs.sourceConversationId ?? null) &&
    existing.destinationConversationId === attrs.destinationConversationId &&
    existing.sourceTurnId === (attrs.sourceTurnId ?? null) &&
    canonicalJson(existing.payload) === canonicalJson(attrs.payload);
  if (!same) throw new ToolError('delivery key is already used for a different message');
  return existing;
}

/** Whether a turn occupies its conversation's lane (spec §8 busy_conversation?). */
export function occupiesLane(turn: TurnRecord, includePending: boolean): boolean {
  return (
    BUSY_TURN_STATUSES.includes(turn.status) ||
    (includePending && turn.status === 'pending' && turn.submittedAt !== null)
  );
}

/** The highest snapshot among turns that have consumed input (not unsubmitted-pending). */
export function consumedThrough(turns: readonly TurnRecord[]): number {
  return turns
    .filter((turn) => !(turn.status === 'pending' && turn.submittedAt === null))
    .reduce((max, turn) => Math.max(max, turn.contextMessageSequence), 0);
}

export function isDeliveredMessage(message: MessageRecord): boolean {
  return typeof message.metadata['delivery_id'] === 'string';
}
