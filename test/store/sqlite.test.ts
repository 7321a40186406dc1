import { spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/errors.js';
import { openStore } from '../../src/store/index.js';
import { MIGRATIONS } from '../../src/store/sql/schema.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { defineTransactionTests } from './concurrency/transactions.js';
import { describeStoreContract } from './contract.js';

const dirs: string[] = [];
const dir = () => {
  const made = mkdtempSync(join(tmpdir(), 'turnkit-sqlite-'));
  dirs.push(made);
  return made;
};
afterAll(() => {
  for (const made of dirs) rmSync(made, { recursive: true, force: true });
});

describeStoreContract('sqlite', () => SqliteStore.open(join(dir(), 'contract.sqlite')));

describe('sqlite transactions', () => {
  defineTransactionTests('sqlite', async () => {
    const path = join(dir(), 'tx.sqlite');
    const store = await SqliteStore.open(path);
    return { store, second: () => SqliteStore.open(path), close: () => store.close() };
  });
});

const migrationsOf = (path: string) => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare('SELECT version, name FROM turnkit_schema_migrations ORDER BY version').all();
  } finally {
    db.close();
  }
};
const expectedMigrations = MIGRATIONS.map((m) => ({ version: m.version, name: m.name }));

/** Runs `script` (a TypeScript file) in a child process; resolves with its exit code and output. */
function runChild(
  script: string,
  args: string[],
  options: { uid?: number; gid?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    // The child loads its modules as the current user and only then drops to `uid`/`gid`
    // (TURNKIT_TEST_DROP_TO), so the checkout itself need not be readable by that user.
    const drop =
      options.uid !== undefined
        ? { TURNKIT_TEST_DROP_TO: `${options.uid}:${options.gid ?? options.uid}` }
        : {};
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...drop },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const opener = fileURLToPath(new URL('./concurrency/open-sqlite.ts', import.meta.url));

describe('sqlite store files', () => {
  it('creates the file and its parent directories on first open, through every URL form', async () => {
    const base = dir();
    const forms = [
      join(base, 'plain', 'a.sqlite'),
      `sqlite:${join(base, 'sqlite-prefix', 'b.sqlite')}`,
      `file:${join(base, 'file-prefix', 'deeper', 'c.sqlite')}`,
      `file://${join(base, 'file-url', 'd.sqlite')}`,
    ];
    for (const url of forms) {
      const store = await openStore(url);
      expect(store.backend).toBe('sqlite');
      await store.createConversation({ agentName: 'a' });
      await store.close();
    }
    for (const path of [
      'plain/a.sqlite',
      'sqlite-prefix/b.sqlite',
      'file-prefix/deeper/c.sqlite',
      'file-url/d.sqlite',
    ]) {
      expect(existsSync(join(base, path))).toBe(true);
    }
  });

  it('TURNKIT_DATABASE_URL is the default location', async () => {
    const path = join(dir(), 'env', 'from-env.sqlite');
    const previous = process.env['TURNKIT_DATABASE_URL'];
    process.env['TURNKIT_DATABASE_URL'] = `sqlite:${path}`;
    try {
      const store = await openStore();
      expect(store.backend).toBe('sqlite');
      await store.close();
      expect(existsSync(path)).toBe(true);
    } finally {
      if (previous === undefined) delete process.env['TURNKIT_DATABASE_URL'];
      else process.env['TURNKIT_DATABASE_URL'] = previous;
    }
  });

  it('migrations applied twice are harmless: the rows stay, each version is recorded once', async () => {
    const path = join(dir(), 'twice.sqlite');
    const first = await SqliteStore.open(path);
    const conversation = await first.createConversation({ agentName: 'a' });
    await first.appendMessage({ conversationId: conversation.id, role: 'user', content: 'kept' });
    await first.close();
    const second = await SqliteStore.open(path);
    const third = await SqliteStore.open(path);
    expect((await second.loadConversation(conversation.id)).agentName).toBe('a');
    expect(await third.listMessages(conversation.id)).toHaveLength(1);
    await second.close();
    await third.close();
    expect(migrationsOf(path)).toEqual(expectedMigrations);
  });

  it('uses WAL mode and the spec §2.8 unique indexes', async () => {
    const path = join(dir(), 'schema.sqlite');
    await (await SqliteStore.open(path)).close();
    const db = new Database(path, { readonly: true });
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      const unique = (
        db
          .prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND sql LIKE 'CREATE UNIQUE%'`)
          .all() as { name: string }[]
      ).map((r) => r.name);
      expect(unique.sort()).toEqual(
        [
          'turnkit_deliveries_key',
          'turnkit_messages_conversation_sequence',
          'turnkit_tool_executions_call',
          'turnkit_waits_edge',
        ].sort(),
      );
    } finally {
      db.close();
    }
  });

  it('a database from a newer TurnKit is refused with a StoreError', async () => {
    const path = join(dir(), 'newer.sqlite');
    await (await SqliteStore.open(path)).close();
    const db = new Database(path);
    db.prepare(
      `INSERT INTO turnkit_schema_migrations (version, name, applied_at) VALUES (999, 'future', '2100-01-01T00:00:00.000Z')`,
    ).run();
    db.close();
    const error = await SqliteStore.open(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toMatch(/version 999, newer than this TurnKit/);
  });

  it('two processes migrating the same new file at once: both open it, each migration is applied once', async () => {
    for (let round = 0; round < 3; round++) {
      const base = dir();
      const path = join(base, 'racing', 'new.sqlite');
      const barrier = join(base, 'go');
      const children = [runChild(opener, [path, barrier]), runChild(opener, [path, barrier])];
      await new Promise((resolve) => setTimeout(resolve, 1200));
      writeFileSync(barrier, '');
      const results = await Promise.all(children);
      for (const result of results) expect(result.code, result.stderr).toBe(0);
      const applied = results.map(
        (r) => JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { applied: number[] },
      );
      // Exactly one of the two applied the schema; the other found it there.
      expect(applied.map((a) => a.applied.length).sort()).toEqual([0, MIGRATIONS.length]);
      expect(migrationsOf(path)).toEqual(expectedMigrations);
    }
  }, 60_000);

  it('a file that is not a SQLite database is a StoreError that says what to do', async () => {
    const path = join(dir(), 'corrupt.sqlite');
    writeFileSync(
      path,
      'this is not a database, just some text that is long enough to have a header\n'.repeat(20),
    );
    const error = await openStore(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toContain(path);
    expect((error as Error).message).toMatch(/is not a SQLite database/);
    expect((error as Error).message).toMatch(/move the file away or delete it/);
    expect((error as StoreError).retryable).toBe(false);
  });

  it('a directory at the path is a StoreError', async () => {
    const path = dir();
    await expect(openStore(path)).rejects.toThrow(/is a directory, not a SQLite database/);
  });

  it('a path under a regular file is a StoreError naming the directory', async () => {
    const file = join(dir(), 'plain-file');
    writeFileSync(file, 'x');
    const error = await openStore(join(file, 'db.sqlite')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toMatch(/cannot create the directory/);
  });

  // Root ignores file modes, so as root the read-only checks run in a child process that has
  // dropped to an unprivileged user.
  const asRoot = process.getuid?.() === 0;
  const unprivileged = { uid: 65534, gid: 65534 };

  async function expectReadOnly(path: string, prepare: () => void): Promise<void> {
    prepare();
    if (!asRoot) {
      const error = await openStore(path).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreError);
      expect((error as Error).message).toMatch(/read-only/);
      expect((error as Error).message).toContain(path);
      return;
    }
    const result = await runChild(opener, [path, '-'], unprivileged);
    expect(result.code, result.stderr).toBe(2);
    const reported = JSON.parse(result.stdout.trim().split('\n').at(-1)!) as {
      name: string;
      message: string;
    };
    expect(reported.name).toBe('StoreError');
    expect(reported.message).toMatch(/read-only/);
    expect(reported.message).toContain(path);
  }

  it('a read-only database file is a StoreError saying so', async () => {
    const d = dir();
    const path = join(d, 'ro.sqlite');
    const store = await SqliteStore.open(path);
    await store.createConversation({ agentName: 'a' });
    await store.close();
    await expectReadOnly(path, () => {
      if (asRoot) chownSync(d, unprivileged.uid, unprivileged.gid);
      chmodSync(path, 0o444);
    });
  }, 30_000);

  it('a read-only directory for a new database is a StoreError saying so', async () => {
    const d = dir();
    const path = join(d, 'new.sqlite');
    await expectReadOnly(path, () => chmodSync(d, 0o555));
  }, 30_000);
});
