/**
 * The conversation inbox's `post` (TurnKit 0.7 `Conversation#post`): the Update's payload, the
 * policy for a busy conversation, and the receipt. Pure, so the lane workflow's validator can
 * check a payload deterministically; it comes from the client, the CLI or `temporal workflow
 * update`: untrusted input, a typed result, never a throw.
 */
import type { Json, JsonObject } from '../store/types.js';
import type { Parsed, PrincipalSignature } from './control-request.js';
import { parseSignature } from './control-request.js';

/** What a post does when its conversation is busy (a turn holds the lane or waits for it). */
export type PostPolicy = 'queue' | 'steer' | 'interrupt' | 'reject';
export const POST_POLICIES: readonly PostPolicy[] = ['queue', 'steer', 'interrupt', 'reject'];

/** What happened to a post. */
export type PostDisposition = 'started' | 'queued' | 'steered' | 'interrupted' | 'rejected';

/**
 * A post's receipt. `messageId` is the posted message (null for a steered post until the
 * running turn writes it at its boundary); `turnId` is the turn that answers it: the new turn
 * (started), the running turn (steered), or the turn the lane builds once it is free (queued,
 * interrupted; null until it exists, `inputStatus` tells it later).
 */
export interface PostReceipt {
  requestId: string;
  messageId: string | null;
  turnId: string | null;
  disposition: PostDisposition;
}

/** One image or file of a post, as the message stores it (`image` / `file` content part). */
type PostMedia = JsonObject & { type: 'image' | 'file'; mime_type: string };

export interface PostRequest {
  /** Idempotency key, per conversation: the same id returns the same receipt. */
  requestId: string;
  text: string;
  principal: Json;
  /** Null: the agent's `postPolicy` (default `queue`). */
  policy: PostPolicy | null;
  media: PostMedia[];
  signature: PrincipalSignature | null;
}

/** The longest text a post takes (it becomes one user message, like a steer's). */
const MAX_POST_CHARS = 100_000;
const MAX_REQUEST_ID_CHARS = 200;
/**
 * Inline media a post may carry, decoded: the post travels in the lane's Update (its history),
 * so larger images and files go by URL.
 */
const MAX_POST_INLINE_MEDIA_BYTES = 256 * 1024;
const FIELDS = ['requestId', 'text', 'principal', 'policy', 'media', 'signature'];

/**
 * The id of the `steer` Update a post sends the running turn (and of the message it writes,
 * `steer_id`): a retried post meets the first Update's outcome.
 */
export function postUpdateId(requestId: string): string {
  return `post:${requestId}`;
}

/** The parameters a post's signature covers besides the conversation, the action and the principal. */
export function signedPostParams(request: PostRequest): JsonObject {
  return {
    requestId: request.requestId,
    text: request.text,
    policy: request.policy,
    ...(request.media.length > 0 ? { media: request.media } : {}),
  };
}

function parseMedia(value: unknown): Parsed<PostMedia[]> {
  if (value === undefined || value === null) return { ok: true, value: [] };
  if (!Array.isArray(value)) return { ok: false, reason: 'post media must be an array of image/file parts' };
  let inline = 0;
  for (const part of value as unknown[]) {
    const item = part as Record<string, unknown>;
    if (
      !part ||
      typeof part !== 'object' ||
      (item['type'] !== 'image' && item['type'] !== 'file') ||
      typeof item['mime_type'] !== 'string' ||
      (typeof item['url'] !== 'string' && typeof item['data'] !== 'string')
    )
      return {
        ok: false,
        reason: 'post media must be parts like {"type":"image","mime_type":"…","url":"…"}',
      };
    if (typeof item['data'] === 'string') inline += Math.floor((item['data'].length * 3) / 4);
  }
  if (inline > MAX_POST_INLINE_MEDIA_BYTES)
    return {
      ok: false,
      reason: `a post carries at most ${MAX_POST_INLINE_MEDIA_BYTES} bytes of inline media: send larger media by URL`,
    };
  return { ok: true, value: value as PostMedia[] };
}

/** Validates a post's payload: known fields only, a request id and a non-empty text. */
export function parsePostRequest(payload: unknown): Parsed<PostRequest> {
  if (!payload || typeof payload !== 'object' || Array.isArray(payload))
    return { ok: false, reason: 'post payload must be an object like {"requestId":"…","text":"…"}' };
  const fields = payload as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((key) => !FIELDS.includes(key));
  if (unknown.length > 0) return { ok: false, reason: `unknown post field(s): ${unknown.join(', ')}` };
  const { requestId, text, principal = null, policy = null } = fields;
  if (typeof requestId !== 'string' || requestId.trim() === '' || requestId.length > MAX_REQUEST_ID_CHARS)
    return {
      ok: false,
      reason: `post needs a requestId (a non-empty string of at most ${MAX_REQUEST_ID_CHARS})`,
    };
  if (typeof text !== 'string' || text.trim() === '')
    return { ok: false, reason: 'post needs a non-empty text' };
  if (text.length > MAX_POST_CHARS)
    return { ok: false, reason: `post text is longer than ${MAX_POST_CHARS} characters` };
  if (policy !== null && !POST_POLICIES.includes(policy as PostPolicy))
    return { ok: false, reason: `post policy must be one of ${POST_POLICIES.join(', ')}` };
  const media = parseMedia(fields['media']);
  if (!media.ok) return media;
  const signature = parseSignature(fields['signature']);
  if (!signature.ok) return signature;
  return {
    ok: true,
    value: {
      requestId,
      text,
      principal: principal as Json,
      policy: policy as PostPolicy | null,
      media: media.value,
      signature: signature.value,
    },
  };
}
