/**
 * Issue 32, part 3: the UI message stream for a front end, on the real dev server with the
 * scripted model and a SQLite store. The end's message metadata tells a completed, a failed and
 * a cancelled run apart and carries usage and cost; a failed run's text is safe to show; a
 * retried step leaves no empty step. Plain SSE: unnamed events for `onmessage`, a store error
 * named apart from the browser's own `error`, and 204 for a reconnect past `finish`.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import type { RunStreamPart } from '../../src/client/run-stream.js';
import type { RunSseOptions, StreamableRun } from '../../src/client/ui-stream.js';
import { runSseHandler, toUIMessageChunks, toUIMessageStreamResponse } from '../../src/client/ui-stream.js';
import { StoreError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { TurnKitUIMessage, TurnKitUIMessageChunk } from '../../src/ui.js';
import {
  isRunCancelled,
  isRunFailed,
  messageText,
  runCostOf,
  runErrorOf,
  runStatusOf,
  runUsageOf,
  userTextOf,
} from '../../src/ui.js';
import { requireTemporal } from '../helpers/temporal.js';
import { startKit, type TestKit } from '../helpers/turnkit.js';

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  input: z.object({ word: z.string() }),
  execute: async ({ word }) => ({ word, meaning: 'lasting' }),
});

const usage = { inputTokens: 100, outputTokens: 20, cost: 0.0025 };
const scripted = new ScriptedModel({
  helper: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? { text: 'Durable means lasting.', usage }
      : { toolCalls: [{ name: 'lookup', arguments: { word: 'durable' } }], usage },
  broken: () => ({
    error: { status: 400, message: 'bad request from https://gateway.internal:8443 key sk-secret' },
  }),
  slow: () => ({ text: 'never said', delayMs: 60_000 }),
  flaky: (_request, { call }) =>
    call === 0
      ? { text: 'A first answer that ', error: { status: 503 } }
      : { text: 'The whole answer.', usage },
});

/** The chunks of a UI message stream response, and the message the AI SDK's client builds of them. */
async function readUI(
  response: Response,
): Promise<{ chunks: TurnKitUIMessageChunk[]; message: TurnKitUIMessage }> {
  const chunks: TurnKitUIMessageChunk[] = [];
  const parsed = parseJsonEventStream({ stream: response.body!, schema: uiMessageChunkSchema });
  for await (const result of parsed) {
    if (!result.success) throw result.error;
    chunks.push(result.value as TurnKitUIMessageChunk);
  }
  let message: TurnKitUIMessage | undefined;
  const replay = new ReadableStream<TurnKitUIMessageChunk>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  for await (const next of readUIMessageStream<TurnKitUIMessage>({ stream: replay })) message = next;
  return { chunks, message: message! };
}

async function firstPart(run: RunHandle, type: RunStreamPart['type']): Promise<void> {
  for await (const part of run.stream()) if (part.type === type) return;
}

