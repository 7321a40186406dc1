/**
 * Issue 49, part 3: per-tenant keys and crypto-shredding, on SQLite and PostgreSQL with the
 * real dev server (the scripted model). Two tenants' turns run; their content is sealed in the
 * store's files and tables; a tenant's key rotates (old content opens, new content names the
 * new version); then one tenant's key is deleted: its content reads as ContentErasedError
 * through the client, the console API, a stream's resume and the evals' recorded cases, a turn
 * of that tenant waiting on an approval ends failed with that error, and the other tenant is
 * untouched.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import { createConsoleHandler } from '../../src/console.js';
import { ContentErasedError } from '../../src/errors.js';
import { recordedCases } from '../../src/eval/eval-case.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { MemoryTenantKeys } from '../../src/store/sealing/tenant-keys.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import type { Store } from '../../src/store/types.js';
import { describePostgres, dropPgTestSchema, pgTestSchema, pgTestUrl } from '../helpers/postgres.js';
import { requireTemporal } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit, tempSqliteUrl } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

const SECRET_A = `acme-secret-${randomBytes(6).toString('hex')}`;
const SECRET_B = `globex-secret-${randomBytes(6).toString('hex')}`;
const ACME = { id: 'ann', tenant: 'acme' };
const GLOBEX = { id: 'bob', tenant: 'globex' };

const lookup = defineTool({
  name: 'lookup_account',
  description: 'Looks an account up.',
  input: z.object({ account: z.string() }),
  execute: ({ account }) => ({ account, balance: 12 }),
});
const close = defineTool({
  name: 'close_account',
  description: 'Closes an account.',
  input: z.object({ account: z.string() }),
  needsApproval: true,
  execute: ({ account }) => ({ account, closed: true }),
});
/** Deletes the tenant's key while its turn runs: the turn's next write has no key to seal with. */
let shredding: (() => void) | undefined;
const forget = defineTool({
  name: 'forget_me',
  description: 'Erases the account holder.',
  input: z.object({ account: z.string() }),
  execute: () => {
    shredding?.();
    return { forgotten: true };
  },
});
const agent = defineAgent({
  name: 'tenant_agent',
  tools: [lookup, close, forget],
  limits: { maxIterations: 5 },
});
/** Calls a tool with the user's words as its argument, then answers with them: the secret is everywhere. */
const model = new ScriptedModel({
  tenant_agent: (request) => {
    const task = request.messages.find((message) => message.role === 'user')?.content ?? '';
    if (request.messages.some((message) => message.role === 'tool'))
      return { text: `Done for ${task}.`, usage: { inputTokens: 30, outputTokens: 6 } };
    const name = task.includes('Close ')
      ? 'close_account'
      : task.includes('Forget ')
        ? 'forget_me'
        : 'lookup_account';
    return {
      toolCalls: [{ name, arguments: { account: task } }],
      usage: { inputTokens: 20, outputTokens: 5 },
    };
  },
});

interface Backend {
  open(keys: MemoryTenantKeys): Promise<Store>;
  /** Every byte the store holds: the SQLite files, or every row of every table as text. */
  bytes(): Promise<string>;
  drop(): Promise<void>;
}

function sqliteBackend(): Backend {
  const path = tempSqliteUrl('tenant-keys');
  return {
    open: (keys) => SqliteStore.open(path, { tenantKeys: { provider: keys } }),
    async bytes() {
      return [path, `${path}-wal`]
        .filter((file) => existsSync(file))
        .map((file) => readFileSync(file).toString('latin1'))
        .join('\n');
    },
    drop: async () => undefined,
  };
}

