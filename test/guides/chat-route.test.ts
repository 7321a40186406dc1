/**
 * Issue 45, the chat-route guide (docs/chat-route.md): examples/chat-route.ts's web handlers
 * behind a page using the AI SDK's `useChat` (examples/chat-page), in Chromium, on the real
 * dev server and a SQLite store; only the model is scripted. The handlers are mounted as a
 * Next.js route would mount them: a web Request in, a web Response out.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatRoute } from '../../examples/chat-route.js';
import { defineAgent } from '../../src/agents/agent.js';
import type { ModelRequest } from '../../src/models/types.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { CHROMIUM, chromiumAvailable } from '../helpers/chromium.js';
import { blocksNotFromSources } from '../helpers/doc-snippets.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const userTexts = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === 'user').map((m) => String(m.content));

/** Answers with what it was told and how many user messages the conversation has so far. */
const model = new ScriptedModel({
  chat_helper: (request) => {
    const said = userTexts(request);
    return {
      text: `Answer ${said.length}: you said "${said.at(-1)}". Durable turns survive crashes.`,
      chunkDelayMs: 700, // four deltas: the page sees the answer grow
    };
  },
});

let kit: TestKit;
let server: Server;
let base = '';
let browser: Browser;
let page: Page;
let pageScript = '';

/** The session: a cookie naming the user (your app's real session check goes here). */
const principalOf = async (request: Request) => {
  const user = /(?:^|; )session=(\w+)/.exec(request.headers.get('cookie') ?? '')?.[1];
  return user ? { user } : undefined;
};

/** Node's request as a web Request, the handler's web Response written back (Next.js does this for you). */
async function serveWeb(
  handler: (request: Request) => Promise<Response>,
  req: IncomingMessage,
  res: ServerResponse,
) {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const request = new Request(new URL(req.url ?? '/', base), {
    method: req.method ?? 'GET',
    headers: req.headers as Record<string, string>,
    ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
  });
  const response = await handler(request).catch((error: unknown) =>
    Response.json({ error: String(error) }, { status: 500 }),
  );
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) return void res.end();
  Readable.fromWeb(response.body as WebReadableStream<Uint8Array>).pipe(res);
}

const post = (path: string, body: unknown, cookie = 'session=ada') =>
  fetch(new URL(path, base), {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie },
    body: JSON.stringify(body),
  });

