/**
 * Signed principals: the client HMACs the whole request it sends (turn, action, principal,
 * every parameter, expiry and a nonce) with a key that it and the workers hold; an activity
 * verifies it, and `signature-use.ts` makes each signature good for one use. The key never
 * enters Temporal history, and only the MAC, its expiry and nonce travel in the payload.
 * Node only (never workflow code).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ArgumentError, ConfigError } from '../../errors.js';
import type { Json, JsonObject } from '../../store/types.js';
import type { PrincipalSignature } from '../../contract/control-request.js';

/** How long a signature is honoured after the client signed it, unless it says otherwise. */
const DEFAULT_SIGNATURE_TTL_MS = 5 * 60_000;

/** JSON with object keys sorted, so the same request always signs the same bytes. */
function canonical(value: Json): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  return `{${Object.keys(value)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonical(value[key]!)}`)
    .join(',')}}`;
}

/**
 * What a signature covers: the request minus its signature. `params` are the action's own
 * fields (`toolCallId`, `note`, `reason`, `text`, `descendants`): `signedParams` of
 * control-request.ts and cancel-request.ts name them, so both sides sign the same object.
 */
export interface SignedRequest {
  turnId: string;
  action: string;
  principal: Json;
  params?: JsonObject;
}

/**
 * `value` as it will arrive through Temporal's JSON payload: `undefined` fields dropped, a
 * `Date` its ISO string, anything with `toJSON` its JSON. Sign and send this copy, so that the
 * worker verifies the same bytes the client signed. An ArgumentError for what JSON cannot
 * carry (a cycle, a BigInt).
 */
export function asSent<T>(value: T): T {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new ArgumentError(`a principal and control fields must be JSON: ${(error as Error).message}`);
  }
  return (text === undefined ? null : JSON.parse(text)) as T;
}

function mac(key: string | Buffer, request: SignedRequest, expiresAt: string, nonce: string | null): Buffer {
  // Both sides canonicalize the JSON form: a Date or an undefined field signs as it travels.
  const message = canonical({
    v: 'turnkit-request-2',
    turn: request.turnId,
    action: request.action,
    principal: asSent(request.principal) ?? null,
    params: asSent(request.params ?? {}),
    expires_at: expiresAt,
    nonce,
  });
  return createHmac('sha256', key).update(message).digest();
}

export function checkSigningKey(key: unknown): string | Buffer | undefined {
  if (key === undefined) return undefined;
  if ((typeof key === 'string' || Buffer.isBuffer(key)) && key.length >= 16) return key;
  throw new ConfigError('signingKey must be a string or Buffer of at least 16 bytes');
}

/** The signature a client sends with a control or a cancel: for this request only, once. */
export function signPrincipal(
  key: string | Buffer,
  request: SignedRequest,
  options: { ttlMs?: number; now?: number } = {},
): PrincipalSignature {
  const expiresAt = new Date(
    (options.now ?? Date.now()) + (options.ttlMs ?? DEFAULT_SIGNATURE_TTL_MS),
  ).toISOString();
  // Two identical requests signed in the same millisecond still get two signatures.
  const nonce = randomBytes(12).toString('base64url');
  return { expires_at: expiresAt, mac: mac(key, request, expiresAt, nonce).toString('base64url'), nonce };
}

export interface Verification {
  verified: boolean;
  /**
   * Why not: unsigned, no key on this worker, expired, a signature that does not match the
   * request, or one already used (`signature-use.ts`).
   */
  reason?: 'unsigned' | 'no_key' | 'expired' | 'bad_signature' | 'replayed' | 'temporal';
}

/** Whether `signature` was made with `key` for exactly this request, and is still valid. */
export function verifyPrincipal(
  key: string | Buffer | undefined,
  request: SignedRequest,
  signature: PrincipalSignature | null,
  now = Date.now(),
): Verification {
  if (!signature) return { verified: false, reason: 'unsigned' };
  if (key === undefined) return { verified: false, reason: 'no_key' };
  const expires = Date.parse(signature.expires_at);
  const expected = mac(key, request, signature.expires_at, signature.nonce ?? null);
  const given = Buffer.from(signature.mac, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return { verified: false, reason: 'bad_signature' };
  if (!Number.isFinite(expires) || expires <= now) return { verified: false, reason: 'expired' };
  return { verified: true };
}
