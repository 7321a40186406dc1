/**
 * Issue 49, part 2, in a real browser: the stock Temporal Web UI, given TurnKit's codec
 * server as its codec endpoint (the UI's own per-browser setting), shows a turn whose payloads
 * are encrypted decoded: its input and its summary. The codec server accepts the browser by a
 * cookie the UI sends with "include cross-origin credentials". Screenshot: test-results/ui/codec-ui.png (a copy is docs/images/codec-ui.png).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { Browser } from 'playwright-core';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { createCodecHandler } from '../../src/codec/codec-server.js';
import { EncryptionCodec } from '../../src/codec/encryption-codec.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { turnWorkflowId } from '../../src/workflows/contract.js';
import { CHROMIUM, chromiumAvailable } from '../helpers/chromium.js';
import { connectClient, connectNative, temporalNamespace, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const UI = (process.env['TEMPORAL_UI_URL'] ?? 'http://127.0.0.1:8233').replace(/\/$/, '');
const MARKER = `decoded-by-turnkit-${randomBytes(4).toString('hex')}`;
const COOKIE = randomBytes(16).toString('hex');
const codecs = [new EncryptionCodec([{ id: 'ui-key', key: randomBytes(32) }])];
const agent = defineAgent({ name: 'codec_ui_agent' });
const model = new ScriptedModel({ codec_ui_agent: () => ({ text: 'Done.' }) });

let store: Store;
let worker: TurnKitWorker;
let running: Promise<void>;
let server: Server;
let endpoint: string;
let browser: Browser;
let turnId: string;
const decodeCalls: (string | undefined)[] = [];

describe.skipIf(!chromiumAvailable('the codec UI suite'))(
  'privacy: the Temporal Web UI with the codec server',
  () => {
    beforeAll(async () => {
      store = await openStore(tempSqliteUrl('codec-ui'));
      const agents = new AgentRegistry([agent]);
      const taskQueue = uniqueTaskQueue('codec-ui');
      worker = await createWorker({
        store,
        agents,
        model,
        connection: await connectNative(),
        taskQueue,
        payloadCodecs: codecs,
      });
      running = worker.run();
      const plain = await connectClient();
      const temporal = new Client({
        connection: plain.connection,
        namespace: plain.options.namespace,
        dataConverter: { payloadCodecs: codecs },
      });
      const client = new TurnKitClient({ store, agents, temporal, taskQueue });
      const run = await client.run('codec_ui_agent', `Summarise ${MARKER}`);
      turnId = (await run.result()).id;

      const handler = createCodecHandler({
        codecs,
        origins: [UI],
        authenticate: (request) => {
          decodeCalls.push(request.headers.origin);
          return request.headers.cookie?.includes(`turnkit_codec=${COOKIE}`) ? 'ops' : undefined;
        },
      });
      server = createServer((request, response) => void handler(request, response));
      await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
      endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    });
    afterAll(async () => {
      await browser?.close();
      await new Promise((closed) => server?.close(closed));
      worker?.shutdown();
      await running;
      await store?.close();
    });

    it("privacy: the turn's page shows its input and summary decoded, through the codec server", async () => {
      // Without the endpoint, the history's input is ciphertext: the marker is nowhere in its bytes.
      const history = await (await connectClient()).workflow.getHandle(turnWorkflowId(turnId)).fetchHistory();
      expect(
        Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish()).includes(MARKER),
      ).toBe(false);
      const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
      await context.addCookies([{ name: 'turnkit_codec', value: COOKIE, url: endpoint }]);
      // The UI's own codec settings (per browser, in local storage): endpoint, credentials, and
      // "use this endpoint over the server's setting".
      await context.addInitScript(
        ([url]) => {
          localStorage.setItem('endpoint', JSON.stringify(url));
          localStorage.setItem('includeCredentials', 'true');
          localStorage.setItem('overrideRemoteCodecConfiguration', 'true');
        },
        [endpoint],
      );
      const page = await context.newPage();
      const text = async () =>
        (
          await Promise.all(
            page.frames().map((frame) =>
              frame
                .locator('body')
                .innerText({ timeout: 5_000 })
                .catch(() => ''),
            ),
          )
        ).join('\n');
      await page.goto(`${UI}/namespaces/${temporalNamespace()}/workflows/${turnWorkflowId(turnId)}`);
      // The input is `{turnId}`, sealed in the history: shown as JSON only once the UI decoded it.
      await expect.poll(text, { timeout: 45_000 }).toContain(`"turnId": "${turnId}"`);
      mkdirSync(join('test-results', 'ui'), { recursive: true });
      await page.screenshot({ path: join('test-results', 'ui', 'codec-ui.png') });
      // The summary holds the task's head, sealed too.
      await page.getByText('User Metadata', { exact: true }).first().click();
      await expect.poll(text, { timeout: 45_000 }).toContain(`codec_ui_agent: Summarise ${MARKER}`);
      expect(decodeCalls).toContain(UI);
      await context.close();
    });
  },
);
