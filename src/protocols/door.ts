/**
 * What every protocol door (MCP, A2A, AG-UI) shares with the console: who is asking (the
 * `authenticate` hook, else loopback only), a bounded JSON body, and the one way a turn is
 * reached through a door, so that an unknown turn and another principal's look the same.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TurnKitClient } from '../client/turnkit-client.js';
import { isLoopbackAddress } from '../console/handler.js';
import { AuthorizationError, RecordNotFound, TurnKitError } from '../errors.js';
import { canonicalJson } from '../store/records.js';
import type { Json, TurnRecord } from '../store/types.js';

/**
 * Who is asking: the principal every run, read and control of the request carries to the
 * authorization policy. Return `undefined` (or throw) to refuse the request.
 */
export type ProtocolAuthHook = (request: IncomingMessage) => Json | undefined | Promise<Json | undefined>;

export interface ProtocolDoorOptions {
  /** The client every run, read and control goes through (its store, its policy, its signing key). */
  client: TurnKitClient;
  /** The agents this door serves, by name (default: every agent of the client's registry). */
  agents?: readonly string[];
  /** The principal of a request. Without it, only loopback requests are served, as `localPrincipal`. */
  authenticate?: ProtocolAuthHook;
  /** The principal of a loopback request when there is no hook (default `null`). */
  localPrincipal?: Json;
  /** The largest request body, in bytes (default 1 MiB): a larger one is refused unread. */
  maxBodyBytes?: number;
  logger?: Pick<Console, 'error'>;
}

/** A Node `http` handler; it answers every request it is given. */
export type ProtocolHandler = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

/** A refusal at the door, before any protocol message is read: an HTTP status and a reason. */
export class DoorError extends TurnKitError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** The principal of a request, or a DoorError (401 refused by the hook, 403 not loopback). */
export async function principalOf(options: ProtocolDoorOptions, request: IncomingMessage): Promise<Json> {
  const { authenticate } = options;
  if (!authenticate) {
    if (!isLoopbackAddress(request.socket.remoteAddress))
      throw new DoorError(403, 'this door has no auth hook: it serves loopback requests only');
    return options.localPrincipal ?? null;
  }
  let principal: Json | undefined;
  try {
    principal = await authenticate(request);
  } catch {
    principal = undefined;
  }
  if (principal === undefined) throw new DoorError(401, 'not authenticated');
  return principal;
}

/** The request's body as text, refused with 413 past `limit` bytes (the rest is not read). */
export async function readBody(request: IncomingMessage, limit: number): Promise<string> {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit)
    throw new DoorError(413, `the request body is larger than ${limit} bytes`);
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new DoorError(413, `the request body is larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The agents a door serves: the names given (each must be registered), else all. */
export function servedAgents(options: ProtocolDoorOptions): string[] {
  const names = options.agents ?? options.client.agents.names;
  for (const name of names) options.client.agents.resolve(name);
  return [...names];
}

const TURN_ID = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * The root turn `turnId` as `principal` may see it through a door: one of the served agents'
 * runs, started with this same principal, whose conversation the policy lets it read
 * (`read_messages`, as `messagesAfter`). Anything else, an unknown id included, is the same
 * RecordNotFound, so a door never tells whether another principal's turn exists.
 */
export async function reachableTurn(
  client: TurnKitClient,
  served: readonly string[],
  turnId: unknown,
  principal: Json,
): Promise<TurnRecord> {
  const notFound = () => new RecordNotFound('turn', typeof turnId === 'string' ? turnId.slice(0, 128) : '?');
  if (typeof turnId !== 'string' || !TURN_ID.test(turnId)) throw notFound();
  const turn = await client.store.loadTurn(turnId).catch((error: unknown) => {
    throw error instanceof RecordNotFound ? notFound() : error;
  });
  if (turn.parentTurnId !== null || !served.includes(turn.agentName)) throw notFound();
  if (canonicalJson(turn.options['principal'] ?? null) !== canonicalJson(principal)) throw notFound();
  try {
    // Asks the policy `read_messages` on the turn's conversation and reads nothing past the end.
    await client.messagesAfter(turn.conversationId, Number.MAX_SAFE_INTEGER, { principal, limit: 1 });
  } catch (error) {
    if (error instanceof AuthorizationError) throw notFound();
    throw error;
  }
  return turn;
}

/**
 * The conversation `id` when it is `principal`'s conversation with `agent` (its recorded
 * principal), else null: a door continues only the caller's own conversations.
 */
export async function ownConversation(
  client: TurnKitClient,
  id: string,
  agent: string,
  principal: Json,
): Promise<string | null> {
  if (!/^conv_[A-Za-z0-9_-]{1,120}$/.test(id)) return null;
  const record = await client.store.loadConversation(id).catch((error: unknown) => {
    if (error instanceof RecordNotFound) return null;
    throw error;
  });
  if (!record || record.agentName !== agent) return null;
  return canonicalJson(record.metadata['principal'] ?? null) === canonicalJson(principal) ? record.id : null;
}
