/**
 * Issue 49, part 3: the store's sealing on its own (SQLite files): the provider is asked once
 * per tenant and key version, not once per row; content of a conversation without a tenant
 * stays plain; a store opened without keys refuses sealed content; sealed text relabelled with
 * another tenant does not open; `TURNKIT_TENANT_KEYS` is parsed without ever echoing a key.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, ContentErasedError, StoreError } from '../../src/errors.js';
import { openStore } from '../../src/store/index.js';
import type { TenantKey, TenantKeyProvider } from '../../src/store/sealing/tenant-keys.js';
import { MemoryTenantKeys, parseTenantKeys } from '../../src/store/sealing/tenant-keys.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

/** A provider that counts how often the store asks it. */
class CountingKeys implements TenantKeyProvider {
  readonly inner = new MemoryTenantKeys({ generate: true });
  current = 0;
  versions = 0;
  async keyFor(tenant: string): Promise<TenantKey | undefined> {
    this.current++;
    return this.inner.keyFor(tenant);
  }
  async keyVersion(tenant: string, version: number): Promise<Uint8Array | undefined> {
    this.versions++;
    return this.inner.keyVersion(tenant, version);
  }
}

const ROWS = 60;

describe('privacy: per-tenant keys in the store (issue 49)', () => {
  it('privacy: writing and reading many rows asks the provider once per tenant and key version', async () => {
    const path = tempSqliteUrl('counting');
    const keys = new CountingKeys();
    const store = await SqliteStore.open(path, { tenantKeys: { provider: keys } });
    const conversation = await store.createConversation({
      agentName: 'a',
      metadata: { principal: 'tenant-1' },
    });
    for (let i = 0; i < ROWS; i++)
      await store.appendMessage({ conversationId: conversation.id, role: 'user', content: `message ${i}` });
    expect(keys.current).toBe(1);
    for (let page = 0; page < 3; page++)
      expect(await store.listMessages(conversation.id, { limit: ROWS })).toHaveLength(ROWS);
    expect(keys.versions).toBe(1);
    await store.close();

    // Another process (a fresh store on the same file) asks once too, and reads every row.
    const fresh = new CountingKeys();
    Object.assign(fresh, { inner: keys.inner });
    const reopened = await SqliteStore.open(path, { tenantKeys: { provider: fresh } });
    const messages = await reopened.listMessages(conversation.id);
    expect(messages.map((m) => m.content[0])).toContainEqual({ type: 'text', text: `message ${ROWS - 1}` });
    expect(fresh.versions).toBe(1);
    await reopened.close();
  });

  it('privacy: a conversation without a tenant stays plain; a store without keys refuses sealed content with a ConfigError', async () => {
    const path = tempSqliteUrl('plain');
    const store = await SqliteStore.open(path, {
      tenantKeys: { provider: new MemoryTenantKeys({ generate: true }) },
    });
    const plain = await store.createConversation({ agentName: 'a' });
    const sealed = await store.createConversation({ agentName: 'a', metadata: { principal: { id: 'p-1' } } });
    await store.appendMessage({ conversationId: plain.id, role: 'user', content: 'plain words' });
    await store.appendMessage({ conversationId: sealed.id, role: 'user', content: 'sealed words' });
    await store.close();

    const without = await openStore(path);
    expect((await without.listMessages(plain.id))[0]!.content).toEqual([
      { type: 'text', text: 'plain words' },
    ]);
    await expect(without.listMessages(sealed.id)).rejects.toThrow(ConfigError);
    await without.close();
  });

  it('privacy: sealed text relabelled with another tenant does not open; a deleted tenant cannot be written', async () => {
    const keys = new MemoryTenantKeys({ generate: true });
    const store = await SqliteStore.open(tempSqliteUrl('relabel'), { tenantKeys: { provider: keys } });
    const a = await store.createConversation({ agentName: 'a', metadata: { principal: 'ta' } });
    const b = await store.createConversation({ agentName: 'a', metadata: { principal: 'tb' } });
    await store.appendMessage({ conversationId: a.id, role: 'user', content: 'for a only' });
    await store.appendMessage({ conversationId: b.id, role: 'user', content: 'for b' });
    // Copy a's sealed row into b's conversation, relabelled as b's.
    const raw = (
      await store.statements().read(`SELECT content FROM turnkit_messages WHERE conversation_id = ?`, [a.id])
    )[0]!['content'] as string;
    await store
      .statements()
      .batch([], (c) =>
        c.query(`UPDATE turnkit_messages SET content = ? WHERE conversation_id = ?`, [
          raw.replace('turnkit-sealed:1:ta:', 'turnkit-sealed:1:tb:'),
          b.id,
        ]),
      );
    await expect(store.listMessages(b.id)).rejects.toThrow(StoreError);
    keys.delete('ta');
    const refused = await store
      .appendMessage({ conversationId: a.id, role: 'user', content: 'more' })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ContentErasedError);
    expect((refused as ContentErasedError).tenant).toBe('ta');
    await store.close();
  });

  it('privacy: openStore takes the keys of TURNKIT_TENANT_KEYS, as every CLI command does', async () => {
    const text = `acme:1:${randomBytes(32).toString('base64')}`;
    const path = tempSqliteUrl('env');
    const writer = await SqliteStore.open(path, { tenantKeys: { provider: parseTenantKeys(text) } });
    const conversation = await writer.createConversation({ agentName: 'a', metadata: { principal: 'acme' } });
    await writer.appendMessage({ conversationId: conversation.id, role: 'user', content: 'from the env' });
    await writer.close();
    const previous = process.env['TURNKIT_TENANT_KEYS'];
    process.env['TURNKIT_TENANT_KEYS'] = text;
    try {
      const reader = await openStore(path, { create: false });
      expect((await reader.listMessages(conversation.id))[0]!.content).toEqual([
        { type: 'text', text: 'from the env' },
      ]);
      await reader.close();
    } finally {
      if (previous === undefined) delete process.env['TURNKIT_TENANT_KEYS'];
      else process.env['TURNKIT_TENANT_KEYS'] = previous;
    }
  });

  it('privacy: TURNKIT_TENANT_KEYS is tenant:version:base64 entries; a bad entry is a ConfigError naming its place, never the key', async () => {
    const k1 = randomBytes(32).toString('base64');
    const k2 = randomBytes(32).toString('base64');
    const keys = parseTenantKeys(`acme:1:${k1}, acme:2:${k2},globex:1:${k1}`);
    expect((await keys.keyFor('acme'))?.version).toBe(2);
    expect(Buffer.from((await keys.keyVersion('acme', 1))!).toString('base64')).toBe(k1);
    expect(await keys.keyFor('initech')).toBeUndefined();
    const bad = (text: string) => {
      const error = (() => {
        try {
          parseTenantKeys(text);
        } catch (e) {
          return e as Error;
        }
        throw new Error(`accepted ${text}`);
      })();
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.message).not.toContain(k1);
      return error.message;
    };
    expect(bad(`acme:${k1}`)).toMatch(/entry 1: expected tenant:version:base64key/);
    expect(bad(`acme:1:${k1},globex:1:${randomBytes(16).toString('base64')}`)).toMatch(
      /entry 2 \(tenant "globex" key 1\).*got 16 bytes/,
    );
    expect(bad(`acme:1:${k1},acme:1:${k2}`)).toMatch(/already has key 1/);
  });
});
