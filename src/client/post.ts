/**
 * The conversation inbox from the application's side (decision 41): `post` is one
 * Update-with-Start of the conversation's lane (its `post` Update, the lane started if it is
 * not running), so a post to an idle conversation starts its lane and its turn in one round
 * trip; `inputStatus` and `messagesAfter` serve a front end that polls. The Update's id is
 * Temporal's own: the request id is held by the store, so a rejected post sent again is
 * decided again, as it is after the lane continued as new.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import {
  isGrpcServiceError,
  WithStartWorkflowOperation,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { PostPolicy, PostReceipt, PostRequest } from '../contract/post-request.js';
import { parsePostRequest, signedPostParams } from '../contract/post-request.js';
import { asSent, signPrincipal } from '../engine/controls/principal-signature.js';
import { authorizePost } from '../engine/lane/post-effects.js';
import type { InputStatus } from '../engine/lane/post-record.js';
import { findPost, receiptOf } from '../engine/lane/post-record.js';
import type { Runtime } from '../engine/runtime.js';
import * as errors from '../errors.js';
import { ArgumentError, InputError, TurnKitError } from '../errors.js';
import type { MediaInput } from '../models/media.js';
import { mediaPart } from '../models/media.js';
import type { Json, MessageRecord } from '../store/types.js';
import type { TurnSettings } from '../workflows/contract.js';
import { laneWorkflowOptions, postUpdate } from '../workflows/contract.js';
import type { laneWorkflow } from '../workflows/lane-workflow.js';

export type { InputStatus } from '../engine/lane/post-record.js';

export interface PostOptions {
  /** Idempotency key within the conversation (default: a fresh one): the same id, the same receipt. */
  requestId?: string;
  /** Who is posting: authorized as `post` (and `steer` / `cancel` for what the policy does). */
  principal?: Json;
  /** Images and files sent with the text (by URL, or up to 256 KiB inline). */
  media?: readonly MediaInput[];
  /** When the conversation is busy: `queue`, `steer`, `interrupt` or `reject`; default the agent's `postPolicy`. */
  policy?: PostPolicy;
}

export interface MessagesAfter {
  messages: MessageRecord[];
  /** The sequence of the last message returned (the cursor given, when there is none): pass it next. */
  cursor: number;
}

/** What the inbox needs of the client. */
export interface InboxSender {
  runtime: Runtime;
  temporal: Client;
  taskQueue: string;
  settings: TurnSettings | undefined;
}

/** A post's request as it will travel: checked, copied as JSON, signed when the client holds the key. */
function postRequest(
  runtime: Runtime,
  conversationId: string,
  text: string,
  options: PostOptions,
): PostRequest {
  if (options.media !== undefined && !Array.isArray(options.media))
    throw new InputError('media must be an array of { url | data, mimeType, filename? }');
  const media = (options.media ?? []).map((item) =>
    mediaPart(item, (message) => new InputError(`post media: ${message}`)),
  );
  const payload = asSent({
    requestId: options.requestId ?? `req_${randomUUID()}`,
    text,
    principal: options.principal ?? null,
    policy: options.policy ?? null,
    media,
  });
  const parsed = parsePostRequest(payload);
  if (!parsed.ok) throw new ArgumentError(parsed.reason);
  const request = parsed.value;
  if (runtime.signingKey !== undefined)
    request.signature = signPrincipal(runtime.signingKey, {
      turnId: conversationId,
      action: 'post',
      principal: request.principal,
      params: signedPostParams(request),
    });
  return request;
}

