/**
 * Live streaming of runs (issue 16) on the real Temporal dev server, with a local HTTP server
 * speaking the OpenAI chat-completions SSE format, the AI SDK's MockLanguageModelV4 and the
 * scripted model. Only the model is replaced.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';
import type { UIMessage } from 'ai';
import { parseJsonEventStream, readUIMessageStream, simulateReadableStream, uiMessageChunkSchema } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import type { RunStreamPart } from '../../src/client/run-stream.js';
import { runSseHandler, toUIMessageStreamResponse } from '../../src/client/ui-stream.js';
import { StreamCursorError } from '../../src/errors.js';
import { AiSdkModel } from '../../src/models/ai-sdk-model.js';
import { createModelClient } from '../../src/models/providers.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { answerCompletion, chunk, completionEvents, writeEvents } from '../helpers/openai-sse.js';
import pgClient from 'pg';
import { describePostgres, openPgTestStore, pgTestUrl } from '../helpers/postgres.js';
import { waitUntil } from '../helpers/wait.js';
import { requireTemporal } from '../helpers/temporal.js';
import { startKit, type TestKit } from '../helpers/turnkit.js';

async function collect(
  run: RunHandle,
  options: Parameters<RunHandle['stream']>[0] = {},
): Promise<RunStreamPart[]> {
  const parts: RunStreamPart[] = [];
  for await (const part of run.stream(options)) parts.push(part);
  return parts;
}

/** What a client shows: the text of each step, a restarted step's text thrown away. */
function shownText(parts: readonly RunStreamPart[], turnId: string): string[] {
  const steps = new Map<string, string>();
  for (const part of parts) {
    if (part.turnId !== turnId || !part.step) continue;
    if (part.type === 'step.restarted' || part.type === 'step.started') steps.set(part.step, '');
    if (part.type === 'text.delta') steps.set(part.step, (steps.get(part.step) ?? '') + part.text);
  }
  return [...steps.values()].filter((text) => text !== '');
}

// The provider: a local server answering chat completions from a queue of behaviours.
type Behaviour = (req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>) => Promise<void>;
const behaviours: Behaviour[] = [];
const requests: { body: Record<string, unknown>; closedEarly: boolean }[] = [];
let baseURL = '';
const server = createServer((req, res) => {
  let raw = '';
  req.on('data', (data) => (raw += data));
  req.on('end', () => {
    const body = JSON.parse(raw || '{}') as Record<string, unknown>;
    const entry = { body, closedEarly: false };
    requests.push(entry);
    res.on('close', () => (entry.closedEarly = !res.writableEnded));
    const behaviour =
      behaviours.shift() ?? ((_q, r, b) => answerCompletion(r, b, { text: 'default answer' }));
    void behaviour(req, res, body);
  });
});

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  input: z.object({ word: z.string() }),
  execute: async ({ word }) => ({ word, meaning: 'lasting' }),
});

const scripted = new ScriptedModel({
  helper: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? { text: 'Durable means it lasts, even through crashes.', thinking: 'The tool said lasting.' }
      : { toolCalls: [{ name: 'lookup', arguments: { word: 'durable' } }] },
  reviewer: () => ({ text: 'The sub-agent reviewed it.' }),
  coordinator: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'Coordinated.'
      : { toolCalls: [{ name: 'reviewer', arguments: { task: 'review it' } }] },
});

const mockStream = (parts: LanguageModelV4StreamPart[]) => ({
  stream: simulateReadableStream({ chunks: parts, chunkDelayInMs: 5 }),
});
const v4 = new MockLanguageModelV4({
  doStream: async () =>
    mockStream([
      { type: 'stream-start', warnings: [] },
      { type: 'reasoning-start', id: 'r' },
      { type: 'reasoning-delta', id: 'r', delta: 'Thinking ' },
      { type: 'reasoning-delta', id: 'r', delta: 'hard.' },
      { type: 'reasoning-end', id: 'r' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'Hello ' },
      { type: 'text-delta', id: 't', delta: 'from ' },
      { type: 'text-delta', id: 't', delta: 'the mock.' },
      { type: 'text-end', id: 't' },
      {
        type: 'finish',
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: {
          inputTokens: { total: 5, noCache: 5, cacheRead: 0, cacheWrite: 0 },
          outputTokens: { total: 4, text: 4, reasoning: 0 },
        },
      },
    ]),
});

