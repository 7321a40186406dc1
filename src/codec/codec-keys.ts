/**
 * The codec's keys from text: `TURNKIT_CODEC_KEYS=current:BASE64,old:BASE64` (decision 75).
 * Entries are comma-separated `id:key` pairs, the key 32 bytes in standard base64
 * (`openssl rand -base64 32`); the first entry is the current key, every entry decrypts.
 */
import type { PayloadCodec } from '@temporalio/common';
import { ConfigError } from '../errors.js';
import type { CodecKey } from './encryption-codec.js';
import { EncryptionCodec } from './encryption-codec.js';

export const CODEC_KEYS_ENV = 'TURNKIT_CODEC_KEYS';

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Parses `id:base64,id:base64`; a malformed entry is a ConfigError naming its place, never the key. */
export function parseCodecKeys(text: string, source = CODEC_KEYS_ENV): CodecKey[] {
  const entries = text.split(',').map((entry) => entry.trim());
  if (entries.every((entry) => entry === ''))
    throw new ConfigError(`${source} is empty: give id:base64key pairs, the current key first`);
  const keys = entries.map((entry, index) => {
    const where = `${source}, entry ${index + 1}`;
    const colon = entry.indexOf(':');
    if (colon <= 0) throw new ConfigError(`${where}: expected id:base64key`);
    const id = entry.slice(0, colon);
    const encoded = entry.slice(colon + 1);
    const key = BASE64.test(encoded) ? Buffer.from(encoded, 'base64') : undefined;
    if (!key || key.byteLength !== 32)
      throw new ConfigError(
        `${where} (key "${id}"): the key must be 32 bytes in base64 (openssl rand -base64 32)` +
          (key ? `, got ${key.byteLength} bytes` : ', got text that is not base64'),
      );
    return { id, key };
  });
  try {
    new EncryptionCodec(keys);
  } catch (error) {
    throw new ConfigError(`${source}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return keys;
}

/**
 * The payload codecs for a process: the application's own first, then TurnKit's encryption
 * when `TURNKIT_CODEC_KEYS` (or `env`'s) is set. Encoding runs the list in order and decoding
 * in reverse, so encryption sees the application's finished bytes (compression before it).
 */
export function payloadCodecsFromEnv(
  env: Record<string, string | undefined> = process.env,
  own: readonly PayloadCodec[] = [],
): PayloadCodec[] {
  const text = env[CODEC_KEYS_ENV];
  return text === undefined || text === '' ? [...own] : [...own, new EncryptionCodec(parseCodecKeys(text))];
}