describe.skipIf(!chromiumAvailable('the chat-route suite'))(
  'first hour: a chat route behind useChat, in Chromium',
  () => {
    beforeAll(async () => {
      kit = await startKit({ agents: [defineAgent({ name: 'chat_helper' })], model });
      const route = chatRoute({ client: kit.client, agent: 'chat_helper', principalOf });
      const bundle = await build({
        entryPoints: [resolve(import.meta.dirname, '../../examples/chat-page/main.tsx')],
        bundle: true,
        platform: 'browser',
        format: 'esm',
        target: 'es2022',
        jsx: 'automatic',
        write: false,
        define: { 'process.env.NODE_ENV': '"production"' },
        logLevel: 'silent',
      });
      pageScript = bundle.outputFiles[0]!.text;
      server = createServer((req, res) => {
        if (req.method === 'POST' && req.url === '/api/chats') return void serveWeb(route.create, req, res);
        if (req.method === 'POST' && req.url === '/api/chat') return void serveWeb(route.POST, req, res);
        if (req.url === '/app.js') {
          res.writeHead(200, { 'content-type': 'text/javascript' });
          return void res.end(pageScript);
        }
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(
          '<!doctype html><title>chat</title><div id="root"></div><script type="module" src="/app.js"></script>',
        );
      });
      await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
      const context = await browser.newContext();
      await context.addCookies([{ name: 'session', value: 'ada', url: base }]);
      page = await context.newPage();
    });
    afterAll(async () => {
      await browser?.close();
      await new Promise((done) => server?.close(done));
      await kit?.stop();
      await kit?.store.close();
    });

    it('first hour: a page using useChat sends two messages through examples/chat-route.ts and shows each answer as it streams; the conversation in the store holds both turns', async () => {
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(base);
      const input = page.getByRole('textbox', { name: 'message' });
      await input.fill('Why Temporal?');
      await page.getByRole('button', { name: 'Send' }).click();
      const answers = page.locator('li[data-role="assistant"]');
      // Streaming: part of the answer is on the page while its run is still running, then all of it.
      const partial = async () => {
        const [text, status] = [
          await answers.first().innerText(),
          await answers.first().getAttribute('data-status'),
        ];
        return status === 'running' && text.startsWith('Agent: Answer 1') && !text.endsWith('crashes.');
      };
      await expect.poll(() => partial().catch(() => false), { timeout: 30_000 }).toBe(true);
      await expect
        .poll(() => answers.first().getAttribute('data-status'), { timeout: 30_000 })
        .toBe('completed');
      expect(await answers.first().innerText()).toBe(
        'Agent: Answer 1: you said "Why Temporal?". Durable turns survive crashes.',
      );

      await input.fill('And after a crash?');
      await page.getByRole('button', { name: 'Send' }).click();
      await expect
        .poll(() => answers.nth(1).getAttribute('data-status'), { timeout: 30_000 })
        .toBe('completed');
      expect(await answers.nth(1).innerText()).toBe(
        'Agent: Answer 2: you said "And after a crash?". Durable turns survive crashes.',
      );
      expect(await page.locator('li[data-role="user"]').allInnerTexts()).toEqual([
        'You: Why Temporal?',
        'You: And after a crash?',
      ]);
      expect(errors).toEqual([]);

      // One conversation, ada's, with both turns answered in it.
      const turns = await kit.store.listTurns({ limit: 10 });
      expect(turns.map((t) => t.status)).toEqual(['completed', 'completed']);
      expect(new Set(turns.map((t) => t.conversationId)).size).toBe(1);
      const conversation = await kit.store.loadConversation(turns[0]!.conversationId);
      expect(conversation.metadata['principal']).toEqual({ user: 'ada' });
      const messages = await kit.store.listMessages(conversation.id);
      expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    });

    it("first hour: the chat route refuses what it must: no session 401, another user's chat 404, a malformed body 400, each with a one-line reason and nothing written", async () => {
      const created = (await (await post('/api/chats', {})).json()) as { id: string };
      const message = { id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hi' }] };
      const before = (await kit.store.listTurns({ limit: 100 })).length;

      const anonymous = await post('/api/chat', { id: created.id, messages: [message] }, '');
      expect([anonymous.status, await anonymous.json()]).toEqual([401, { error: 'sign in first' }]);
      const stranger = await post('/api/chat', { id: created.id, messages: [message] }, 'session=mallory');
      expect([stranger.status, await stranger.json()]).toEqual([404, { error: 'no such chat' }]);
      const unknown = await post('/api/chat', { id: 'conv_000000000000000000000000', messages: [message] });
      expect([unknown.status, await unknown.json()]).toEqual([404, { error: 'no such chat' }]);
      const malformed = await post('/api/chat', { id: created.id, messages: 'hi' });
      expect(malformed.status).toBe(400);
      expect(((await malformed.json()) as { error: string }).error).toContain('messages');
      const badId = await post('/api/chat', { id: '../etc', messages: [message] });
      expect(((await badId.json()) as { error: string }).error).toContain(
        'id must be a conversation id from POST /api/chats',
      );
      const fromAssistant = await post('/api/chat', {
        id: created.id,
        messages: [{ ...message, role: 'assistant' }],
      });
      expect([fromAssistant.status, await fromAssistant.json()]).toEqual([
        400,
        { error: 'the last message must be a user message with text' },
      ]);
      expect(await kit.store.listTurns({ limit: 100 })).toHaveLength(before);
      expect(await kit.store.listMessages(created.id)).toEqual([]);
    });
  },
);

describe('first hour: the chat-route guide', () => {
  it('first hour: every TypeScript block of docs/chat-route.md is a piece of examples/chat-route.ts or the chat page', () => {
    expect(
      blocksNotFromSources('docs/chat-route.md', [
        'examples/chat-route.ts',
        'examples/chat-app.ts',
        'examples/chat-page/chat.tsx',
        'examples/chat-page/main.tsx',
      ]),
    ).toEqual([]);
  });
});