function postgresBackend(): Backend {
  const schema = pgTestSchema();
  return {
    open: (keys) => PostgresStore.open(pgTestUrl(), { schema, tenantKeys: { provider: keys } }),
    async bytes() {
      const client = new pg.Client({ connectionString: pgTestUrl() });
      await client.connect();
      try {
        const tables = await client.query<{ table_name: string }>(
          `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`,
          [schema],
        );
        const dumps = await Promise.all(
          tables.rows.map(({ table_name }) =>
            client.query<{ row: string }>(`SELECT t::text AS row FROM "${schema}"."${table_name}" t`),
          ),
        );
        return dumps.flatMap((dump) => dump.rows.map((row) => row.row)).join('\n');
      } finally {
        await client.end();
      }
    },
    drop: () => dropPgTestSchema(schema),
  };
}

const erased = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error("read an erased tenant's content");
    },
    (error: unknown) => {
      expect(error).toBeInstanceOf(ContentErasedError);
      expect((error as ContentErasedError).tenant).toBe('acme');
      return error as ContentErasedError;
    },
  );

/** Where the store holds the text in plain: the bytes around each occurrence (none expected). */
function plainAt(bytes: string, text: string): string[] {
  const found: string[] = [];
  for (let at = bytes.indexOf(text); at >= 0; at = bytes.indexOf(text, at + 1))
    found.push(bytes.slice(Math.max(0, at - 160), at + text.length + 40));
  return found;
}

/** The types of a run's stream parts, read from the start or resumed after a cursor. */
async function collect(run: RunHandle, after?: string): Promise<{ type: string; cursor: string }[]> {
  const parts: { type: string; cursor: string }[] = [];
  for await (const part of run.stream(after ? { after } : {}))
    parts.push({ type: part.type, cursor: part.cursor });
  return parts;
}

