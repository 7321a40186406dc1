/** The cancel signal's payload; pure, so the workflow can validate it deterministically. */
import type { Json, JsonObject } from '../store/types.js';
import type { PrincipalSignature } from './control-request.js';
import { parseSignature } from './control-request.js';

export type CancelDescendants = 'retain' | 'cascade';

export interface CancelRequest {
  descendants: CancelDescendants;
  principal: Json;
  /** The client's signature of the principal (see principal-signature.ts); absent: unverified. */
  signature?: PrincipalSignature | null;
}

/** The parameters a cancel's signature covers besides turn, action and principal. */
export function signedCancelParams(request: CancelRequest): JsonObject {
  return { descendants: request.descendants };
}

/** Validates a cancel payload from a signal (untrusted input): typed result, never a throw. */
export function parseCancelRequest(
  payload: unknown,
): { ok: true; value: CancelRequest } | { ok: false; reason: string } {
  if (payload === undefined || payload === null)
    return { ok: true, value: { descendants: 'retain', principal: null } };
  if (typeof payload !== 'object' || Array.isArray(payload)) {
    return { ok: false, reason: 'cancel payload must be an object like {"descendants":"retain"}' };
  }
  const { descendants = 'retain', principal = null, signature, ...rest } = payload as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) return { ok: false, reason: `unknown cancel field(s): ${unknown.join(', ')}` };
  if (descendants !== 'retain' && descendants !== 'cascade') {
    return {
      ok: false,
      reason: `descendants must be "retain" or "cascade", got ${JSON.stringify(descendants)}`,
    };
  }
  const signed = parseSignature(signature);
  if (!signed.ok) return signed;
  return {
    ok: true,
    value: {
      descendants,
      principal: principal as Json,
      ...(signed.value ? { signature: signed.value } : {}),
    },
  };
}
