/**
 * Issue 45, the deployment guide (docs/deployment.md), on real PostgreSQL and the real dev
 * server: the migration job, a `turnkit worker` on the guide's agents module (a real provider
 * by TURNKIT_MODEL, here a local server speaking OpenAI's Responses API) stopped by SIGTERM,
 * and the console behind authentication as examples/deployment/console-server.ts mounts it.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOpsServer, operatorsFrom } from '../../examples/deployment/console-server.js';
import { agents } from '../../examples/deployment/agents.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS_TABLE } from '../../src/store/index.js';
import { MIGRATIONS } from '../../src/store/sql/schema.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { temporalConnectConfig } from '../../src/temporal-config.js';
import { blocksNotFromSources, codeBlocks } from '../helpers/doc-snippets.js';
import { providerServer, sendReply } from '../helpers/openai-sse.js';
import { describePostgres, dropPgTestSchema, pgTestSchema, pgTestUrl } from '../helpers/postgres.js';
import { connectClient, uniqueTaskQueue } from '../helpers/temporal.js';

const root = resolve(import.meta.dirname, '../..');
const tsx = import.meta.resolve('tsx');
const TOKEN = 'a-long-random-operator-token-0123456789abcdef';

/** The provider: one short answer per request. */
const provider: Server = providerServer((body, res) =>
  sendReply(res, body, 200, {
    id: 'resp_1',
    object: 'response',
    created_at: 1_700_000_000,
    status: 'completed',
    model: 'gpt-deploy',
    output: [
      {
        type: 'message',
        id: 'msg_1',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Order A-1001 is on its way.', annotations: [] }],
      },
    ],
    usage: { input_tokens: 20, output_tokens: 8, total_tokens: 28 },
  }),
);

