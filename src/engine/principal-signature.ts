/**
 * Signed principals: the client HMACs what it sends (principal, turn, action, expiry) with a
 * key that it and the workers hold; an activity verifies it. The key never enters Temporal
 * history, and only the MAC and its expiry travel in the payload. Node only (never workflow code).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../errors.js';
import type { Json } from '../store/types.js';
import type { PrincipalSignature } from './control-request.js';

/** How long a signature is honoured after the client signed it, unless it says otherwise. */
export const DEFAULT_SIGNATURE_TTL_MS = 5 * 60_000;

/** JSON with object keys sorted, so the same principal always signs the same bytes. */
function canonical(value: Json): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  return `{${Object.keys(value)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonical(value[key]!)}`)
    .join(',')}}`;
}

export interface SignedScope {
  turnId: string;
  action: string;
  principal: Json;
}

function mac(key: string | Buffer, scope: SignedScope, expiresAt: string): Buffer {
  const message = canonical(['turnkit-principal-1', scope.turnId, scope.action, scope.principal, expiresAt]);
  return createHmac('sha256', key).update(message).digest();
}

export function checkSigningKey(key: unknown): string | Buffer | undefined {
  if (key === undefined) return undefined;
  if ((typeof key === 'string' || Buffer.isBuffer(key)) && key.length >= 16) return key;
  throw new ConfigError('signingKey must be a string or Buffer of at least 16 bytes');
}

/** The signature a client sends with a control or a cancel. */
export function signPrincipal(
  key: string | Buffer,
  scope: SignedScope,
  options: { ttlMs?: number; now?: number } = {},
): PrincipalSignature {
  const expiresAt = new Date(
    (options.now ?? Date.now()) + (options.ttlMs ?? DEFAULT_SIGNATURE_TTL_MS),
  ).toISOString();
  return { expires_at: expiresAt, mac: mac(key, scope, expiresAt).toString('base64url') };
}

export interface Verification {
  verified: boolean;
  /** Why not: unsigned, no key on this worker, expired, or a signature that does not match. */
  reason?: 'unsigned' | 'no_key' | 'expired' | 'bad_signature';
}

/** Whether `signature` was made with `key` for exactly this turn, action and principal, and is still valid. */
export function verifyPrincipal(
  key: string | Buffer | undefined,
  scope: SignedScope,
  signature: PrincipalSignature | null,
  now = Date.now(),
): Verification {
  if (!signature) return { verified: false, reason: 'unsigned' };
  if (key === undefined) return { verified: false, reason: 'no_key' };
  const expires = Date.parse(signature.expires_at);
  const expected = mac(key, scope, signature.expires_at);
  const given = Buffer.from(signature.mac, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return { verified: false, reason: 'bad_signature' };
  if (!Number.isFinite(expires) || expires <= now) return { verified: false, reason: 'expired' };
  return { verified: true };
}
