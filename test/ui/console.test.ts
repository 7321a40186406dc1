/**
 * Issue 32, part 1: the web console in a real browser (Debian's chromium via playwright-core),
 * served by `createConsoleHandler` against the real Temporal dev server and a SQLite store; only
 * the model is scripted. A turn's transcript with its tools and sub-agents, a live run streaming
 * through `useChat`, an approval decided from the console, the links to and from the Temporal
 * UI, and the loopback-only refusal without an auth hook. Screenshots go to test-results/console
 * (docs/images with TURNKIT_CONSOLE_SHOTS=docs/images).
 * In CI a missing chromium fails this suite; elsewhere it is skipped with a warning.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import type { Browser, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { createConsoleHandler } from '../../src/console.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { TurnRecord } from '../../src/store/types.js';
import { turnWorkflowId } from '../../src/workflows/contract.js';
import { buildConsoleAssets } from '../helpers/console-assets.js';
import { temporalNamespace } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const UI = (process.env['TEMPORAL_UI_URL'] ?? 'http://127.0.0.1:8233').replace(/\/$/, '');
// docs/images holds the guide's screenshots: `TURNKIT_CONSOLE_SHOTS=docs/images` refreshes them.
const SHOTS = resolve(process.env['TURNKIT_CONSOLE_SHOTS'] ?? join('test-results', 'console'));
const available = existsSync(CHROMIUM);
if (!available && process.env['CI']) throw new Error(`chromium is not at ${CHROMIUM}: .ci/run installs it`);
if (!available)
  console.warn(`turnkit: WARNING: no chromium at ${CHROMIUM}; the web console suite is skipped`);

let charges = 0;
const lookup = defineTool({
  name: 'lookup_fact',
  description: 'Looks a fact up.',
  input: z.object({ topic: z.string() }),
  execute: ({ topic }) => ({ topic, fact: 'workflows are durable' }),
});
const charge = defineTool({
  name: 'charge_card',
  description: 'Charges a card.',
  input: z.object({ amount: z.number() }),
  needsApproval: true,
  execute: ({ amount }) => {
    charges += 1;
    return { charged: amount };
  },
});

const usage = { inputTokens: 120, outputTokens: 30, cost: 0.0042 };
const hasToolResult = (request: { messages: { role: string }[] }) =>
  request.messages.some((m) => m.role === 'tool');
const model = new ScriptedModel({
  con_lead: (request) =>
    hasToolResult(request)
      ? { text: 'Durable execution keeps agents alive across crashes.', usage }
      : {
          toolCalls: [
            { name: 'lookup_fact', arguments: { topic: 'durability' } },
            { name: 'con_helper', arguments: { task: 'Summarize durable execution in one line.' } },
          ],
          usage,
        },
  con_helper: () => ({ text: 'Workflows resume where they stopped.', usage }),
  con_gate: (request) =>
    hasToolResult(request)
      ? { text: 'The card was charged.', usage }
      : { toolCalls: [{ name: 'charge_card', arguments: { amount: 42 } }], usage },
  // Four deltas, 5 s apart: the page sees the text grow, and the cancel comes before the last
  // (with room for a loaded machine).
  con_slow: () => ({ text: 'streaming, word by word, '.repeat(40), chunkDelayMs: 5_000, usage }),
  con_broken: () => ({
    error: { status: 400, message: 'bad request from https://gateway.internal key sk-secret' },
  }),
  con_ok: () => ({ text: 'All good.', usage }),
  // Two steps with text each, and a markdown answer carrying HTML a model might write.
  con_md: (request) =>
    hasToolResult(request)
      ? {
          text: '# Durable agents\n\nThey **survive** crashes.\n\n- one\n- two\n\n<img src=x onerror="window.__owned=1">',
          usage,
        }
      : {
          text: 'Looking it up first.',
          toolCalls: [{ name: 'lookup_fact', arguments: { topic: 'crashes' } }],
          usage,
        },
});
const helper = defineAgent({ name: 'con_helper' });
const agents = [
  defineAgent({ name: 'con_lead', tools: [lookup], subAgents: [helper] }),
  helper,
  defineAgent({ name: 'con_gate', tools: [charge] }),
  defineAgent({ name: 'con_slow' }),
  defineAgent({ name: 'con_broken' }),
  defineAgent({ name: 'con_ok' }),
  defineAgent({ name: 'con_md', tools: [lookup] }),
];

let kit: TestKit;
let server: Server;
let base: string;
let browser: Browser;
let page: Page;
let lead: TurnRecord;
let handler: ReturnType<typeof createConsoleHandler>;
let assets: string;

const bin = join(import.meta.dirname, '../../src/cli/bin.ts');
const tsx = import.meta.resolve('tsx');

/** `turnkit console ...` as a process: its first stderr line once it serves (or its exit), and a stop. */
function turnkitConsole(args: string[]): Promise<{
  line: string;
  code: number | null;
  url: string | null;
  stop: () => Promise<number | null>;
}> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', tsx, bin, '--store', storeUrl, 'console', ...args], {
      env: process.env,
    });
    const exited = new Promise<number | null>((done) => child.on('close', (code) => done(code)));
    const stop = () => {
      child.kill('SIGINT');
      return exited;
    };
    let err = '';
    let settled = false;
    child.stderr.on('data', (chunk) => {
      err += chunk;
      const url = /http:\/\/[^ ]+\//.exec(err)?.[0] ?? null;
      if (!settled && url && err.includes('\n')) {
        settled = true;
        resolve({ line: err.trim(), code: null, url, stop });
      }
    });
    void exited.then((code) => {
      if (!settled) resolve({ line: err.trim(), code, url: null, stop });
    });
  });
}
let storeUrl = '';
const decisions: { action: string; principal: unknown }[] = [];

