/**
 * TurnKit's payload encryption (decision 75, docs/data-lifecycle.md): a Temporal PayloadCodec
 * that seals every payload with AES-256-GCM under the current key and opens it with whichever
 * listed key its `encryption-key-id` names, so keys rotate by putting a new one first and
 * keeping the old ones listed until no history needs them.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { ArgumentError, CodecKeyError } from '../errors.js';

/** One AES-256 key and the id the payloads it sealed carry. */
export interface CodecKey {
  id: string;
  /** 32 bytes. */
  key: Uint8Array;
}

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';

// A CommonJS module: its namespace is the default export under Node's ESM loader.
const ProtoPayload = proto.temporal.api.common.v1.Payload;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

/** The payload's `encoding` metadata, as text (undefined when absent). */
function encodingOf(payload: Payload): string | undefined {
  const encoding = payload.metadata?.['encoding'];
  return encoding ? textDecoder.decode(encoding) : undefined;
}

/** Checks a key list: at least one key, ids well-formed and distinct, each 32 bytes. */
function checkedKeys(keys: readonly CodecKey[]): Map<string, Buffer> {
  if (keys.length === 0)
    throw new ArgumentError('EncryptionCodec needs at least one key (the first encrypts)');
  const byId = new Map<string, Buffer>();
  for (const { id, key } of keys) {
    if (typeof id !== 'string' || !KEY_ID.test(id))
      throw new ArgumentError(`codec key id ${JSON.stringify(id)} must be 1–64 of A-Z a-z 0-9 . _ -`);
    if (byId.has(id)) throw new ArgumentError(`codec key id "${id}" is listed twice`);
    if (!(key instanceof Uint8Array) || key.byteLength !== 32)
      throw new ArgumentError(
        `codec key "${id}" must be 32 bytes (AES-256), got ${key instanceof Uint8Array ? key.byteLength : typeof key}`,
      );
    byId.set(id, Buffer.from(key));
  }
  return byId;
}

export class EncryptionCodec implements PayloadCodec {
  readonly currentKeyId: string;
  readonly #keys: Map<string, Buffer>;

  /** `keys[0]` encrypts; every key in the list decrypts. */
  constructor(keys: readonly CodecKey[]) {
    this.#keys = checkedKeys(keys);
    this.currentKeyId = keys[0]!.id;
  }

  /** The ids this codec can decrypt, current first. */
  get keyIds(): string[] {
    return [...this.#keys.keys()];
  }

  // Async, so that a payload that does not open is a rejection, never a synchronous throw.
  /** Seals each payload with the current key; one already encrypted passes as it is. */
  async encode(payloads: Payload[]): Promise<Payload[]> {
    await Promise.resolve();
    return payloads.map((payload) => this.#seal(payload));
  }

  /** Opens each sealed payload with the key its metadata names; an unsealed one passes as it is. */
  async decode(payloads: Payload[]): Promise<Payload[]> {
    await Promise.resolve();
    return payloads.map((payload) => this.#open(payload));
  }

  #seal(payload: Payload): Payload {
    // Already sealed (by this codec or another encrypting one): sealing twice gains nothing.
    if (encodingOf(payload) === ENCRYPTED_ENCODING) return payload;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#keys.get(this.currentKeyId)!, iv);
    // The key id is authenticated too: a payload relabelled with another id does not open.
    cipher.setAAD(textEncoder.encode(this.currentKeyId));
    const plain = ProtoPayload.encode(payload).finish();
    const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    return {
      metadata: {
        encoding: textEncoder.encode(ENCRYPTED_ENCODING),
        [KEY_ID_METADATA]: textEncoder.encode(this.currentKeyId),
      },
      data: sealed,
    };
  }

  #open(payload: Payload): Payload {
    // Not sealed: a plain payload (from before the codec was turned on) passes through.
    if (encodingOf(payload) !== ENCRYPTED_ENCODING) return payload;
    const idBytes = payload.metadata?.[KEY_ID_METADATA];
    if (!idBytes)
      throw new CodecKeyError(
        `an encrypted payload has no ${KEY_ID_METADATA} metadata: it was not sealed by TurnKit`,
        {
          keyId: undefined,
        },
      );
    const keyId = textDecoder.decode(idBytes);
    const key = this.#keys.get(keyId);
    if (!key)
      throw new CodecKeyError(
        `a payload is encrypted with key "${keyId}", which this codec does not list (it has: ${this.keyIds.join(', ')})`,
        { keyId },
      );
    const data = payload.data ?? new Uint8Array();
    if (data.byteLength < IV_BYTES + TAG_BYTES)
      throw new CodecKeyError(`a payload encrypted with key "${keyId}" is truncated`, { keyId });
    const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES));
    decipher.setAAD(idBytes);
    decipher.setAuthTag(data.subarray(data.byteLength - TAG_BYTES));
    let plain: Buffer;
    try {
      plain = Buffer.concat([
        decipher.update(data.subarray(IV_BYTES, data.byteLength - TAG_BYTES)),
        decipher.final(),
      ]);
    } catch (error) {
      throw new CodecKeyError(
        `a payload encrypted with key "${keyId}" does not decrypt: altered, or another key listed under that id`,
        { keyId, cause: error },
      );
    }
    return ProtoPayload.decode(plain);
  }
}
