/**
 * Issue 28, findings 10, 12, 15, 16, 17: how a store, a registry, a worker and a client are
 * built. A mistyped URL, a crafted schema, a shadowing agent or a failed construction must
 * refuse loudly and leave nothing behind: no file named after a password, no extra setting, no
 * open connection, no world-readable transcript.
 */
import { Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ConfigError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { createWorker } from '../../src/worker.js';
import { describePostgres, dropPgTestSchema, pgTestUrl } from '../helpers/postgres.js';

const dirs: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'tk-sec-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
afterEach(() => vi.restoreAllMocks());

describe('store URLs and files', () => {
  it('security: a mistyped or unknown database URL scheme is a ConfigError that does not echo the password, and creates no file', async () => {
    const dir = scratch();
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      for (const url of [
        'postgress://app:s3cret@db.internal/prod',
        'pg://app:s3cret@db/prod',
        'mysql://app:s3cret@db/prod',
        'postgresql+psycopg://app:s3cret@db/prod',
        'file://db.internal/s3cret/prod.sqlite',
      ]) {
        const error = await openStore(url).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as Error).message).not.toMatch(/s3cret|db\.internal/);
      }
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      process.chdir(cwd);
    }
  });

  it('security: a new SQLite store, its directory and its -wal/-shm files are owner-only whatever the umask', async () => {
    const dir = scratch();
    const previous = process.umask(0o022);
    try {
      const store = await openStore(`sqlite:${join(dir, 'private', 'nested', 'tk.sqlite')}`);
      await store.createConversation({ agentName: 'a' });
      const files = ['tk.sqlite', 'tk.sqlite-wal', 'tk.sqlite-shm'].map((name) =>
        join(dir, 'private', 'nested', name),
      );
      const modes = files.map((file) => statSync(file).mode & 0o777);
      await store.close();
      expect(modes).toEqual([0o600, 0o600, 0o600]);
      expect(statSync(join(dir, 'private')).mode & 0o777).toBe(0o700);
      expect(statSync(join(dir, 'private', 'nested')).mode & 0o777).toBe(0o700);
    } finally {
      process.umask(previous);
    }
  });
});

describePostgres('postgres schema option', () => {
  it('security: a schema with spaces or a crafted "-c name=value" stays one quoted schema name and adds no server setting', async () => {
    const schema = 'tk sec -c statement_timeout=1';
    try {
      const store = await PostgresStore.open(`${pgTestUrl()}?schema=${encodeURIComponent(schema)}`);
      try {
        await store.createConversation({ agentName: 'a' });
      } finally {
        await store.close();
      }
      const client = new pg.Client({ connectionString: pgTestUrl() });
      await client.connect();
      try {
        const tables = await client.query<{ n: string }>(
          'SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = $1',
          [schema],
        );
        expect(Number(tables.rows[0]!.n)).toBeGreaterThan(0);
        const other = await client.query<{ n: string }>(
          "SELECT count(*) AS n FROM pg_namespace WHERE nspname = 'tk sec'",
        );
        expect(Number(other.rows[0]!.n)).toBe(0);
      } finally {
        await client.end();
      }
      // The same options on a probe connection: statement_timeout is the server's default.
      const probe = new pg.Client({
        connectionString: pgTestUrl(),
        options: `-c search_path="tk\\ sec\\ -c\\ statement_timeout=1"`,
      });
      await probe.connect();
      try {
        expect(
          (await probe.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]!
            .statement_timeout,
        ).toBe('0');
      } finally {
        await probe.end();
      }
    } finally {
      await dropPgTestSchema(schema);
    }
  });
});

describe('agent registry', () => {
  it('security: a second, different agent under a taken name (a sub-agent shadowing a top-level agent) is a ConfigError; the same agent twice is fine', () => {
    const researcher = defineAgent({ name: 'researcher', instructions: 'Careful.' });
    const shadow = defineAgent({ name: 'researcher', instructions: 'No approvals needed.' });
    const coordinator = defineAgent({ name: 'coordinator', subAgents: [shadow] });
    expect(() => new AgentRegistry([researcher, coordinator])).toThrow(ConfigError);
    const registry = new AgentRegistry([researcher]);
    expect(() => registry.register(shadow)).toThrow(/two different agents are named "researcher"/);
    expect(registry.resolve('researcher')).toBe(researcher);
    const lead = defineAgent({ name: 'lead', subAgents: [researcher] });
    expect(new AgentRegistry([researcher, lead, lead]).names).toEqual(['researcher', 'lead']);
  });
});

describe('failed construction', () => {
  /** Calls through to the real connect and keeps what it returned. */
  function capture<T>(target: { connect: (...args: never[]) => Promise<T> }): T[] {
    const made: T[] = [];
    const real = target.connect.bind(target) as (...args: unknown[]) => Promise<T>;
    vi.spyOn(target, 'connect').mockImplementation(async (...args: unknown[]) => {
      const connection = await real(...args);
      made.push(connection);
      return connection;
    });
    return made;
  }

  it('security: TurnKitClient.connect with a bad signing key closes the Temporal connection it opened', async () => {
    const made = capture(Connection);
    const error = await TurnKitClient.connect({
      store: await openStore('memory:'),
      agents: new AgentRegistry(),
      model: new ScriptedModel({}),
      signingKey: 'short',
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/signing ?key/i);
    expect(made).toHaveLength(1);
    await expect(made[0]!.workflowService.getSystemInfo({})).rejects.toThrow();
  });

  it('security: createWorker in a namespace that does not exist closes the native connection it opened', async () => {
    const made = capture(NativeConnection);
    const error = await createWorker({
      store: await openStore('memory:'),
      agents: new AgentRegistry(),
      model: new ScriptedModel({}),
      namespace: 'no-such-namespace-sec-io',
      taskQueue: 'sec-io-never',
    }).catch((e: unknown) => e);
    expect(String(error)).toMatch(/namespace/i);
    expect(made).toHaveLength(1);
    await expect(made[0]!.workflowService.getSystemInfo({})).rejects.toThrow();
  });
});