function listen(s: Server, host: string): Promise<number> {
  return new Promise((resolve) => s.listen(0, host, () => resolve((s.address() as AddressInfo).port)));
}

describe.skipIf(!available)('the TurnKit web console', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    const assetsDir = await buildConsoleAssets();
    assets = assetsDir;
    // The console's port first: the turns' Temporal UI details link to it.
    server = createServer((req, res) => void handler(req, res));
    const port = await listen(server, '127.0.0.1');
    base = `http://127.0.0.1:${port}/`;
    storeUrl = join(assetsDir, '..', 'console.sqlite');
    kit = await startKit({
      agents,
      model,
      turnSettings: { consoleUrl: base },
      store: await openStore(storeUrl),
      // The workers' policy: it sees the console's principal; mallory may not approve.
      runtime: {
        authorization: (request) => {
          decisions.push({ action: request.action, principal: request.principal });
          return !(request.action === 'approve' && JSON.stringify(request.principal).includes('mallory'));
        },
      },
    });
    handler = createConsoleHandler({ client: kit.client, temporalUiUrl: UI, assetsDir });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    lead = await (await kit.client.run('con_lead', 'Explain why durable execution matters')).result();
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => server?.close(resolve));
    await kit?.stop();
    await kit?.store.close();
  });

  it("web console: a turn's page shows its transcript with tool calls and results, its sub-agent tree, steps and timeline", async () => {
    expect(lead.status).toBe('completed');
    const started = Date.now();
    await page.goto(base);
    await page.locator(`a[title="${lead.id}"]`).waitFor();
    const firstLoadMs = Date.now() - started;
    console.log(`web console: first load (navigation to the turn list) ${firstLoadMs} ms`);
    await page.screenshot({
      path: join(SHOTS, 'console-turns.png'),
      clip: { x: 0, y: 0, width: 1440, height: 420 },
    });

    await page.goto(`${base}#/turns/${lead.id}`);
    const transcript = page.getByRole('feed');
    await transcript.getByText('Durable execution keeps agents alive across crashes.').waitFor();
    const text = await transcript.innerText();
    expect(text).toMatch(/tool call\s+lookup_fact/);
    expect(text).toContain('"topic": "durability"');
    expect(text).toContain('workflows are durable'); // the tool's result
    expect(text).toMatch(/tool call\s+con_helper/);
    expect(text).toContain('Workflows resume where they stopped.'); // the sub-agent's answer, as a result
    const tree = page.getByRole('navigation', { name: 'Sub-agent tree' });
    await expect.poll(() => tree.innerText()).toContain('con_helper');
    expect(await page.locator('#steps-title').isVisible()).toBe(true);
    const steps = await page.locator('section[aria-labelledby="steps-title"]').innerText();
    expect(steps).toMatch(/model call|scripted|Step/);
    expect(steps).toContain('$0.0084'); // two model calls at $0.0042
    const timeline = await page.locator('section[aria-labelledby="timeline-title"]').innerText();
    expect(timeline).toContain('model call 1');
    expect(timeline).toContain('tool lookup_fact completed');
    expect(timeline).toContain('sub-agent con_helper completed');
    await page.screenshot({ path: join(SHOTS, 'console-turn.png'), fullPage: true });

    // The sub-agent's own page, from the tree; keyboard: the tree's link takes Enter.
    await tree.getByRole('link', { name: 'con_helper' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: /con_helper/ }).waitFor();
    // The transcript comes in its own pages after the turn's head.
    await expect
      .poll(() => page.getByRole('feed').innerText())
      .toContain('Workflows resume where they stopped.');
  });

  it('web console: a running turn streams live on its page through useChat, and a cancel from the console ends it as cancelled', async () => {
    const run = await kit.client.run('con_slow', 'Talk slowly');
    await page.goto(`${base}#/turns/${run.turnId}`);
    const live = page.getByTestId('live-text');
    await expect
      .poll(async () => (await live.innerText().catch(() => '')).length, { timeout: 30_000 })
      .toBeGreaterThan(30);
    const early = (await live.innerText()).length;
    await expect
      .poll(async () => (await live.innerText()).length, { timeout: 15_000 })
      .toBeGreaterThan(early);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByTestId('live-cancelled').waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('live-status').innerText()).toBe('cancelled');
    expect((await run.turn()).status).toBe('cancelled');
  });

  it("web console: useChat shows a failed run's safe error, and a completed run's usage and cost, from the message metadata", async () => {
    const broken = await kit.client.run('con_broken', 'Fail, please');
    await broken.result();
    await page.goto(`${base}#/turns/${broken.turnId}`);
    const failed = page.getByTestId('live-failed');
    await failed.waitFor({ timeout: 30_000 });
    expect(await failed.innerText()).toContain('The run failed');
    expect(await failed.innerText()).not.toContain('sk-secret');
    expect(await page.getByTestId('live-status').innerText()).toBe('failed');
    // Once the stream has ended, the live card says the error once.
    await page.locator('section.live:is([data-chat-status="error"], [data-chat-status="ready"])').waitFor();
    expect(await page.locator('section.live .error').count()).toBe(1);
    // The turn's page also shows the error itself (the console is the operator's view).
    expect(await page.locator('.error-box').innerText()).toContain('ModelError');

    const ok = await kit.client.run('con_ok', 'Say it is fine');
    await ok.result();
    await page.goto(`${base}#/turns/${ok.turnId}`);
    await page.getByTestId('live-cost').waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('live-status').innerText()).toBe('completed');
    expect(await page.getByTestId('live-usage').innerText()).toBe('150 tokens');
    expect(await page.getByTestId('live-cost').innerText()).toBe('$0.0042');
  });

  it('web console: an approval decided from the console runs the tool once', async () => {
    const run = await kit.client.run('con_gate', 'Charge the card 42');
    await expect.poll(async () => (await run.pendingApprovals()).length, { timeout: 30_000 }).toBe(1);
    await page.goto(`${base}#/approvals`);
    const card = page.getByRole('article').filter({ hasText: 'charge_card' });
    await card.waitFor();
    expect(await card.innerText()).toContain('"amount": 42');
    await page.screenshot({
      path: join(SHOTS, 'console-approvals.png'),
      clip: { x: 0, y: 0, width: 1440, height: 420 },
    });
    await card.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('No call is awaiting a decision.').waitFor({ timeout: 30_000 });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const executions = await kit.store.listToolExecutions({ turnId: run.turnId });
    expect(executions.map((e) => [e.toolName, e.status, e.result])).toEqual([
      ['charge_card', 'completed', { charged: 42 }],
    ]);
    expect(charges).toBe(1);
    expect(decisions.filter((d) => d.action === 'approve')).toEqual([{ action: 'approve', principal: null }]);
    const events = await run.events();
    expect(events.filter((e) => e.type === 'approval.approved')).toHaveLength(1);
  });

  it("web console: each turn links to its workflow in the Temporal UI, and the workflow's details link back to the console", async () => {
    const wid = turnWorkflowId(lead.id);
    await page.goto(`${base}#/turns/${lead.id}`);
    const link = page.getByRole('link', { name: 'Open the workflow in the Temporal UI' });
    expect(await link.getAttribute('href')).toBe(`${UI}/namespaces/${temporalNamespace()}/workflows/${wid}`);

    const consolePage = `${base}#/turns/${lead.id}`;
    const handle = kit.client.temporal.workflow.getHandle(wid);
    expect(await (await handle.describe()).staticDetails()).toContain(`(${consolePage})`);
    const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toContain(`(${consolePage})`);
    // The sub-agent's workflow (a child start) carries its own link.
    const child = (await kit.store.listTurns({ rootTurnId: lead.id })).find((t) => t.id !== lead.id)!;
    const childDetails = await (
      await kit.client.temporal.workflow.getHandle(turnWorkflowId(child.id)).describe()
    ).staticDetails();
    expect(childDetails).toContain(`(${base}#/turns/${child.id})`);
    // A turn the conversation's lane started (a post) carries it too.
    const receipt = await (await kit.client.conversation('con_ok')).post('Hello through the lane');
    await (await kit.client.handle(receipt.turnId!)).result();
    const laneTurn = kit.client.temporal.workflow.getHandle(turnWorkflowId(receipt.turnId!));
    expect(await (await laneTurn.describe()).staticDetails()).toContain(`(${base}#/turns/${receipt.turnId})`);
  });

  it("web console: the first hour's faults: step texts apart, tool states in words, markdown output as text, no overflow at 800 px, a rejected call's card without buttons", async () => {
    const turn = await (await kit.client.run('con_md', 'Tell me about durable agents')).result();
    expect(turn.status).toBe('completed');
    await page.setViewportSize({ width: 800, height: 900 });
    try {
      await page.goto(`${base}#/turns/${turn.id}`);
      const output = page.locator('section[aria-labelledby="output-title"]');
      await output.getByRole('heading', { name: 'Durable agents' }).waitFor({ timeout: 30_000 });
      expect(await output.locator('strong').innerText()).toBe('survive');
      expect(await output.locator('li').allInnerTexts()).toEqual(['one', 'two']);
      // The model's HTML is shown as text, never parsed.
      expect(await output.locator('img').count()).toBe(0);
      expect(await output.innerText()).toContain('<img src=x onerror=');
      expect(await page.evaluate(() => (globalThis as { __owned?: number }).__owned)).toBeUndefined();
      const live = page.getByTestId('live-text');
      await expect
        .poll(() => live.locator('p').allInnerTexts(), { timeout: 30_000 })
        .toEqual(['Looking it up first.', expect.stringContaining('# Durable agents')]);
      const liveCard = await page.locator('section[aria-labelledby="live-title"]').innerText();
      expect(liveCard).toContain('lookup_fact: done');
      expect(liveCard).not.toContain('output-available');
      // Nothing is wider than the window: the usage table scrolls inside its card.
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(800);
      await page.screenshot({ path: join(SHOTS, 'console-turn-800.png'), fullPage: true });
    } finally {
      await page.setViewportSize({ width: 1440, height: 1000 });
    }

    // A rejected call: its card says so, without live buttons, and the list says none is open.
    const gated = await kit.client.run('con_gate', 'Charge the card 7');
    await expect.poll(async () => (await gated.pendingApprovals()).length, { timeout: 30_000 }).toBe(1);
    await page.goto(`${base}#/approvals`);
    const card = page.getByRole('article').filter({ hasText: 'charge_card' });
    await card.getByRole('textbox', { name: 'Reason' }).fill('too much');
    await card.getByRole('button', { name: 'Reject' }).click();
    await page.getByText(/Rejected at .*: too much/).waitFor({ timeout: 30_000 });
    await page.getByText('No call is awaiting a decision.').waitFor({ timeout: 30_000 });
    expect(await page.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Reject' }).count()).toBe(0);
    await page.screenshot({ path: join(SHOTS, 'console-rejected.png'), fullPage: true });
    expect((await gated.result()).status).toBe('completed');
  });

  it('web console: without an auth hook, a request from a non-loopback address gets 403', async () => {
    // The handler called with a remote address that is not loopback.
    const fake = (remoteAddress: string, host = '127.0.0.1') => {
      const req = Object.assign(new PassThrough(), {
        url: '/api/turns',
        method: 'GET',
        headers: { host },
        socket: { remoteAddress },
      }) as unknown as IncomingMessage;
      let status = 0;
      const res = {
        headersSent: false,
        writeHead(code: number) {
          status = code;
          return res;
        },
        end() {},
      } as unknown as ServerResponse;
      return handler(req, res).then(() => status);
    };
    expect(await fake('192.0.2.7')).toBe(403);
    expect(await fake('::ffff:10.1.2.3')).toBe(403);
    expect(await fake('127.0.0.1')).toBe(200);
    // A loopback connection naming a foreign host (DNS rebinding) is refused as well.
    expect(await fake('127.0.0.1', 'evil.example:80')).toBe(403);

    // A real connection through another local interface, when the machine has one.
    const address = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;
    if (address) {
      const open = createServer((req, res) => void handler(req, res));
      const port = await listen(open, '0.0.0.0');
      try {
        const status = await new Promise<number>((resolve, reject) =>
          httpRequest({ host: address, port, path: '/api/turns' }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          })
            .on('error', reject)
            .end(),
        );
        expect(status).toBe(403);
      } finally {
        await new Promise((resolve) => open.close(resolve));
      }
    }
    // A control without the console's header (a cross-site form post) is refused too.
    const response = await fetch(`${base}api/turns/${lead.id}/pause`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(403);
  });

  it("web console: with an auth hook, a request it refuses gets 401, and a control carries the hook's principal to the authorization policy", async () => {
    const hooked = createConsoleHandler({
      client: kit.client,
      assetsDir: assets,
      authenticate: (request) => {
        const user = request.headers['x-user'];
        return typeof user === 'string' ? { id: user } : undefined;
      },
    });
    const open = createServer((req, res) => void hooked(req, res));
    const url = `http://127.0.0.1:${await listen(open, '127.0.0.1')}/`;
    try {
      expect((await fetch(`${url}api/turns`)).status).toBe(401);
      expect((await fetch(`${url}api/turns`, { headers: { 'x-user': 'alice' } })).status).toBe(200);
      const run = await kit.client.run('con_gate', 'Charge the card 42');
      await expect.poll(async () => (await run.pendingApprovals()).length, { timeout: 30_000 }).toBe(1);
      const [pending] = await run.pendingApprovals();
      const approve = (user: string) =>
        fetch(`${url}api/turns/${run.turnId}/approve`, {
          method: 'POST',
          headers: { 'x-user': user, 'x-turnkit-console': '1', 'content-type': 'application/json' },
          body: JSON.stringify({ toolCallId: pending!.toolCallId }),
        });
      const refused = await approve('mallory');
      expect(refused.status).toBe(403);
      expect(await refused.json()).toEqual({ error: 'not authorized to approve' });
      expect((await approve('alice')).status).toBe(200);
      expect((await run.result()).status).toBe('completed');
      expect(decisions.filter((d) => d.action === 'approve').slice(-2)).toEqual([
        { action: 'approve', principal: { id: 'mallory' } },
        { action: 'approve', principal: { id: 'alice' } },
      ]);
      const executions = await kit.store.listToolExecutions({ turnId: run.turnId });
      expect(executions.map((e) => e.status)).toEqual(['completed']);
    } finally {
      await new Promise((resolve) => open.close(resolve));
    }
  });

  it('web console: `turnkit console` without an auth hook listens on loopback only and says so, and serves the console', async () => {
    const refused = await turnkitConsole(['--host', '0.0.0.0', '--port', '0']);
    expect(refused.code).toBe(2);
    expect(refused.line).toContain('without an auth hook');
    const served = await turnkitConsole(['--port', '0', '--assets', assets]);
    try {
      expect(served.line).toMatch(
        /^turnkit console: http:\/\/127\.0\.0\.1:\d+\/ \(no auth hook: loopback only\)$/,
      );
      const page = await fetch(served.url!);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<div id="root">');
      const turns = (await (await fetch(`${served.url}api/turns?agent=con_lead`)).json()) as {
        turns: { id: string }[];
      };
      expect(turns.turns.map((t) => t.id)).toContain(lead.id);
    } finally {
      // SIGINT stops it: the server closes its connections, the command its store and Temporal.
      expect(await served.stop()).toBe(0);
    }
  });

  it('web console: a 1,000-message transcript is virtualized: a few rows in the DOM, and End reaches the last message', async () => {
    const store = kit.store;
    const conversation = await store.createConversation({ agentName: 'con_ok' });
    const turn = await store.createTurn({
      conversationId: conversation.id,
      agentName: 'con_ok',
      status: 'completed',
    });
    for (let i = 0; i < 1_000; i++)
      await store.appendMessage({
        conversationId: conversation.id,
        turnId: turn.id,
        role: i % 2 === 0 ? 'user' : 'assistant',
        content: `message ${i + 1}: ${'lorem ipsum dolor sit amet '.repeat(1 + (i % 5))}`,
      });
    await page.goto(`${base}#/turns/turn_none`); // warm: the app is loaded, the route changes
    const started = Date.now();
    await page.goto(`${base}#/turns/${turn.id}`);
    await page.getByRole('feed').getByText('message 1:', { exact: false }).first().waitFor();
    const renderMs = Date.now() - started;
    // Scrolling to the end with the keyboard shows the last message.
    await page.getByRole('feed').focus();
    await page.keyboard.press('End');
    await page.getByRole('feed').getByText('message 1000:', { exact: false }).waitFor();
    const rows = await page.locator('.transcript article').count();
    console.log(`web console: 1,000-message transcript rendered in ${renderMs} ms (${rows} rows in the DOM)`);
    // The time is printed for the record, never asserted (machines here are noisy).
    expect(rows).toBeLessThan(60);
  });
});
