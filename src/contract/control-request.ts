/**
 * The payloads of a person's controls (the Updates `approve`, `reject`, `pause`, `resume`,
 * `steer`); pure, so the workflow's validators can check them deterministically. They come
 * from the client, the Temporal CLI or the UI: untrusted input, a typed result, never a throw.
 */
import type { Json, JsonObject } from '../store/types.js';

export type ControlAction = 'approve' | 'reject' | 'pause' | 'resume' | 'steer';

/** A request signed by a client holding the shared key: valid until `expires_at`, once. */
export interface PrincipalSignature {
  expires_at: string;
  mac: string;
  /** Makes each signature unique (absent in signatures of releases before 0.5, which no longer verify). */
  nonce?: string;
}

export interface ControlRequest {
  action: ControlAction;
  principal: Json;
  signature: PrincipalSignature | null;
  /** approve, reject */
  toolCallId?: string;
  /** approve */
  note?: string;
  /** reject */
  reason?: string;
  /** steer */
  text?: string;
}

/** The fields each action takes besides `principal` and `signature`, and which are required. */
const FIELDS: Record<ControlAction, { required: string[]; optional: string[] }> = {
  approve: { required: ['toolCallId'], optional: ['note'] },
  reject: { required: ['toolCallId'], optional: ['reason'] },
  pause: { required: [], optional: [] },
  resume: { required: [], optional: [] },
  steer: { required: ['text'], optional: [] },
};

/** The one result of a call nobody decided on before its `approvalTimeout`. */
export const APPROVAL_TIMED_OUT = 'approval timed out';

/** Steering text longer than this is refused (it becomes one user message). */
const MAX_STEER_CHARS = 100_000;
/** An approve `note` or reject `reason` longer than this is refused (both are copied into history). */
const MAX_NOTE_CHARS = 2_000;
const MAX_NONCE_CHARS = 64;

export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

export function parseSignature(value: unknown): Parsed<PrincipalSignature | null> {
  if (value === undefined || value === null) return { ok: true, value: null };
  const signature = value as Record<string, unknown>;
  const nonce = signature['nonce'];
  if (
    typeof value !== 'object' ||
    Array.isArray(value) ||
    typeof signature['expires_at'] !== 'string' ||
    typeof signature['mac'] !== 'string' ||
    (nonce !== undefined && (typeof nonce !== 'string' || nonce.length > MAX_NONCE_CHARS)) ||
    Object.keys(signature).length !== (nonce === undefined ? 2 : 3)
  )
    return {
      ok: false,
      reason: 'signature must be {"expires_at": "<ISO time>", "mac": "<base64url>", "nonce": "<base64url>"}',
    };
  return {
    ok: true,
    value: {
      expires_at: signature['expires_at'],
      mac: signature['mac'],
      ...(typeof nonce === 'string' ? { nonce } : {}),
    },
  };
}

/** The parameters a control's signature covers besides turn, action and principal. */
export function signedParams(request: ControlRequest): JsonObject {
  const { required, optional } = FIELDS[request.action];
  const params: JsonObject = {};
  for (const key of [...required, ...optional]) {
    const value = request[key as 'toolCallId' | 'note' | 'reason' | 'text'];
    if (value !== undefined) params[key] = value;
  }
  return params;
}

/** Validates the payload of one control: known fields only, required ones present, strings. */
export function parseControlRequest(action: ControlAction, payload: unknown): Parsed<ControlRequest> {
  const example =
    action === 'steer'
      ? '{"text":"…"}'
      : action === 'approve' || action === 'reject'
        ? '{"toolCallId":"…"}'
        : '{}';
  if (payload === undefined || payload === null) payload = {};
  if (typeof payload !== 'object' || Array.isArray(payload))
    return { ok: false, reason: `${action} payload must be an object like ${example}` };
  const { principal = null, signature, ...rest } = payload as Record<string, unknown>;
  const { required, optional } = FIELDS[action];
  const unknown = Object.keys(rest).filter((key) => !required.includes(key) && !optional.includes(key));
  if (unknown.length > 0) return { ok: false, reason: `unknown ${action} field(s): ${unknown.join(', ')}` };
  for (const key of required) {
    if (typeof rest[key] !== 'string' || (rest[key] as string).trim() === '')
      return { ok: false, reason: `${action} needs ${key} (a non-empty string), like ${example}` };
  }
  for (const key of optional) {
    if (rest[key] !== undefined && typeof rest[key] !== 'string')
      return { ok: false, reason: `${action}: ${key} must be a string` };
  }
  if (typeof rest['text'] === 'string' && rest['text'].length > MAX_STEER_CHARS)
    return { ok: false, reason: `steer text is longer than ${MAX_STEER_CHARS} characters` };
  for (const key of ['note', 'reason'] as const) {
    const value = rest[key];
    if (typeof value === 'string' && value.length > MAX_NOTE_CHARS)
      return { ok: false, reason: `${action}: ${key} is longer than ${MAX_NOTE_CHARS} characters` };
  }
  const signed = parseSignature(signature);
  if (!signed.ok) return signed;
  return {
    ok: true,
    value: {
      action,
      principal: principal as Json,
      signature: signed.value,
      ...(rest as { toolCallId?: string; note?: string; reason?: string; text?: string }),
    },
  };
}

/** How a principal reads in a result the model sees: "rejected by <who>: <reason>". */
export function principalName(principal: Json): string {
  if (typeof principal === 'string' && principal !== '') return principal;
  if (principal && typeof principal === 'object' && !Array.isArray(principal)) {
    for (const key of ['name', 'id', 'email', 'user']) {
      const value = principal[key];
      if (typeof value === 'string' || typeof value === 'number') return String(value);
    }
  }
  return principal === null ? 'an unnamed person' : JSON.stringify(principal);
}