/** A Node http server with runSseHandler; `get` answers status, headers and body. */
async function sseServer(resolveRun: () => StreamableRun, options: RunSseOptions = {}) {
  const handler = runSseHandler(resolveRun, { stallMs: 2_000, ...options });
  const server = createServer((request, response) => void handler(request, response));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return {
    async get(headers: Record<string, string> = {}) {
      const response = await fetch(url, { headers });
      return { status: response.status, body: await response.text() };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** SSE events as field maps (`id`, `event`, `data` parsed). */
const events = (body: string) =>
  body
    .trim()
    .split('\n\n')
    .filter(Boolean)
    .map((block) => {
      const fields: Record<string, unknown> = {};
      for (const line of block.split('\n')) {
        const name = line.slice(0, line.indexOf(': '));
        const value = line.slice(line.indexOf(': ') + 2);
        fields[name] = name === 'data' ? JSON.parse(value) : value;
      }
      return fields;
    });

describe('ui kit: the UI message stream for a front end', () => {
  let kit: TestKit;

  beforeAll(async () => {
    await requireTemporal();
    kit = await startKit({
      model: scripted,
      agents: ['helper', 'broken', 'slow', 'flaky'].map((name) =>
        defineAgent({ name, ...(name === 'helper' ? { tools: [lookup] } : {}) }),
      ),
    });
  });
  afterAll(async () => {
    await kit?.stop();
  });

  it('ui kit: a completed run ends with finish, its metadata the status, ids, model, usage and cost', async () => {
    const run = await kit.client.run('helper', 'Define durable', { input: { lang: 'en' } });
    const { chunks, message } = await readUI(toUIMessageStreamResponse(run));
    const turn = await run.turn();
    expect(chunks[0]).toMatchObject({
      type: 'start',
      messageMetadata: { turnId: run.turnId, status: 'running' },
    });
    expect(chunks.at(-1)).toMatchObject({
      type: 'finish',
      messageMetadata: { status: 'completed', turnId: run.turnId, rootTurnId: run.turnId },
    });
    expect(message.metadata).toEqual({
      turnId: run.turnId,
      status: 'completed',
      rootTurnId: run.turnId,
      conversationId: turn.conversationId,
      agentName: 'helper',
      model: turn.model,
      usage: await run.usage(),
      cost: await run.cost(),
    });
    expect(runStatusOf(message)).toBe('completed');
    expect(runUsageOf(message)).toMatchObject({ input_tokens: 200, output_tokens: 40 });
    expect(runCostOf(message)).toBeCloseTo(0.005, 10);
    expect(messageText(message)).toBe('Durable means lasting.');
    // Rebuilding the chat from the store: the user's own text, not the `Task:` message.
    const [task] = await run.transcript();
    expect((task!.content[0] as { text: string }).text).toMatch(/^Task:\nDefine durable\n\nInput:/);
    expect(userTextOf(task!)).toBe('Define durable');
  });

  it('ui kit: a failed run: metadata says failed with usage and cost, and its error text names the class, not the provider text', async () => {
    const run = await kit.client.run('broken', 'Fail please');
    const { chunks, message } = await readUI(toUIMessageStreamResponse(run));
    const turn = await run.turn();
    expect(turn.status).toBe('failed');
    const types = chunks.map((chunk) => chunk.type);
    expect(types.slice(-2)).toEqual(['message-metadata', 'error']);
    expect(isRunFailed(message)).toBe(true);
    expect(message.metadata).toMatchObject({
      status: 'failed',
      usage: await run.usage(),
      cost: await run.cost(),
    });
    const text = runErrorOf(message)!;
    expect(text).toBe(`the run failed (${turn.error!.class}); turn ${run.turnId}`);
    expect(chunks.at(-1)).toEqual({ type: 'error', errorText: text });
    expect(JSON.stringify(chunks)).not.toMatch(/gateway\.internal|sk-secret/);
    // The server may choose to show the message.
    const shown = await readUI(
      toUIMessageStreamResponse(run, { errorText: (error) => `failed: ${error?.message ?? ''}` }),
    );
    expect(runErrorOf(shown.message)).toContain('gateway.internal');
  });

  it('ui kit: a cancelled run: metadata says cancelled (useChat ignores abort), with usage and cost', async () => {
    const run = await kit.client.run('slow', 'Take your time');
    await firstPart(run, 'step.started');
    await run.cancel();
    const { chunks, message } = await readUI(toUIMessageStreamResponse(run));
    expect((await run.turn()).status).toBe('cancelled');
    expect(chunks.map((chunk) => chunk.type).slice(-2)).toEqual(['message-metadata', 'abort']);
    expect(isRunCancelled(message)).toBe(true);
    expect(message.metadata).toMatchObject({
      status: 'cancelled',
      turnId: run.turnId,
      usage: await run.usage(),
      cost: await run.cost(),
    });
    expect(typeof message.metadata!.cost).toBe('number');
  });

  it('ui kit: a retried model step leaves no empty step-start: the retry goes into the step the reset emptied', async () => {
    const run = await kit.client.run('flaky', 'Answer after a retry');
    const live: RunStreamPart[] = [];
    for await (const part of run.stream()) live.push(part);
    expect(live.map((part) => part.type)).toContain('step.restarted');
    const { chunks, message } = await readUI(toUIMessageStreamResponse(run));
    expect(chunks.filter((chunk) => chunk.type === 'reset-step')).toHaveLength(1);
    expect(chunks.filter((chunk) => chunk.type === 'start-step')).toHaveLength(1);
    expect(message.parts.map((part) => part.type)).toEqual(['step-start', 'text']);
    expect(messageText(message)).toBe('The whole answer.');
  });

  it('ui kit: SSE with namedEvents false sends every part as an unnamed message event, its type in the data', async () => {
    const run = await kit.client.run('helper', 'Define durable over plain SSE');
    await run.result();
    const sse = await sseServer(() => run, { namedEvents: false });
    try {
      const { status, body } = await sse.get();
      expect(status).toBe(200);
      expect(body).not.toMatch(/^event:/m);
      const all = events(body);
      expect(all.length).toBeGreaterThan(5);
      for (const event of all) expect(Object.keys(event).sort()).toEqual(['data', 'id']);
      expect(all.at(-1)!['data']).toMatchObject({ type: 'finish', status: 'completed' });
      expect(all.map((event) => (event['data'] as { type: string }).type)).toContain('tool.call');
    } finally {
      await sse.close();
    }
  });

  it('ui kit: a reconnect past finish gets 204 and no repeated finish; one before it gets the rest', async () => {
    const run = await kit.client.run('helper', 'Define durable, then reconnect');
    await run.result();
    const sse = await sseServer(() => run);
    try {
      const all = events((await sse.get()).body);
      const finish = all.at(-1)!;
      expect(finish['event']).toBe('finish');
      const started = Date.now();
      const again = await sse.get({ 'last-event-id': String(finish['id']) });
      expect(again).toEqual({ status: 204, body: '' });
      // At once: not after the reader's grace for a lost finish.
      expect(Date.now() - started).toBeLessThan(1_000);
      const before = await sse.get({ 'last-event-id': String(all.at(-2)!['id']) });
      expect(before.status).toBe(200);
      expect(events(before.body).map((event) => event['id'])).toEqual([finish['id']]);
      // The UI message stream resumed past the end has nothing more either.
      const reader = toUIMessageChunks(run, { after: String(finish['id']) }).getReader();
      const chunks: TurnKitUIMessageChunk[] = [];
      for (let next = await reader.read(); !next.done; next = await reader.read()) chunks.push(next.value);
      expect(chunks.map((chunk) => chunk.type)).toEqual(['start']);
    } finally {
      await sse.close();
    }
  });
});

describe('ui kit: SSE store errors', () => {
  const failing: StreamableRun = {
    turnId: 'turn_000000000000000000000001',
    stream: () => ({
      async *[Symbol.asyncIterator]() {
        yield {
          cursor: '1',
          type: 'status',
          turnId: 'turn_000000000000000000000001',
          step: null,
          status: 'running',
        };
        throw new StoreError('the database is down');
      },
    }),
  };

  it("ui kit: a store error mid-stream is a stream-error event, never the browser's own error name", async () => {
    for (const namedEvents of [true, false]) {
      const sse = await sseServer(() => failing, { namedEvents, logger: { error: () => {} } });
      try {
        const { status, body } = await sse.get();
        expect(status).toBe(200);
        expect(body).not.toMatch(/^event: error$/m);
        const last = events(body).at(-1)!;
        expect(last['data']).toMatchObject({ type: 'stream-error', error: { class: 'StoreError' } });
        expect(last['event']).toBe(namedEvents ? 'stream-error' : undefined);
        expect(last['id']).toBeUndefined();
      } finally {
        await sse.close();
      }
    }
  });
});
