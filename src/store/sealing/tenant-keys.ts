/**
 * Per-tenant content keys (decision 80, docs/data-lifecycle.md "Per-tenant keys"): what an
 * application supplies so the store seals a tenant's content with that tenant's own key, and
 * two providers of its own: keys held in memory (tests, demos) and keys from the environment
 * (`TURNKIT_TENANT_KEYS`). Deleting a tenant's key is crypto-shredding: its content, in the
 * store and in every backup of it, no longer opens.
 */
import { randomBytes } from 'node:crypto';
import { ArgumentError, ConfigError } from '../../errors.js';

/** One version of a tenant's AES-256 key. */
export interface TenantKey {
  /** 1, 2, 3, …: the version sealed content names; the highest is the one that seals. */
  version: number;
  /** 32 bytes. */
  key: Uint8Array;
}

/**
 * Where the store gets tenants' keys. The store caches what it gets (`cacheMs`), so the
 * provider is asked once per tenant and version, not once per row.
 */
export interface TenantKeyProvider {
  /**
   * The key a tenant's new content is sealed with: its current version. Undefined when the
   * tenant has no key (its key was deleted, or it was never given one): its content cannot be
   * written.
   */
  keyFor(tenant: string): Promise<TenantKey | undefined>;
  /** One version of the tenant's key, to open content sealed with it; undefined when deleted. */
  keyVersion(tenant: string, version: number): Promise<Uint8Array | undefined>;
  /**
   * Optional: calls `listener(tenant)` when a tenant's keys change in this process (a rotation,
   * a deletion), so the store's cache drops them at once instead of after `cacheMs`.
   */
  subscribe?(listener: (tenant: string) => void): () => void;
}

const TENANT = /^[^\s,:]{1,200}$/;

/** A tenant id TurnKit can name in sealed content: 1–200 characters, no spaces, commas or colons. */
export function checkTenant(tenant: unknown): string {
  if (typeof tenant !== 'string' || !TENANT.test(tenant))
    throw new ArgumentError(
      `a tenant must be 1–200 characters without spaces, commas or colons, got ${JSON.stringify(tenant)}`,
    );
  return tenant;
}

function checkKey(tenant: string, version: number, key: Uint8Array): Buffer {
  if (!Number.isSafeInteger(version) || version < 1)
    throw new ArgumentError(`tenant "${tenant}": a key version must be a positive integer, got ${version}`);
  if (!(key instanceof Uint8Array) || key.byteLength !== 32)
    throw new ArgumentError(
      `tenant "${tenant}" key ${version} must be 32 bytes (AES-256), got ${key instanceof Uint8Array ? key.byteLength : typeof key}`,
    );
  return Buffer.from(key);
}

/**
 * Tenant keys held in memory: for tests, demos and single-process applications (nothing
 * survives the process). With `generate`, a tenant seen for the first time gets a fresh key;
 * a deleted tenant stays deleted (it is never given a new key by accident). Generated keys live
 * in one process only: processes that share a store (workers, clients, the console) must share
 * their keys (`TURNKIT_TENANT_KEYS`, or a provider over a key service).
 */
export class MemoryTenantKeys implements TenantKeyProvider {
  readonly #keys = new Map<string, Map<number, Buffer>>();
  readonly #deleted = new Set<string>();
  readonly #listeners = new Set<(tenant: string) => void>();
  readonly #generate: boolean;

  constructor(options: { generate?: boolean; keys?: Record<string, readonly TenantKey[]> } = {}) {
    this.#generate = options.generate ?? false;
    for (const [tenant, keys] of Object.entries(options.keys ?? {}))
      for (const { version, key } of keys) this.#put(tenant, version, key);
  }

  #put(tenant: string, version: number, key: Uint8Array): void {
    checkTenant(tenant);
    const versions = this.#keys.get(tenant) ?? new Map<number, Buffer>();
    if (versions.has(version)) throw new ArgumentError(`tenant "${tenant}" already has key ${version}`);
    versions.set(version, checkKey(tenant, version, key));
    this.#keys.set(tenant, versions);
    this.#deleted.delete(tenant);
  }

  #changed(tenant: string): void {
    for (const listener of this.#listeners) listener(tenant);
  }

  /** Adds a new current key for the tenant (version: one more than its highest); returns it. */
  rotate(tenant: string, key: Uint8Array = randomBytes(32)): TenantKey {
    const versions = this.#keys.get(checkTenant(tenant));
    const version = versions ? Math.max(...versions.keys()) + 1 : 1;
    this.#put(tenant, version, key);
    this.#changed(tenant);
    return { version, key: Buffer.from(key) };
  }

  /** Crypto-shredding: forgets every key of the tenant. Its sealed content no longer opens. */
  delete(tenant: string): void {
    this.#keys.delete(checkTenant(tenant));
    this.#deleted.add(tenant);
    this.#changed(tenant);
  }

  async keyFor(tenant: string): Promise<TenantKey | undefined> {
    let versions = this.#keys.get(tenant);
    if (!versions && this.#generate && !this.#deleted.has(tenant)) {
      this.rotate(tenant);
      versions = this.#keys.get(tenant);
    }
    if (!versions) return undefined;
    const version = Math.max(...versions.keys());
    return { version, key: versions.get(version)! };
  }

  async keyVersion(tenant: string, version: number): Promise<Uint8Array | undefined> {
    return this.#keys.get(tenant)?.get(version);
  }

  subscribe(listener: (tenant: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

export const TENANT_KEYS_ENV = 'TURNKIT_TENANT_KEYS';

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * Tenant keys from text: `tenant:version:base64key` entries, comma-separated
 * (`acme:2:…,acme:1:…,globex:1:…`); each tenant's highest version seals. A malformed entry is a
 * ConfigError naming its place and tenant, never the key.
 */
export function parseTenantKeys(text: string, source = TENANT_KEYS_ENV): MemoryTenantKeys {
  const keys: Record<string, TenantKey[]> = {};
  const entries = text.split(',').map((entry) => entry.trim());
  if (entries.every((entry) => entry === ''))
    throw new ConfigError(`${source} is empty: give tenant:version:base64key entries`);
  entries.forEach((entry, index) => {
    const where = `${source}, entry ${index + 1}`;
    const match = /^([^:]+):(\d+):(.*)$/.exec(entry);
    if (!match) throw new ConfigError(`${where}: expected tenant:version:base64key`);
    const [, tenant, version, encoded] = match as unknown as [string, string, string, string];
    const key = BASE64.test(encoded) ? Buffer.from(encoded, 'base64') : undefined;
    if (!key || key.byteLength !== 32)
      throw new ConfigError(
        `${where} (tenant "${tenant}" key ${version}): the key must be 32 bytes in base64 (openssl rand -base64 32)` +
          (key ? `, got ${key.byteLength} bytes` : ', got text that is not base64'),
      );
    (keys[tenant] ??= []).push({ version: Number(version), key });
  });
  try {
    return new MemoryTenantKeys({ keys });
  } catch (error) {
    throw new ConfigError(`${source}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** `TURNKIT_TENANT_KEYS`'s keys (or `env`'s), or undefined when it is unset. */
export function tenantKeysFromEnv(
  env: Record<string, string | undefined> = process.env,
): MemoryTenantKeys | undefined {
  const text = env[TENANT_KEYS_ENV];
  return text === undefined || text === '' ? undefined : parseTenantKeys(text);
}