describe('stream: live streaming of runs', () => {
  let kit: TestKit;

  beforeAll(async () => {
    await requireTemporal();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    const http = createModelClient({ provider: 'openai-compatible', name: 'local', baseURL, maxRetries: 0 });
    const reviewer = defineAgent({ name: 'reviewer', description: 'Reviews.' });
    kit = await startKit({
      model: scripted,
      agents: [
        defineAgent({ name: 'helper', tools: [lookup] }),
        defineAgent({ name: 'coordinator', subAgents: [reviewer] }),
        defineAgent({ name: 'http', model: 'test-model', client: http, tools: [lookup] }),
        defineAgent({ name: 'mock', model: 'mock-model', client: new AiSdkModel({ provider: () => v4 }) }),
      ],
    });
  });
  afterAll(async () => {
    await kit?.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('stream: a run streams step, deltas, tool call, tool result, status and finish in order; the text agrees with the committed message', async () => {
    const run = await kit.client.run('helper', 'Define durable');
    const parts = await collect(run);
    const turn = await run.turn();
    expect(turn.status).toBe('completed');
    const types = parts.map((part) => part.type);
    expect(types[0]).toBe('status');
    expect(types.at(-1)).toBe('finish');
    expect(parts.at(-1)).toMatchObject({ type: 'finish', status: 'completed', turnId: run.turnId });
    // Step 1: a tool call and its result; step 2: reasoning then text, in a few deltas.
    const call = parts.find((part) => part.type === 'tool.call');
    expect(call).toMatchObject({ toolName: 'lookup', arguments: { word: 'durable' } });
    const result = parts.find((part) => part.type === 'tool.result');
    expect(result).toMatchObject({ status: 'completed', output: { word: 'durable', meaning: 'lasting' } });
    expect(types.indexOf('tool.call')).toBeLessThan(types.indexOf('tool.result'));
    expect(types.filter((type) => type === 'step.started')).toHaveLength(2);
    expect(types.filter((type) => type === 'step.finished')).toHaveLength(2);
    expect(shownText(parts, run.turnId)).toEqual([turn.outputText]);
    const reasoning = parts
      .filter((part) => part.type === 'reasoning.delta')
      .map((part) => (part as { text: string }).text);
    expect(reasoning.join('')).toBe('The tool said lasting.');
    // Cursors are strictly increasing.
    const cursors = parts.slice(0, -1).map((part) => Number(part.cursor));
    expect([...cursors].sort((a, b) => a - b)).toEqual(cursors);
    expect(new Set(cursors).size).toBe(cursors.length);
  });

  it('stream: reconnecting with after: cursor gives exactly the parts after it, no gap, no duplicate', async () => {
    const run = await kit.client.run('helper', 'Define durable again');
    const all = await collect(run);
    for (const index of [0, 1, Math.floor(all.length / 2), all.length - 2]) {
      const rest = await collect(run, { after: all[index]!.cursor });
      expect(rest).toEqual(all.slice(index + 1));
    }
  });

  it('stream: a reader that stops reading holds nothing up: the turn completes, and the reader resumes where it stopped', async () => {
    const run = await kit.client.run('helper', 'Define durable slowly');
    const iterator = run.stream()[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.value).toMatchObject({ type: 'status', status: 'running' });
    // The reader pauses; the turn runs to its end meanwhile.
    expect((await run.result()).status).toBe('completed');
    const rest: RunStreamPart[] = [];
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) rest.push(next.value);
    expect([first.value, ...rest]).toEqual(await collect(run));
  });

  it('stream: a cursor that never existed is a StreamCursorError; so is one of another run', async () => {
    const run = await kit.client.run('helper', 'Define durable once more');
    const other = await kit.client.run('coordinator', 'coordinate');
    const mine = await collect(run);
    await other.result();
    for (const after of ['999999999999', 'abc', '0', '-1', '1.5', (await collect(other))[0]!.cursor]) {
      await expect(collect(run, { after })).rejects.toBeInstanceOf(StreamCursorError);
    }
    expect(mine.length).toBeGreaterThan(0);
  });

  it("stream: the run's tree is one stream: a sub-agent's parts are in it, tagged by the sub-agent's turn", async () => {
    const run = await kit.client.run('coordinator', 'coordinate this');
    const parts = await collect(run);
    const turns = await run.turns();
    const child = turns.find((turn) => turn.agentName === 'reviewer')!;
    expect(child).toBeDefined();
    expect(shownText(parts, child.id)).toEqual(['The sub-agent reviewed it.']);
    expect(
      parts
        .filter((part) => part.turnId === child.id && part.type === 'status')
        .map((p) => (p as { status: string }).status),
    ).toEqual(['running', 'completed']);
    // The sub-agent's parts come between the parent's tool call and its result.
    const index = (predicate: (part: RunStreamPart) => boolean) => parts.findIndex(predicate);
    const callAt = index((part) => part.type === 'tool.call' && part.turnId === run.turnId);
    const childAt = index((part) => part.turnId === child.id);
    const resultAt = index((part) => part.type === 'tool.result' && part.turnId === run.turnId);
    expect(callAt).toBeLessThan(childAt);
    expect(childAt).toBeLessThan(resultAt);
    expect(parts.at(-1)).toMatchObject({ type: 'finish', turnId: run.turnId, status: 'completed' });
    expect(shownText(parts, run.turnId)).toEqual(['Coordinated.']);
  });

  it('stream: a local OpenAI SSE provider: the client reads deltas while the provider still streams, batched into few parts', async () => {
    const text = 'x'.repeat(20) + ' streaming '.repeat(40);
    let providerDone = false;
    behaviours.push(async (_req, res) => {
      // One character per event, 200 events a second.
      const events = [
        chunk({ role: 'assistant', content: '' }),
        ...[...text].map((c) => chunk({ content: c })),
      ];
      events.push(
        chunk({}, 'stop', { prompt_tokens: 3, completion_tokens: 100, total_tokens: 103 }),
        'data: [DONE]\n\n',
      );
      await writeEvents(res, events, 5);
      providerDone = true;
    });
    const run = await kit.client.run('http', 'stream please');
    let sawDeltaBeforeProviderDone = false;
    const parts: RunStreamPart[] = [];
    for await (const part of run.stream()) {
      if (part.type === 'text.delta' && !providerDone) sawDeltaBeforeProviderDone = true;
      parts.push(part);
    }
    expect(sawDeltaBeforeProviderDone).toBe(true);
    expect((await run.turn()).outputText).toBe(text);
    expect(shownText(parts, run.turnId)).toEqual([text]);
    const deltas = parts.filter((part) => part.type === 'text.delta');
    // 460 provider deltas over ~2.3 s become batches of at most 50 ms or 256 characters.
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.length).toBeLessThan(text.length / 4);
    expect(requests.at(-1)!.body['stream']).toBe(true);
  });

  it('stream: a provider stream that breaks off mid-answer is retried; its partial deltas are superseded with step.restarted, never glued to the answer', async () => {
    behaviours.push(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: '' }));
      res.write(chunk({ content: 'A first answer that ' }));
      res.write(chunk({ content: 'never ends' }));
      await new Promise((resolve) => setTimeout(resolve, 150));
      res.destroy();
    });
    behaviours.push((_req, res, body) => answerCompletion(res, body, { text: 'The second, whole answer.' }));
    const run = await kit.client.run('http', 'answer twice');
    const live = await collect(run);
    const turn = await run.turn();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('The second, whole answer.');
    const types = live.map((part) => part.type);
    expect(types).toContain('step.restarted');
    // The live reader saw the broken attempt's deltas, then the restart, then the answer.
    expect(types.indexOf('text.delta')).toBeLessThan(types.indexOf('step.restarted'));
    expect(shownText(live, run.turnId)).toEqual(['The second, whole answer.']);
    // A reader that comes later never sees the broken attempt's text at all.
    const later = await collect(run);
    const laterText = later
      .filter((part) => part.type === 'text.delta')
      .map((part) => (part as { text: string }).text);
    expect(laterText.join('')).toBe('The second, whole answer.');
    expect(JSON.stringify(later)).not.toContain('never ends');
  });

  it('stream: a malformed SSE chunk from the provider is a retryable ModelError, then the turn goes on', async () => {
    behaviours.push(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: '' }));
      res.write('data: {"choices": [ this is not json\n\n');
      res.end();
    });
    behaviours.push((_req, res, body) => answerCompletion(res, body, { text: 'Recovered.' }));
    const run = await kit.client.run('http', 'malformed first');
    const parts = await collect(run);
    expect((await run.turn()).outputText).toBe('Recovered.');
    expect(shownText(parts, run.turnId)).toEqual(['Recovered.']);
    expect(parts.filter((part) => part.type === 'step.started')).toHaveLength(2);
  });

  it("stream: cancel mid-stream aborts the provider's stream and ends the client's stream with cancelled", async () => {
    let aborted!: () => void;
    const providerAborted = new Promise<void>((resolve) => (aborted = resolve));
    behaviours.push(async (_req, res) => {
      res.on('close', () => aborted());
      const events = completionEvents({ text: 'word '.repeat(400) }, 400);
      await writeEvents(res, events, 25);
    });
    const run = await kit.client.run('http', 'a long answer');
    const parts: RunStreamPart[] = [];
    for await (const part of run.stream()) {
      parts.push(part);
      if (part.type === 'text.delta' && parts.filter((p) => p.type === 'text.delta').length === 1)
        await run.cancel();
    }
    await providerAborted;
    expect(requests.at(-1)!.closedEarly).toBe(true);
    expect(parts.at(-1)).toMatchObject({ type: 'finish', status: 'cancelled' });
    expect((await run.turn()).status).toBe('cancelled');
  });

  it("stream: toUIMessageStreamResponse is read by the AI SDK's own client parser into one assistant message", async () => {
    const run = await kit.client.run('helper', 'Define durable for the UI');
    const response = toUIMessageStreamResponse(run);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    expect(response.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const chunks = parseJsonEventStream({ stream: response.body!, schema: uiMessageChunkSchema }).pipeThrough(
      new TransformStream({
        transform(parsed, controller) {
          if (!parsed.success) throw parsed.error;
          controller.enqueue(parsed.value);
        },
      }),
    );
    let last: UIMessage | undefined;
    for await (const message of readUIMessageStream({ stream: chunks, terminateOnError: true }))
      last = message;
    expect(last!.id).toBe(run.turnId);
    expect(last!.role).toBe('assistant');
    const text = last!.parts
      .filter((part) => part.type === 'text')
      .map((part) => (part as { text: string }).text);
    expect(text).toEqual([(await run.turn()).outputText]);
    const tool = last!.parts.find((part) => part.type === 'dynamic-tool') as
      { toolName: string; state: string; output: unknown } | undefined;
    expect(tool).toMatchObject({
      toolName: 'lookup',
      state: 'output-available',
      output: { meaning: 'lasting' },
    });
    expect(last!.parts.some((part) => part.type === 'reasoning')).toBe(true);
  });

  it('stream: MockLanguageModelV4 through doStream: reasoning and text deltas reach the stream', async () => {
    const run = await kit.client.run('mock', 'hello');
    const parts = await collect(run);
    expect((await run.turn()).outputText).toBe('Hello from the mock.');
    expect(shownText(parts, run.turnId)).toEqual(['Hello from the mock.']);
    const reasoning = parts
      .filter((part) => part.type === 'reasoning.delta')
      .map((part) => (part as { text: string }).text);
    expect(reasoning.join('')).toBe('Thinking hard.');
    expect(v4.doStreamCalls.length).toBeGreaterThan(0);
  });

  it('stream: the Node http SSE handler resumes from Last-Event-ID and answers a bad cursor with 400', async () => {
    const run = await kit.client.run('helper', 'Define durable over SSE');
    await run.result();
    const handler = runSseHandler(() => run, { stallMs: 300 });
    const sse = createServer((req, res) => void handler(req, res));
    await new Promise<void>((resolve) => sse.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(sse.address() as AddressInfo).port}/`;
    try {
      const parse = (body: string) =>
        body
          .trim()
          .split('\n\n')
          .map((event) =>
            Object.fromEntries(
              event.split('\n').map((line) => [line.split(': ')[0], line.slice(line.indexOf(': ') + 2)]),
            ),
          );
      const all = parse(await (await fetch(url)).text());
      expect(all.at(-1)).toMatchObject({ event: 'finish' });
      const expected = await collect(run);
      expect(all.map((event) => event['id'])).toEqual(expected.map((part) => part.cursor));
      const resumed = parse(
        await (await fetch(url, { headers: { 'last-event-id': all[2]!['id']! } })).text(),
      );
      expect(resumed.map((event) => event['id'])).toEqual(all.slice(3).map((event) => event['id']));
      const bad = await fetch(`${url}?after=424242424242`);
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ error: { class: 'StreamCursorError' } });
    } finally {
      await new Promise<void>((resolve) => sse.close(() => resolve()));
    }
  });
});

describePostgres('stream: on PostgreSQL', () => {
  let kit: TestKit;
  let pg: Awaited<ReturnType<typeof openPgTestStore>>;
  let peer: Awaited<ReturnType<typeof openPgTestStore>>['store'];

  beforeAll(async () => {
    await requireTemporal();
    pg = await openPgTestStore();
    peer = (await openPgTestStore(pg.schema)).store;
    kit = await startKit({
      model: scripted,
      store: pg.store,
      agents: [defineAgent({ name: 'helper', tools: [lookup] })],
    });
  });
  afterAll(async () => {
    await kit?.stop();
    await peer?.close();
    await pg?.drop();
  });

  it('stream: LISTEN/NOTIFY wakes a reader of another connection when parts commit', async () => {
    expect(peer.watchStream).toBeDefined();
    let woke!: () => void;
    const wakes = new Promise<void>((resolve) => (woke = resolve));
    const unwatch = await peer.watchStream!('turn_push', woke);
    try {
      await pg.store.appendStreamParts([{ rootTurnId: 'turn_push', turnId: 'turn_push', type: 'status' }]);
      await wakes;
    } finally {
      unwatch();
    }
  });

  it('stream: a LISTEN connection that dies (a server restart) is opened again, and push goes on', async () => {
    const admin = new pgClient.Client({ connectionString: pgTestUrl() });
    await admin.connect();
    const listeners = async () =>
      (
        await admin.query(
          `SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN "turnkit_stream"' AND datname = current_database() AND pid <> pg_backend_pid()`,
        )
      ).rows.map((row: { pid: number }) => row.pid);
    let wake: () => void = () => undefined;
    const unwatch = await peer.watchStream!('turn_restart', () => wake());
    try {
      const before = await listeners();
      expect(before.length).toBeGreaterThan(0);
      const lost = new Promise<void>((resolve) => (wake = resolve));
      for (const pid of before) await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await lost;
      await waitUntil(async () => (await listeners()).some((pid) => !before.includes(pid)), 20_000);
      const pushed = new Promise<void>((resolve) => (wake = resolve));
      await pg.store.appendStreamParts([
        { rootTurnId: 'turn_restart', turnId: 'turn_restart', type: 'status' },
      ]);
      await pushed;
    } finally {
      unwatch();
      await admin.end();
    }
  });

  it('stream: a run on PostgreSQL streams the same parts as on SQLite, read through push', async () => {
    const run = await kit.client.run('helper', 'Define durable on PostgreSQL');
    const parts = await collect(run);
    const turn = await run.turn();
    expect(turn.status).toBe('completed');
    expect(shownText(parts, run.turnId)).toEqual([turn.outputText]);
    expect(parts.map((part) => part.type).filter((type) => !type.endsWith('.delta'))).toEqual([
      'status',
      'step.started',
      'tool.call',
      'step.finished',
      'tool.result',
      'step.started',
      'step.finished',
      'status',
      'finish',
    ]);
    expect(await collect(run, { after: parts[3]!.cursor })).toEqual(parts.slice(4));
  });
});