/** A process of the guide: its output, and its exit once it ends (or is stopped). */
function start(args: string[], env: Record<string, string | undefined>) {
  const child = spawn(process.execPath, ['--import', tsx, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((done) => child.on('close', (code) => done(code)));
  return { child, exited, output: () => output };
}

describePostgres('first hour: a production deployment on PostgreSQL', () => {
  const schema = pgTestSchema();
  const databaseUrl = `${pgTestUrl()}?schema=${schema}`;
  const taskQueue = uniqueTaskQueue('deployment');
  let providerUrl = '';
  let client: TurnKitClient;
  let store: PostgresStore | undefined;
  let turnId = '';

  beforeAll(async () => {
    await new Promise<void>((ready) => provider.listen(0, '127.0.0.1', ready));
    providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    await store?.close();
    await dropPgTestSchema(schema);
    await new Promise<void>((closed) => provider.close(() => closed()));
  });

  it('first hour: the migration job applies every migration to a new schema once; run again it applies nothing', async () => {
    const first = start(['examples/deployment/migrate.ts'], { TURNKIT_DATABASE_URL: databaseUrl });
    expect(await first.exited).toBe(0);
    // Every version the schema defines, in order (numbers are handed out ahead of merges).
    const all = MIGRATIONS.map((migration) => migration.version).sort((a, b) => a - b);
    expect(first.output().trim()).toBe(
      `migrate: applied ${all.join(', ')}; the schema is at version ${LATEST_SCHEMA_VERSION}`,
    );
    const again = start(['examples/deployment/migrate.ts'], { TURNKIT_DATABASE_URL: databaseUrl });
    expect(await again.exited).toBe(0);
    expect(again.output().trim()).toBe(
      `migrate: nothing to apply; the schema is at version ${LATEST_SCHEMA_VERSION} (this TurnKit: ${LATEST_SCHEMA_VERSION})`,
    );
    const db = new pg.Client({ connectionString: pgTestUrl() });
    await db.connect();
    try {
      const rows = await db.query(`SELECT version FROM "${schema}".${MIGRATIONS_TABLE} ORDER BY version`);
      expect(rows.rows.map((row: { version: number }) => Number(row.version))).toEqual(all);
    } finally {
      await db.end();
    }
    const refused = start(['examples/deployment/migrate.ts'], { TURNKIT_DATABASE_URL: '.turnkit/x.sqlite' });
    expect(await refused.exited).toBe(2);
    expect(refused.output().trim()).toBe(
      'migrate: set TURNKIT_DATABASE_URL to the postgres:// URL of the store',
    );
  });

  it('first hour: `turnkit worker --agents examples/deployment/agents.ts` runs a turn on PostgreSQL with TURNKIT_MODEL, and SIGTERM stops it cleanly', async () => {
    const worker = start(['src/cli/bin.ts', 'worker', '--agents', 'examples/deployment/agents.ts'], {
      TURNKIT_DATABASE_URL: databaseUrl,
      TURNKIT_TASK_QUEUE: taskQueue,
      TURNKIT_MODEL: 'openai:gpt-deploy',
      OPENAI_API_KEY: 'sk-deploy',
      OPENAI_BASE_URL: providerUrl,
    });
    await expect.poll(() => worker.output(), { timeout: 60_000 }).toContain('turnkit worker: agents support');
    store = await PostgresStore.open(databaseUrl);
    client = new TurnKitClient({
      store,
      agents,
      temporal: await connectClient(),
      taskQueue,
      defaultModel: 'openai:gpt-deploy',
    });
    const run = await client.run('support', 'Where is A-1001?', { principal: { user: 'ada' } });
    turnId = run.turnId;
    const turn = await run.result();
    expect([turn.status, turn.outputText]).toEqual(['completed', 'Order A-1001 is on its way.']);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  }, 120_000);

  it('first hour: the console behind authentication: no or wrong credentials get a Basic challenge, an operator reads the turns and is the principal', async () => {
    const digest = createHash('sha256').update(TOKEN).digest('hex');
    const server = createOpsServer({ client, operators: operatorsFrom(`ana=${digest}`) });
    await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const basic = (user: string, token: string) => ({
      authorization: `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`,
    });
    try {
      const anonymous = await fetch(`${base}/ops/turnkit/api/turns`);
      expect([anonymous.status, anonymous.headers.get('www-authenticate')]).toEqual([
        401,
        'Basic realm="TurnKit console", charset="UTF-8"',
      ]);
      const wrong = await fetch(`${base}/ops/turnkit/api/turns`, { headers: basic('ana', 'guess') });
      expect(wrong.status).toBe(401);
      const stranger = await fetch(`${base}/ops/turnkit/api/turns`, { headers: basic('mallory', TOKEN) });
      expect(stranger.status).toBe(401);

      const turns = await fetch(`${base}/ops/turnkit/api/turns`, { headers: basic('ana', TOKEN) });
      expect(turns.status).toBe(200);
      const listed = ((await turns.json()) as { turns: { id: string; status: string }[] }).turns;
      expect(listed.map((t) => [t.id, t.status])).toEqual([[turnId, 'completed']]);
      const info = await fetch(`${base}/ops/turnkit/api/info`, { headers: basic('ana', TOKEN) });
      expect(((await info.json()) as { principal: unknown }).principal).toEqual({
        id: 'ana',
        role: 'operator',
      });
      expect((await fetch(`${base}/admin`, { headers: basic('ana', TOKEN) })).status).toBe(404);
    } finally {
      await new Promise<void>((closed) => server.close(() => closed()));
    }
    expect(() => operatorsFrom('ana=not-a-digest')).toThrow(
      'TURNKIT_CONSOLE_OPERATORS: "ana" needs <name>=<sha256 hex of the token>',
    );
    expect(() => operatorsFrom('')).toThrow('TURNKIT_CONSOLE_OPERATORS names no operator');
  });
});

describe('first hour: the deployment guide', () => {
  it('first hour: every TypeScript block of docs/deployment.md is a piece of examples/deployment', () => {
    expect(
      blocksNotFromSources('docs/deployment.md', [
        'examples/deployment/agents.ts',
        'examples/deployment/migrate.ts',
        'examples/deployment/console-server.ts',
        'examples/deployment/ops.ts',
      ]),
    ).toEqual([]);
  });

  it("first hour: docs/deployment.md's Temporal Cloud profiles load through TurnKit's connection settings as written", () => {
    const [toml] = codeBlocks('docs/deployment.md', ['toml']);
    const dir = mkdtempSync(join(tmpdir(), 'turnkit-profile-'));
    // The mTLS profile names certificate files; here they are stand-ins in a temp directory.
    writeFileSync(join(dir, 'temporal-client.pem'), 'CERT');
    writeFileSync(join(dir, 'temporal-client.key'), 'KEY');
    writeFileSync(join(dir, 'temporal.toml'), toml!.replaceAll('/etc/turnkit/', `${dir}/`));
    const env = { TEMPORAL_CONFIG_FILE: join(dir, 'temporal.toml') };
    const apiKey = temporalConnectConfig({ profile: 'cloud', env });
    expect(apiKey.namespace).toBe('support-prod.a1b2c');
    expect(apiKey.connectionOptions.address).toBe('us-east-1.aws.api.temporal.io:7233');
    expect(apiKey.connectionOptions.apiKey).toContain('your API key');
    expect(apiKey.connectionOptions.tls).toBeTruthy();
    const fromEnv = temporalConnectConfig({
      profile: 'cloud',
      env: { ...env, TEMPORAL_API_KEY: 'from-secret' },
    });
    expect(fromEnv.connectionOptions.apiKey).toBe('from-secret');
    const mtls = temporalConnectConfig({ profile: 'cloud-mtls', env });
    expect(mtls.connectionOptions.address).toBe('support-prod.a1b2c.tmprl.cloud:7233');
    const tls = mtls.connectionOptions.tls as { clientCertPair?: { crt: Uint8Array; key: Uint8Array } };
    const text = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? []).toString();
    expect([text(tls.clientCertPair?.crt), text(tls.clientCertPair?.key)]).toEqual(['CERT', 'KEY']);
  });
});
