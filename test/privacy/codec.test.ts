/**
 * Issue 49, part 2: TurnKit's payload encryption on the real dev server (SQLite store, the
 * scripted model). A planted secret travels in a turn's task, an approval's note and its
 * principal; with the codec on, no Temporal history of the turn holds it in plain bytes, keys
 * rotate under a running turn, and the codec server decodes what the history holds.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@temporalio/client';
import type { Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { parseCodecKeys, payloadCodecsFromEnv } from '../../src/codec/codec-keys.js';
import { createCodecHandler } from '../../src/codec/codec-server.js';
import type { CodecKey } from '../../src/codec/encryption-codec.js';
import { EncryptionCodec, KEY_ID_METADATA } from '../../src/codec/encryption-codec.js';
import { CodecKeyError, ConfigError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { turnWorkflowId } from '../../src/workflows/contract.js';
import { connectClient, connectNative, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

const SECRET = `planted-secret-${randomBytes(6).toString('hex')}`;
const keyA: CodecKey = { id: 'a-2026', key: randomBytes(32) };
const keyB: CodecKey = { id: 'b-2027', key: randomBytes(32) };
const UI_ORIGIN = 'http://127.0.0.1:8233';

const lookup = defineTool({
  name: 'lookup_account',
  description: 'Looks an account up.',
  input: z.object({ account: z.string() }),
  needsApproval: true,
  execute: ({ account }) => ({ account, balance: 12 }),
});
const agent = defineAgent({ name: 'privacy_agent', tools: [lookup], limits: { maxIterations: 5 } });
const model = new ScriptedModel({
  privacy_agent: (request) =>
    request.messages.some((message) => message.role === 'tool')
      ? { text: 'The balance is 12.', usage: { inputTokens: 30, outputTokens: 6 } }
      : {
          toolCalls: [{ name: 'lookup_account', arguments: { account: 'acct-1' } }],
          usage: { inputTokens: 20, outputTokens: 5 },
        },
});

let store: Store;
let plainTemporal: Client;
const taskQueue = uniqueTaskQueue('privacy-codec');
const agents = new AgentRegistry([agent]);

async function startWorker(
  payloadCodecs?: PayloadCodec[],
): Promise<{ worker: TurnKitWorker; done: Promise<void> }> {
  const worker = await createWorker({
    store,
    agents,
    model,
    connection: await connectNative(),
    taskQueue,
    ...(payloadCodecs ? { payloadCodecs } : {}),
  });
  return { worker, done: worker.run() };
}

function turnKitClient(payloadCodecs?: PayloadCodec[]): TurnKitClient {
  const temporal = new Client({
    connection: plainTemporal.connection,
    namespace: plainTemporal.options.namespace,
    ...(payloadCodecs ? { dataConverter: { payloadCodecs } } : {}),
  });
  return new TurnKitClient({ store, agents, temporal, taskQueue });
}

/** Starts a turn whose task holds the secret and waits until its tool call awaits approval. */
async function startSecretTurn(client: TurnKitClient) {
  const run = await client.run('privacy_agent', `Look up the account of ${SECRET}`);
  await waitUntil(async () => (await run.pendingApprovals()).length > 0);
  return run;
}

/** Approves with the secret in the note and the principal, and waits for the turn's end. */
async function finishSecretTurn(run: Awaited<ReturnType<typeof startSecretTurn>>) {
  const [pending] = await run.pendingApprovals();
  await run.approve(pending!.toolCallId, { note: `ok for ${SECRET}`, principal: { name: SECRET } });
  return run.result();
}

/** The turn's whole history as the server serializes it. */
async function historyBytes(turnId: string): Promise<Buffer> {
  const history = await plainTemporal.workflow.getHandle(turnWorkflowId(turnId)).fetchHistory();
  return Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
}

/**
 * Every payload of a history that passes through the data converter: not the search
 * attributes (plain by design, docs/data-lifecycle.md) nor the SDK's own marker bookkeeping
 * (a patch's id, a local activity's sequence number and type).
 */
const PLAIN_BY_DESIGN = /(searchAttributes|markerRecordedEventAttributes\.details\.(data|patch-data))$/;
async function historyPayloads(turnId: string): Promise<Payload[]> {
  const history = await plainTemporal.workflow.getHandle(turnWorkflowId(turnId)).fetchHistory();
  const found: Payload[] = [];
  const walk = (value: unknown, path: string): void => {
    if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return;
    if (PLAIN_BY_DESIGN.test(path)) return;
    const record = value as Record<string, unknown>;
    if (record['metadata'] && typeof record['metadata'] === 'object' && 'data' in record) {
      found.push(record as Payload);
      return;
    }
    for (const [key, child] of Object.entries(record)) walk(child, `${path}.${key}`);
  };
  walk(history.events, 'events');
  return found;
}

