/**
 * Live streaming of runs (issue 16) on the real Temporal dev server, with a local HTTP server
 * speaking the OpenAI chat-completions SSE format, the AI SDK's MockLanguageModelV4 and the
 * scripted model. Only the model is replaced.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { connect } from 'node:net';
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
import { readRunStream } from '../../src/client/run-stream.js';
import type { RunSseOptions, StreamableRun } from '../../src/client/ui-stream.js';
import type { TurnKitUIMessage } from '../../src/ui/types.js';
import { runSseHandler, toUIMessageChunks, toUIMessageStreamResponse } from '../../src/client/ui-stream.js';
import { RecordNotFound, StoreError, StreamCursorError } from '../../src/errors.js';
import { openStore } from '../../src/store/index.js';
import type { NewStreamPart, Store } from '../../src/store/types.js';
import { AiSdkModel } from '../../src/models/ai-sdk-model.js';
import { createModelClient } from '../../src/models/providers.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { answerCompletion, chunk, completionEvents, writeEvents } from '../helpers/openai-sse.js';
import pgClient from 'pg';
import { describePostgres, openPgTestStore, pgTestUrl } from '../helpers/postgres.js';
import { gate, waitUntil } from '../helpers/wait.js';
import { requireTemporal } from '../helpers/temporal.js';
import { startKit, tempSqliteUrl, type TestKit } from '../helpers/turnkit.js';

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
  researcher: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? { text: 'Researched: durable means lasting.', thinking: 'The lookup answered.' }
      : { toolCalls: [{ name: 'lookup', arguments: { word: 'durable' } }] },
  lead: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'Led.'
      : { toolCalls: [{ name: 'researcher', arguments: { task: 'research durable' } }] },
});

/** The assistant messages the AI SDK's own client builds from a UI message stream response, each as it grew. */
async function uiMessages(response: Response): Promise<TurnKitUIMessage[]> {
  const chunks = parseJsonEventStream({ stream: response.body!, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(parsed, controller) {
        if (!parsed.success) throw parsed.error;
        controller.enqueue(parsed.value);
      },
    }),
  );
  const messages: TurnKitUIMessage[] = [];
  for await (const message of readUIMessageStream<TurnKitUIMessage>({
    stream: chunks,
    terminateOnError: true,
  }))
    messages.push(structuredClone(message));
  return messages;
}

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
    const researcher = defineAgent({ name: 'researcher', description: 'Researches.', tools: [lookup] });
    kit = await startKit({
      model: scripted,
      agents: [
        defineAgent({ name: 'helper', tools: [lookup] }),
        defineAgent({ name: 'coordinator', subAgents: [reviewer] }),
        defineAgent({ name: 'lead', subAgents: [researcher] }),
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
    const last: UIMessage | undefined = (await uiMessages(response)).at(-1);
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

  it("stream: a sub-agent's work is a data-subagent part of the UI message, growing as it works, read by the AI SDK's own client", async () => {
    const run = await kit.client.run('lead', 'Lead the research');
    const messages = await uiMessages(toUIMessageStreamResponse(run));
    const child = (await run.turns()).find((turn) => turn.agentName === 'researcher')!;
    const last = messages.at(-1)!;
    // The run's own message: its tool call for the sub-agent, then the sub-agent's part, then its answer.
    const types = last.parts.map((part) => part.type);
    const call = last.parts.find((part) => part.type === 'dynamic-tool') as {
      toolCallId: string;
      toolName: string;
    };
    expect(call.toolName).toBe('researcher');
    expect(types.indexOf('dynamic-tool')).toBeLessThan(types.indexOf('data-subagent'));
    expect(types.filter((type) => type === 'data-subagent')).toHaveLength(1);
    const text = (message: TurnKitUIMessage) =>
      message.parts.filter((part) => part.type === 'text').map((part) => part.text);
    expect(text(last)).toEqual(['Led.']);
    const sub = last.parts.find((part) => part.type === 'data-subagent')!;
    expect(sub.id).toBe(child.id);
    expect(sub.data).toMatchObject({
      turnId: child.id,
      agentName: 'researcher',
      parentTurnId: run.turnId,
      toolCallId: call.toolCallId,
      status: 'completed',
    });
    // The sub-agent's own steps: its tool call with the result, then its reasoning and answer.
    expect(sub.data.parts.map((part) => part.type)).toEqual([
      'step-start',
      'dynamic-tool',
      'step-start',
      'reasoning',
      'text',
    ]);
    expect(sub.data.parts[1]).toMatchObject({
      toolName: 'lookup',
      state: 'output-available',
      input: { word: 'durable' },
      output: { meaning: 'lasting' },
    });
    expect(sub.data.parts[3]).toMatchObject({ text: 'The lookup answered.', state: 'done' });
    expect(sub.data.parts[4]).toMatchObject({ text: child.outputText, state: 'done' });
    // A client saw it while it ran: running first, its tool call before its answer.
    const seen = messages.flatMap((message) =>
      message.parts.flatMap((part) => (part.type === 'data-subagent' ? [part.data] : [])),
    );
    expect(seen[0]!.status).toBe('running');
    expect(
      seen.some((data) => data.status === 'running' && data.parts.some((p) => p.type === 'dynamic-tool')),
    ).toBe(true);
    // run.stream() says where the sub-agent comes from on its first part.
    const first = (await collect(run)).find((part) => part.turnId === child.id);
    expect(first).toMatchObject({
      type: 'status',
      status: 'running',
      subAgent: { agentName: 'researcher', parentTurnId: run.turnId, toolCallId: call.toolCallId },
    });
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

// Clients that stall or leave: a real http server with runSseHandler, a raw socket client
// that can stop reading, and a run of a real store whose parts the test writes (as a busy
// model would), so that the test decides how much there is to send.

/** A run in `store` that has started and has said nothing yet; `say` appends text (about 2 KB a part). */
async function quietRun(store: Store) {
  const conversation = await store.createConversation({ agentName: 'sse' });
  const turn = await store.createTurn({ conversationId: conversation.id, agentName: 'sse' });
  const at = { rootTurnId: turn.id, turnId: turn.id };
  await store.appendStreamParts([{ ...at, type: 'status', payload: { status: 'running' } }]);
  const [started] = await store.appendStreamParts([{ ...at, type: 'step.started', step: 's1' }]);
  let said = 0;
  return {
    turnId: turn.id,
    async say(count: number): Promise<void> {
      const parts: NewStreamPart[] = [];
      for (let i = 0; i < count; i++)
        parts.push({
          ...at,
          type: 'text.delta',
          step: 's1',
          attempt: started!.sequence,
          payload: { text: `${String(++said).padStart(6, '0')} ${'x'.repeat(2_000)}` },
        });
      await store.appendStreamParts(parts);
    },
    finish: () => store.appendStreamParts([{ ...at, type: 'finish', payload: { status: 'completed' } }]),
    /** Every cursor of the run, in order. */
    cursors: async () =>
      (await store.listStreamParts(turn.id, { limit: 1_000_000 })).map((row) => String(row.sequence)),
  };
}

/** The run's readers, watched: how many are open (their store subscription held) and how many parts they gave. */
function watchedRun(store: Store, turnId: string) {
  const readers = { open: 0, pulled: 0 };
  const run: StreamableRun = {
    turnId,
    stream: (options) => ({
      [Symbol.asyncIterator]() {
        const reader = readRunStream(store, turnId, options);
        readers.open += 1;
        let ended = false;
        const end = () => {
          if (!ended) readers.open -= 1;
          ended = true;
        };
        return {
          async next() {
            try {
              const next = await reader.next();
              if (next.done) end();
              else readers.pulled += 1;
              return next;
            } catch (error) {
              end();
              throw error;
            }
          },
          async return(value?: undefined) {
            const done = await reader.return(value);
            end();
            return done;
          },
        };
      },
    }),
  };
  return { run, readers };
}

/** The store, its stream reads held at a gate or failed when the test says so. */
function heldStore(store: Store) {
  const control: { hold: ReturnType<typeof gate> | null; entered: () => void; fail: boolean } = {
    hold: null,
    entered: () => undefined,
    fail: false,
  };
  const held = new Proxy(store, {
    get(target, key) {
      if (key === 'listStreamParts')
        return async (...args: Parameters<Store['listStreamParts']>) => {
          if (control.fail) throw new StoreError('the database went away');
          const hold = control.hold;
          if (hold) {
            control.hold = null;
            control.entered();
            await hold.promise;
          }
          return target.listStreamParts(...args);
        };
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: held, control };
}

/** An http server with the SSE handler; it keeps each response and its socket. */
async function sseServer(
  resolveRun: (request: IncomingMessage) => StreamableRun | Promise<StreamableRun>,
  options?: RunSseOptions,
) {
  const handler = runSseHandler(resolveRun, options);
  const responses: { response: ServerResponse; closed: Promise<void> }[] = [];
  const server: Server = createServer((request, response) => {
    const closed = new Promise<void>((resolve) => response.socket!.on('close', () => resolve()));
    responses.push({ response, closed });
    void handler(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    responses,
    connections: () =>
      new Promise<number>((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n)))),
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A raw HTTP/1.0 client on a real socket (no chunked encoding): it can stop reading, and leave.
 * Resolves once it has read the run's first two parts (its status and step).
 */
async function connectClient(port: number) {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.write('GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n');
  let received = '';
  socket.on('data', (data: Buffer) => (received += data.toString()));
  const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  const events = () =>
    received
      .slice(received.indexOf('\r\n\r\n') + 4)
      .split('\n\n')
      .filter((event) => event.includes('event: '))
      .map((event) => {
        const field = (name: string) =>
          event
            .split('\n')
            .find((line) => line.startsWith(`${name}: `))
            ?.slice(name.length + 2);
        return {
          id: field('id'),
          event: field('event')!,
          data: JSON.parse(field('data')!) as Record<string, unknown>,
        };
      });
  await waitUntil(async () => events().length >= 2);
  return { socket, ended, events };
}

/** A quiet run served by the SSE handler, its reader watched and its store reads held on demand. */
async function sseRun(store: Store, options?: RunSseOptions) {
  const run = await quietRun(store);
  const { store: held, control } = heldStore(store);
  const { run: watched, readers } = watchedRun(held, run.turnId);
  const sse = await sseServer(() => watched, options);
  return { run, control, readers, sse };
}

/** Writes parts until the server's response to the paused client holds data it cannot send. */
async function fillUntilStalled(run: Awaited<ReturnType<typeof quietRun>>, response: ServerResponse) {
  for (let batch = 0; !response.writableNeedDrain; batch++) {
    if (batch === 100) throw new Error('the socket never filled up');
    await run.say(500);
    await waitUntil(async () => response.writableNeedDrain, 300).catch(() => undefined);
  }
}

describe('stream: SSE clients that stall or leave (a real http server and socket)', () => {
  let store: Store;

  beforeAll(async () => {
    store = await openStore(tempSqliteUrl('sse'));
  });
  afterAll(async () => {
    await store?.close();
  });

  it('stream: a client that stops reading holds the server to one part beyond the socket buffer; reading again, it gets every part in order, once', async () => {
    const { run, readers, sse } = await sseRun(store);
    try {
      const client = await connectClient(sse.port);
      client.socket.pause();
      const { response } = sse.responses[0]!;
      await fillUntilStalled(run, response);
      // The server waits for the socket: it reads no more parts from the store meanwhile,
      // and what it holds in memory is the socket's buffer and the part that did not fit.
      const pulled = readers.pulled;
      await run.say(100);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(readers.pulled).toBe(pulled);
      expect(pulled).toBeLessThan((await run.cursors()).length);
      expect(response.writableLength).toBeLessThanOrEqual(response.writableHighWaterMark + 4_096);
      expect(readers.open).toBe(1);
      // It reads again: everything comes, in order, each part once, and the stream ends.
      await run.finish();
      client.socket.resume();
      await client.ended;
      const events = client.events();
      expect(events.map((event) => event.id)).toEqual(await run.cursors());
      expect(events.at(-1)).toMatchObject({ event: 'finish', data: { status: 'completed' } });
      const texts = events.filter((event) => event.event === 'text.delta').map((e) => String(e.data['text']));
      expect(texts.map((text) => Number(text.slice(0, 6)))).toEqual(texts.map((_, i) => i + 1));
      expect(readers.open).toBe(0);
    } finally {
      await sse.close();
    }
  });

  it('stream: a client stalled longer than stallMs is cut off: its connection closes (no unsent buffer kept) and its reader is released', async () => {
    const { run, readers, sse } = await sseRun(store, { stallMs: 200 });
    try {
      const client = await connectClient(sse.port);
      client.socket.pause();
      const { response, closed } = sse.responses[0]!;
      await fillUntilStalled(run, response);
      await Promise.race([
        closed,
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('the stalled connection stayed open')), 10_000),
        ),
      ]);
      expect(await sse.connections()).toBe(0);
      expect(readers.open).toBe(0);
      client.socket.destroy();
    } finally {
      await sse.close();
    }
  });

  it('stream: a client that leaves releases its reader at once: while the server waits for parts, reads the store, or waits on a full socket', async () => {
    const { run, control, readers, sse } = await sseRun(store);
    try {
      // Waiting for parts.
      const idle = await connectClient(sse.port);
      expect(readers.open).toBe(1);
      idle.socket.destroy();
      await waitUntil(async () => readers.open === 0, 10_000);

      // Reading the store when it leaves: the part read is never written to the closed socket.
      const reading = await connectClient(sse.port);
      const hold = gate();
      const entered = new Promise<void>((resolve) => (control.entered = resolve));
      control.hold = hold;
      await run.say(1);
      await entered;
      reading.socket.destroy();
      await sse.responses[1]!.closed;
      hold.open();
      await waitUntil(async () => readers.open === 0, 10_000);

      // Waiting on a full socket.
      const full = await connectClient(sse.port);
      full.socket.pause();
      await fillUntilStalled(run, sse.responses[2]!.response);
      expect(readers.open).toBe(1);
      full.socket.destroy();
      await waitUntil(async () => readers.open === 0, 10_000);
      expect(await sse.connections()).toBe(0);
    } finally {
      await sse.close();
    }
  });

  it('stream: a store failing mid-stream ends the response with a stream-error event; a run that cannot be found is a JSON 404', async () => {
    const { control, readers, sse } = await sseRun(store);
    try {
      const client = await connectClient(sse.port);
      control.fail = true;
      await client.ended;
      // The detail stays in the server's log (issue 28, finding 11): the client gets an id.
      expect(client.events().at(-1)).toMatchObject({
        event: 'stream-error',
        data: {
          error: {
            class: 'StoreError',
            message: expect.stringMatching(/^the stream failed \(error err_\w+\)/),
          },
        },
      });
      expect(readers.open).toBe(0);
    } finally {
      await sse.close();
    }
    const missing = await sseServer(() => {
      throw new RecordNotFound('turn', 'turn_nope');
    });
    try {
      const response = await fetch(`http://127.0.0.1:${missing.port}/`);
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ error: { class: 'RecordNotFound' } });
    } finally {
      await missing.close();
    }
  });

  it('stream: cancelling the UI message stream of a run with nothing to say releases its reader at once', async () => {
    const run = await quietRun(store);
    const { run: watched, readers } = watchedRun(store, run.turnId);
    const reader = toUIMessageChunks(watched).getReader();
    expect((await reader.read()).value).toMatchObject({ type: 'start' });
    expect((await reader.read()).value).toMatchObject({ type: 'start-step' });
    // The reader now waits for a part that does not come.
    const pending = reader.read();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(readers.open).toBe(1);
    void reader.cancel();
    await waitUntil(async () => readers.open === 0, 10_000);
    expect((await pending).done).toBe(true);
  });
});

/** The backends of this database that listen for stream parts. */
async function listenerPids(admin: pgClient.Client): Promise<number[]> {
  const { rows } = await admin.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN "turnkit_stream"' AND datname = current_database() AND pid <> pg_backend_pid()`,
  );
  return rows.map((row) => row.pid);
}

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
    const listeners = () => listenerPids(admin);
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

  it('stream: an SSE client that leaves while the server reads the store releases its LISTEN connection at once', async () => {
    // A store of its own: the LISTEN connection it opens is its one reader's.
    const own = await openPgTestStore(pg.schema);
    const admin = new pgClient.Client({ connectionString: pgTestUrl() });
    await admin.connect();
    const { run, control, readers, sse } = await sseRun(own.store);
    try {
      const before = (await listenerPids(admin)).length;
      const client = await connectClient(sse.port);
      await waitUntil(async () => (await listenerPids(admin)).length === before + 1, 10_000);
      const hold = gate();
      const entered = new Promise<void>((resolve) => (control.entered = resolve));
      control.hold = hold;
      await run.say(1); // NOTIFY wakes the reader: it reads the store, held there
      await entered;
      client.socket.destroy();
      await sse.responses[0]!.closed;
      hold.open();
      await waitUntil(async () => (await listenerPids(admin)).length === before, 10_000);
      expect(readers.open).toBe(0);
    } finally {
      await sse.close();
      await admin.end();
      await own.store.close();
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
