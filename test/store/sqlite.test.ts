import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/errors.js';
import { openStore } from '../../src/store/index.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { describeStoreContract } from './contract.js';

const dir = () => mkdtempSync(join(tmpdir(), 'turnkit-sqlite-'));

describeStoreContract('sqlite', async () => {
  const store = SqliteStore.open(join(dir(), 'contract.sqlite'));
  return { store, close: () => store.close() };
});

describe('sqlite store files', () => {
  it('creates the file and its directory on first open; migrations applied twice are harmless', async () => {
    const path = join(dir(), 'nested', 'deeper', 'turnkit.sqlite');
    const first = await openStore(`sqlite:${path}`);
    const conversation = await first.createConversation({ agentName: 'a' });
    await first.close();
    const second = await openStore(path);
    expect((await second.loadConversation(conversation.id)).agentName).toBe('a');
    await second.close();
  });

  it('a file that is not a SQLite database is a StoreError that says what to do', async () => {
    const path = join(dir(), 'corrupt.sqlite');
    writeFileSync(
      path,
      'this is not a database, just some text that is long enough to have a header '.repeat(20),
    );
    await expect(openStore(path)).rejects.toThrow(StoreError);
    await expect(openStore(path)).rejects.toThrow(/not a usable SQLite database/);
  });

  it('a read-only database is a StoreError naming the file', async () => {
    if (process.getuid?.() === 0) {
      // root ignores file modes; make the directory unusable instead: a path under a regular file.
      const file = join(dir(), 'plain-file');
      writeFileSync(file, 'x');
      await expect(openStore(join(file, 'db.sqlite'))).rejects.toBeInstanceOf(StoreError);
      return;
    }
    const d = dir();
    const path = join(d, 'ro.sqlite');
    (await openStore(path)).close();
    chmodSync(path, 0o444);
    chmodSync(d, 0o555);
    const store = await openStore(path).catch((error) => error);
    expect(store).toBeInstanceOf(StoreError);
  });

  it('opening the memory: URL gives an empty, private store', async () => {
    const a = await openStore('memory:');
    const b = await openStore('memory:');
    const conversation = await a.createConversation({ agentName: 'x' });
    await expect(b.loadConversation(conversation.id)).rejects.toThrow(/not found/);
    expect(a.backend).toBe('memory');
  });
});