function tenantKeySuite(name: string, backend: () => Backend, wrap: (name: string, fn: () => void) => void) {
  wrap(`privacy: per-tenant keys on ${name} (issue 49)`, () => {
    const keys = new MemoryTenantKeys({ generate: true });
    let db: Backend;
    let store: Store;
    let kit: TestKit;
    let server: Server;
    let api: string;
    let acme: RunHandle;
    let globex: RunHandle;
    /** Each run's first stream cursor, to resume after. */
    const cursors = new Map<string, string>();

    beforeAll(async () => {
      db = backend();
      store = await db.open(keys);
      kit = await startKit({ agents: [agent], model, store });
      const handler = createConsoleHandler({ client: kit.client });
      server = createServer((request, response) => void handler(request, response));
      await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
      api = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/`;
    });
    afterAll(async () => {
      await new Promise((closed) => server?.close(closed));
      await kit?.stop();
      await store?.close();
      await db?.drop();
    });

    it(`privacy: ${name}: two tenants' turns complete; their content is sealed in the store and reads plain through the client`, async () => {
      acme = await kit.client.run('tenant_agent', `Look up ${SECRET_A}`, {
        principal: ACME,
        subject: { type: 'account', id: 'a-1', prompt: `The account holder is ${SECRET_A}.` },
      });
      globex = await kit.client.run('tenant_agent', `Look up ${SECRET_B}`, { principal: GLOBEX });
      for (const [run, secret] of [
        [acme, SECRET_A],
        [globex, SECRET_B],
      ] as const) {
        const result = await run.result();
        expect(result.status).toBe('completed');
        expect(result.outputText).toContain(secret);
        const messages = await store.listMessages(run.conversationId);
        expect(JSON.stringify(messages)).toContain(secret);
        const parts = await collect(run);
        expect(parts.map((part) => part.type)).toContain('text.delta');
        cursors.set(run.turnId, parts[0]!.cursor);
        const [execution] = await store.listToolExecutions({ turnId: run.turnId });
        expect(execution!.arguments['account']).toContain(`Look up ${secret}`);
      }
      const conversation = await store.loadConversation(acme.conversationId);
      expect(conversation.metadata['turnkit_subject_prompt']).toContain(SECRET_A);
      const bytes = await db.bytes();
      expect(bytes).toContain('turnkit-sealed:1:acme:1:');
      expect(bytes).toContain('turnkit-sealed:1:globex:1:');
      expect(plainAt(bytes, SECRET_A)).toEqual([]);
      expect(plainAt(bytes, SECRET_B)).toEqual([]);
    });

    it(`privacy: ${name}: a rotated tenant key seals new content with the new version, and the old content still opens`, async () => {
      expect(keys.rotate('acme').version).toBe(2);
      const second = await kit.client.run('tenant_agent', `Look up ${SECRET_A} again`, { principal: ACME });
      expect((await second.result()).status).toBe('completed');
      const bytes = await db.bytes();
      expect(bytes).toContain('turnkit-sealed:1:acme:2:');
      expect(plainAt(bytes, SECRET_A)).toEqual([]);
      expect(JSON.stringify(await store.listMessages(acme.conversationId))).toContain(SECRET_A);
      expect(JSON.stringify(await store.listMessages(second.conversationId))).toContain(`${SECRET_A} again`);
    });

    it(`privacy: ${name}: after the tenant's key is deleted, its content is ContentErasedError through every door; the other tenant reads as before`, async () => {
      // A turn of the tenant waits on an approval when the key goes.
      const held = await kit.client.run('tenant_agent', `Close ${SECRET_A}`, { principal: ACME });
      await waitUntil(async () => (await held.pendingApprovals()).length > 0);
      // Another turn of the tenant deletes the key while it runs (its tool does): its next
      // write has no key, and the turn ends failed with the typed error, not in a retry loop.
      shredding = () => keys.delete('acme');
      const running = await kit.client.run('tenant_agent', `Forget ${SECRET_A}`, { principal: ACME });
      await erased(running.result());
      expect(await running.status()).toBe('failed');
      expect((await running.error())?.class).toBe('TurnKit::ContentErasedError');
      // The waiting turn's pending call: its arguments are content too.
      await erased(held.pendingApprovals());

      // The client.
      await erased(store.listMessages(acme.conversationId));
      await erased(acme.result());
      await erased((await kit.client.loadConversation(acme.conversationId)).messages());
      // The console API: 410 Gone, naming the error, never the content.
      const gone = await fetch(`${api}turns/${acme.turnId}/messages`);
      expect(gone.status).toBe(410);
      const body = await gone.text();
      expect(body).toContain('ContentErasedError');
      expect(body).not.toContain(SECRET_A);
      expect((await fetch(`${api}turns/${acme.turnId}/executions`)).status).toBe(410);
      // A stream's resume.
      await erased(collect(acme, cursors.get(acme.turnId)));
      // The evals: an erased run makes no recorded case; the other tenant's does.
      const cases = await recordedCases(store, { agent: 'tenant_agent' });
      expect(cases.map((c) => c.recordedTurnId)).toContain(globex.turnId);
      expect(cases.map((c) => c.input).join(' ')).not.toContain(SECRET_A);
      // The console's list of turns spans tenants: it still answers.
      expect((await fetch(`${api}turns`)).status).toBe(200);

      // The other tenant, through the same doors.
      expect((await globex.result()).outputText).toContain(SECRET_B);
      expect(JSON.stringify(await store.listMessages(globex.conversationId))).toContain(SECRET_B);
      const page = await fetch(`${api}turns/${globex.turnId}/messages`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain(SECRET_B);
      expect((await collect(globex, cursors.get(globex.turnId))).map((part) => part.type)).toContain(
        'finish',
      );

      // The waiting turn is cancelled: controls that need no content still work.
      await held.cancel();
      await waitUntil(async () => (await held.status()) === 'cancelled');
      // A new run of the tenant is refused at the door.
      await erased(kit.client.run('tenant_agent', `Look up ${SECRET_A}`, { principal: ACME }));
      // Three turns run to their end here: on a loaded machine that takes longer than the default.
    }, 180_000);
  });
}

const temporal = await requireTemporal();
tenantKeySuite('SQLite', sqliteBackend, (name, fn) => describe.skipIf(!temporal)(name, fn));
tenantKeySuite('PostgreSQL', postgresBackend, (name, fn) =>
  temporal ? describePostgres(name, fn) : describe.skip(name, fn),
);
