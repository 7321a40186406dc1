/**
 * Sealing content with a tenant's key (decision 80): AES-256-GCM under the tenant's current
 * key version, as text that names the tenant and the version:
 *
 *   turnkit-sealed:1:<tenant>:<version>:<base64 of IV (12 bytes) | ciphertext | tag (16 bytes)>
 *
 * The prefix, tenant and version are the authenticated data, so sealed text relabelled with
 * another tenant or version does not open. Version 0 is content that was never sealed because
 * its tenant had no key when it was written (an event of a turn whose tenant was erased): it
 * reads as erased too. Keys are cached per tenant and version for `cacheMs`, and a provider
 * that reports changes (`subscribe`) drops them at once; a read fetches each missing key once.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ContentErasedError, StoreError } from '../../errors.js';
import type { TenantKeyProvider } from './tenant-keys.js';
import { checkTenant } from './tenant-keys.js';

export const SEALED_PREFIX = 'turnkit-sealed:1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const DEFAULT_CACHE_MS = 60_000;
const TENANT = /^[^\s,:]{1,200}$/;
const VERSION = /^\d{1,15}$/;

interface Cached<T> {
  value: Promise<T>;
  until: number;
}

/**
 * Sealed text's parts; undefined for text that is not sealed content. (Split by hand: a regular
 * expression over the whole ciphertext costs more than the decryption.)
 */
function parseSealed(text: string): { tenant: string; version: number; data: string } | undefined {
  if (!text.startsWith(SEALED_PREFIX)) return undefined;
  const tenantEnd = text.indexOf(':', SEALED_PREFIX.length);
  const versionEnd = tenantEnd < 0 ? -1 : text.indexOf(':', tenantEnd + 1);
  if (versionEnd < 0) return undefined;
  const tenant = text.slice(SEALED_PREFIX.length, tenantEnd);
  const version = text.slice(tenantEnd + 1, versionEnd);
  if (!TENANT.test(tenant) || !VERSION.test(version)) return undefined;
  return { tenant, version: Number(version), data: text.slice(versionEnd + 1) };
}

export class ContentSealer {
  readonly #provider: TenantKeyProvider;
  readonly #cacheMs: number;
  readonly #current = new Map<string, Cached<{ version: number; key: Buffer } | undefined>>();
  readonly #versions = new Map<string, Cached<Buffer | undefined>>();
  /** Keys ready for a synchronous open: filled by `prepare`. */
  readonly #ready = new Map<string, Buffer | undefined>();
  readonly #unsubscribe: (() => void) | undefined;

  constructor(provider: TenantKeyProvider, options: { cacheMs?: number } = {}) {
    this.#provider = provider;
    this.#cacheMs = options.cacheMs ?? DEFAULT_CACHE_MS;
    this.#unsubscribe = provider.subscribe?.((tenant) => this.forget(tenant));
  }

  /** Stops listening to the provider (the store closed). */
  close(): void {
    this.#unsubscribe?.();
  }

  /** Drops the tenant's cached keys: the next write or read asks the provider again. */
  forget(tenant: string): void {
    this.#current.delete(tenant);
    for (const map of [this.#versions, this.#ready])
      for (const key of map.keys()) if (key.startsWith(`${tenant}:`)) map.delete(key);
  }

  #cached<T>(map: Map<string, Cached<T>>, key: string, load: () => Promise<T>): Promise<T> {
    const now = Date.now();
    const hit = map.get(key);
    if (hit && hit.until > now) return hit.value;
    const value = load();
    map.set(key, { value, until: now + this.#cacheMs });
    // A failed fetch is not kept: the next use asks again.
    value.catch(() => map.delete(key));
    return value;
  }

  async #currentKey(tenant: string): Promise<{ version: number; key: Buffer } | undefined> {
    return this.#cached(this.#current, tenant, async () => {
      const found = await this.#provider.keyFor(tenant);
      if (!found) return undefined;
      if (!Number.isSafeInteger(found.version) || found.version < 1 || found.key.byteLength !== 32)
        throw new StoreError(`the tenant key provider gave tenant "${tenant}" a malformed key`);
      return { version: found.version, key: Buffer.from(found.key) };
    });
  }

  /**
   * The value's JSON sealed under the tenant's current key. A tenant without a key is a
   * ContentErasedError, or with `erasedMark`, the version-0 text that reads as erased.
   */
  async seal(tenant: string, value: unknown, options: { erasedMark?: boolean } = {}): Promise<string> {
    checkTenant(tenant);
    const current = await this.#currentKey(tenant);
    if (!current) {
      if (options.erasedMark) return `${SEALED_PREFIX}${tenant}:0:`;
      throw new ContentErasedError(tenant, `tenant "${tenant}" has no key: its content cannot be written`);
    }
    const label = `${SEALED_PREFIX}${tenant}:${current.version}:`;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', current.key, iv);
    cipher.setAAD(Buffer.from(label));
    const sealed = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return label + Buffer.concat([iv, sealed, cipher.getAuthTag()]).toString('base64');
  }

  /** Fetches (once each, from the cache when it can) the keys these sealed texts name. */
  async prepare(texts: Iterable<string>): Promise<void> {
    const wanted = new Map<string, { tenant: string; version: number }>();
    for (const text of texts) {
      const parsed = parseSealed(text);
      if (parsed && parsed.version > 0) wanted.set(`${parsed.tenant}:${parsed.version}`, parsed);
    }
    await Promise.all(
      [...wanted].map(async ([id, { tenant, version }]) => {
        const key = await this.#cached(this.#versions, id, async () => {
          const found = await this.#provider.keyVersion(tenant, version);
          return found ? Buffer.from(found) : undefined;
        });
        this.#ready.set(id, key);
      }),
    );
  }

  /** Opens sealed text whose key `prepare` fetched; a deleted key is a ContentErasedError. */
  open(text: string): unknown {
    const parsed = parseSealed(text);
    if (!parsed) throw new StoreError('sealed content is malformed: it does not open');
    const { tenant, version } = parsed;
    const key = version > 0 ? this.#ready.get(`${tenant}:${version}`) : undefined;
    if (!key)
      throw new ContentErasedError(
        tenant,
        version > 0
          ? `the content of tenant "${tenant}" was erased: its key ${version} is deleted`
          : `the content of tenant "${tenant}" was erased before it was written`,
      );
    const bytes = Buffer.from(parsed.data, 'base64');
    if (bytes.byteLength < IV_BYTES + TAG_BYTES) throw new StoreError('sealed content is truncated');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(`${SEALED_PREFIX}${tenant}:${version}:`));
      decipher.setAuthTag(bytes.subarray(bytes.byteLength - TAG_BYTES));
      const plain = Buffer.concat([
        decipher.update(bytes.subarray(IV_BYTES, bytes.byteLength - TAG_BYTES)),
        decipher.final(),
      ]);
      return JSON.parse(plain.toString('utf8'));
    } catch (cause) {
      throw new StoreError(
        `content sealed for tenant "${tenant}" with key ${version} does not open under that key (altered, or the provider's key ${version} is another)`,
        { cause },
      );
    }
  }
}