const keyIdOf = (payload: Payload) => {
  const id = payload.metadata?.[KEY_ID_METADATA];
  return id ? Buffer.from(id).toString('utf8') : undefined;
};

describe.skipIf(!(await requireTemporal()))('privacy: encrypted payloads (issue 49)', () => {
  beforeAll(async () => {
    store = await openStore(tempSqliteUrl('privacy'));
    plainTemporal = await connectClient();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('privacy: without the codec, the planted secret is in the turn history in plain bytes (the control)', async () => {
    const { worker, done } = await startWorker();
    try {
      const run = await startSecretTurn(turnKitClient());
      expect((await finishSecretTurn(run)).status).toBe('completed');
      expect((await historyBytes(run.turnId)).includes(SECRET)).toBe(true);
    } finally {
      worker.shutdown();
      await done;
    }
  });

  let rotatedTurnId: string;
  let codecAB: EncryptionCodec;

  it('privacy: with the codec on, the turn completes and no history holds the secret; a key rotation mid-run leaves every run readable and completing', async () => {
    const codecA = new EncryptionCodec([keyA]);
    const first = await startWorker([codecA]);
    // A turn started under key A stops at its approval; the worker restarts with B current, A listed.
    const before = await startSecretTurn(turnKitClient([codecA]));
    first.worker.shutdown();
    await first.done;
    codecAB = new EncryptionCodec([keyB, keyA]);
    const second = await startWorker([codecAB]);
    try {
      const rotatedClient = turnKitClient([codecAB]);
      const resumed = await rotatedClient.handle(before.turnId);
      expect((await finishSecretTurn(resumed)).status).toBe('completed');
      const after = await startSecretTurn(rotatedClient);
      expect((await finishSecretTurn(after)).status).toBe('completed');
      rotatedTurnId = before.turnId;

      for (const turnId of [before.turnId, after.turnId]) {
        expect((await historyBytes(turnId)).includes(SECRET)).toBe(false);
        const payloads = await historyPayloads(turnId);
        expect(payloads.length).toBeGreaterThan(0);
        // Every payload is sealed, and opens with the rotated key list: the secret is in there.
        expect(payloads.every((payload) => keyIdOf(payload) !== undefined)).toBe(true);
        const opened = await codecAB.decode(payloads);
        expect(opened.some((payload) => Buffer.from(payload.data ?? []).includes(SECRET))).toBe(true);
      }
      // The turn that spanned the rotation holds payloads of both keys; the new one only B's.
      expect(new Set((await historyPayloads(before.turnId)).map(keyIdOf))).toEqual(
        new Set([keyA.id, keyB.id]),
      );
      expect(new Set((await historyPayloads(after.turnId)).map(keyIdOf))).toEqual(new Set([keyB.id]));
      // Without key A listed, the older payloads are a typed error naming the key.
      const error = await new EncryptionCodec([keyB])
        .decode(await historyPayloads(before.turnId))
        .catch((e) => e);
      expect(error).toBeInstanceOf(CodecKeyError);
      expect((error as CodecKeyError).keyId).toBe(keyA.id);
      expect((error as Error).message).toContain(`"${keyA.id}"`);
    } finally {
      second.worker.shutdown();
      await second.done;
    }
  });

  describe('privacy: the codec server', () => {
    let server: Server;
    let url: string;
    beforeAll(async () => {
      const handler = createCodecHandler({
        codecs: [codecAB],
        authenticate: (request) => (request.headers.authorization === 'Bearer ops-token' ? 'ops' : undefined),
      });
      server = createServer((request, response) => void handler(request, response));
      await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise<void>((closed) => server.close(() => closed())));

    const post = (path: string, body: unknown, headers: Record<string, string>) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-namespace': 'default', ...headers },
        body: JSON.stringify(body),
      });

    it('privacy: decodes a payload from the history over HTTP, and refuses without credentials and from a foreign origin', async () => {
      const payloads = await historyPayloads(rotatedTurnId);
      const opened = await codecAB.decode(payloads);
      const secretIndex = opened.findIndex((payload) => Buffer.from(payload.data ?? []).includes(SECRET));
      const sealed = payloads[secretIndex]!;
      const body = {
        payloads: [
          {
            metadata: Object.fromEntries(
              Object.entries(sealed.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v!).toString('base64')]),
            ),
            data: Buffer.from(sealed.data!).toString('base64'),
          },
        ],
      };
      const ok = await post('/decode', body, { authorization: 'Bearer ops-token', origin: UI_ORIGIN });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('access-control-allow-origin')).toBe(UI_ORIGIN);
      expect(ok.headers.get('access-control-allow-credentials')).toBe('true');
      const decoded = (await ok.json()) as { payloads: { metadata: Record<string, string>; data: string }[] };
      expect(Buffer.from(decoded.payloads[0]!.data, 'base64').toString('utf8')).toContain(SECRET);
      expect(Buffer.from(decoded.payloads[0]!.metadata['encoding']!, 'base64').toString()).toBe('json/plain');

      // Encoding round-trips through the server too.
      const reencoded = await post('/encode', decoded, { authorization: 'Bearer ops-token' });
      const sealedAgain = (await reencoded.json()) as typeof decoded;
      expect(Buffer.from(sealedAgain.payloads[0]!.data, 'base64').includes(SECRET)).toBe(false);
      expect(Buffer.from(sealedAgain.payloads[0]!.metadata[KEY_ID_METADATA]!, 'base64').toString()).toBe(
        keyB.id,
      );

      const anonymous = await post('/decode', body, { origin: UI_ORIGIN });
      expect(anonymous.status).toBe(401);
      expect(await anonymous.text()).not.toContain(SECRET);

      const foreign = await post('/decode', body, {
        authorization: 'Bearer ops-token',
        origin: 'http://evil.example',
      });
      expect(foreign.status).toBe(403);
      expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
      expect(await foreign.text()).not.toContain(SECRET);

      const preflight = await fetch(`${url}/decode`, { method: 'OPTIONS', headers: { origin: UI_ORIGIN } });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe(UI_ORIGIN);
      expect(preflight.headers.get('access-control-allow-headers')).toContain('x-namespace');

      const oversized = await post(
        '/decode',
        { payloads: [{ data: 'A'.repeat(5 * 1024 * 1024) }] },
        {
          authorization: 'Bearer ops-token',
        },
      );
      expect(oversized.status).toBe(413);
      const malformed = await post(
        '/decode',
        { payloads: [{ data: '%%%' }] },
        { authorization: 'Bearer ops-token' },
      );
      expect(malformed.status).toBe(400);
    });
  });

  it('privacy: TURNKIT_CODEC_KEYS is id:base64 pairs, current first; a bad value is a ConfigError naming the entry, never the key', async () => {
    const a = Buffer.from(keyA.key).toString('base64');
    const b = Buffer.from(keyB.key).toString('base64');
    expect(parseCodecKeys(` b-2027:${b} , a-2026:${a}`).map((key) => key.id)).toEqual(['b-2027', 'a-2026']);
    const [codec] = payloadCodecsFromEnv({ TURNKIT_CODEC_KEYS: `b-2027:${b},a-2026:${a}` }, []);
    expect((codec as EncryptionCodec).currentKeyId).toBe('b-2027');
    expect(payloadCodecsFromEnv({}, [])).toEqual([]);
    const bad = (text: string) => {
      try {
        parseCodecKeys(text);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as Error).message).not.toContain(a);
        return (error as Error).message;
      }
      throw new Error(`accepted ${text}`);
    };
    expect(bad(`nocolon${a}`)).toMatch(/entry 1: expected id:base64key/);
    expect(bad(`a:${a},b:${Buffer.alloc(16).toString('base64')}`)).toMatch(
      /entry 2 \(key "b"\).*got 16 bytes/,
    );
    expect(bad(`a:${a},a:${b}`)).toMatch(/"a" is listed twice/);
    expect(bad(`a b:${a}`)).toMatch(/must be 1–64 of/);
    // A payload TurnKit did not seal passes through, and a sealed one is not sealed twice.
    const plain: Payload = { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('"x"') };
    const codecB = new EncryptionCodec([keyB]);
    expect(await codecB.decode([plain])).toEqual([plain]);
    const [sealed] = await codecB.encode([plain]);
    expect(await codecB.encode([sealed!])).toEqual([sealed]);
  });
});