/** Posts `text` to the conversation: its lane decides and answers with the receipt. */
export async function postToConversation(
  sender: InboxSender,
  conversationId: string,
  text: string,
  options: PostOptions = {},
): Promise<PostReceipt> {
  const { runtime } = sender;
  const conversation = await runtime.store.loadConversation(conversationId);
  const request = postRequest(runtime, conversationId, text, options);
  // The same policy as the workers', asked before anything is sent (they ask again).
  if (runtime.agents.has(conversation.agentName)) {
    const agent = runtime.agents.resolve(conversation.agentName);
    await authorizePost(runtime, conversationId, request, request.policy ?? agent.postPolicy);
  }
  // The lane may close (idle) as the Update reaches it: the post is sent again, under the same
  // request id, so a post the closing lane applied after all answers with its receipt.
  for (let attempt = 1; ; attempt++) {
    const start = new WithStartWorkflowOperation<typeof laneWorkflow>('laneWorkflow', {
      ...laneWorkflowOptions(conversationId, sender.settings),
      taskQueue: sender.taskQueue,
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    try {
      return await sender.temporal.workflow.executeUpdateWithStart(postUpdate, {
        args: [request],
        startWorkflowOperation: start,
      });
    } catch (error) {
      if (attempt < LANE_CLOSED_ATTEMPTS && laneClosedUnder(error)) continue;
      throw postError(error);
    }
  }
}

/** Sends of one post when the lane keeps closing under it. */
const LANE_CLOSED_ATTEMPTS = 4;
/** gRPC's ABORTED: the Update was aborted by the closing run (servers without the UwS retry). */
const GRPC_ABORTED = 10;

/**
 * The lane's run ended while the Update was on its way: Temporal aborts it ("workflow
 * execution already completed", or ABORTED on servers that do not retry it themselves). The
 * lane's own answers (WorkflowUpdateFailedError) are never sent again.
 */
function laneClosedUnder(error: unknown): boolean {
  if (error instanceof WorkflowUpdateFailedError) return false;
  if (error instanceof WorkflowNotFoundError) return true;
  const cause = (error as { cause?: unknown } | null)?.cause;
  const grpc = isGrpcServiceError(error) ? error : isGrpcServiceError(cause) ? cause : null;
  if (grpc?.code === GRPC_ABORTED) return true;
  return /already completed|workflow is closing|update was aborted/i.test(String(error));
}

/** The TurnKit error the lane's Update failed with (ConversationBusyError, AuthorizationError, …). */
function postError(error: unknown): unknown {
  if (!(error instanceof WorkflowUpdateFailedError) || !(error.cause instanceof ApplicationFailure))
    return error;
  const cause = error.cause;
  const details = (cause.details?.[0] ?? undefined) as Record<string, unknown> | undefined;
  const type = cause.type ?? '';
  const known = (errors as Record<string, unknown>)[type];
  const options = { cause: error, ...(details ? { details } : {}) };
  // RecordNotFound and its kin take other arguments: they surface as a StoreError.
  if (type === 'RecordNotFound') return new errors.StoreError(cause.message, { cause: error });
  if (typeof known === 'function' && known.prototype instanceof TurnKitError && type !== 'ModelError')
    return new (known as new (message: string, options: object) => TurnKitError)(cause.message, options);
  return new TurnKitError(cause.message, options);
}

/** Where the post stands: its receipt and its turn's status; null when no post has this id. */
export async function inputStatus(
  runtime: Runtime,
  conversationId: string,
  requestId: string,
  options: { principal?: Json } = {},
): Promise<InputStatus | null> {
  if (typeof requestId !== 'string' || requestId === '')
    throw new ArgumentError('inputStatus needs a requestId');
  await runtime.store.loadConversation(conversationId);
  await runtime.authorize('read_control', options.principal ?? null, {
    conversation: conversationId,
    request_id: requestId,
  });
  const delivery = await findPost(runtime.store, conversationId, requestId);
  return delivery ? receiptOf(runtime.store, delivery) : null;
}

/** The conversation's messages after `cursor` (a message sequence; 0 from the start), oldest first. */
export async function messagesAfter(
  runtime: Runtime,
  conversationId: string,
  cursor: number,
  options: { principal?: Json; limit?: number } = {},
): Promise<MessagesAfter> {
  if (!Number.isInteger(cursor) || cursor < 0)
    throw new ArgumentError('messagesAfter needs a cursor: a message sequence (0 from the start)');
  const limit = options.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1) throw new ArgumentError('limit must be a positive integer');
  await runtime.store.loadConversation(conversationId);
  await runtime.authorize('read_messages', options.principal ?? null, {
    conversation: conversationId,
    cursor,
  });
  const messages = await runtime.store.listMessages(conversationId, { afterSequence: cursor, limit });
  return { messages, cursor: messages.at(-1)?.sequence ?? cursor };
}
