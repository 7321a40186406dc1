/**
 * Layer: engine driver (test/helpers/engine-driver.ts), memory store, no Temporal server.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sendReply } from '../helpers/openai-sse.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { imageTool } from '../../src/agents/image-tool.js';
import { viewMediaTool } from '../../src/agents/view-media-tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { InputError } from '../../src/errors.js';
import { ScriptedImageModel, TINY_PNG_BASE64 } from '../../src/models/image.js';
import { createModelClient } from '../../src/models/providers.js';
import type { ModelRequest } from '../../src/models/types.js';
import { ScriptedModel, toolCall } from '../../src/models/scripted-model.js';
import type { ScriptedStep } from '../../src/models/scripted-model.js';
import type { DriverKit } from '../helpers/driver-kit.js';
import { startDriverKit } from '../helpers/driver-kit.js';

/**
 * A local server speaking OpenAI's chat-completions wire format (the vision model and a
 * model reading user input), and serving media files for `view_media` to fetch.
 */
const received: Record<string, unknown>[] = [];
/** Every GET the media server answered (what `view_media` fetched). */
const fetched: string[] = [];
const PDF_BASE64 = Buffer.from('%PDF-1.4 tiny').toString('base64');
let base = '';
const completion = (text: string, usage = { prompt_tokens: 1_000, completion_tokens: 100 }) => ({
  id: 'chatcmpl-media',
  object: 'chat.completion',
  created: 1,
  model: 'vision-1',
  choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
  usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
});
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  let raw = '';
  req.on('data', (chunk) => (raw += chunk));
  req.on('end', () => {
    const url = req.url ?? '';
    if (req.method === 'GET') {
      fetched.push(url);
      if (url === '/media/cat.png') {
        res.writeHead(200, { 'content-type': 'image/png' });
        return res.end(Buffer.from(TINY_PNG_BASE64, 'base64'));
      }
      if (url === '/media/movie.mp4') {
        res.writeHead(200, { 'content-type': 'video/mp4' });
        return res.end(Buffer.from('not really a movie'));
      }
      if (url === '/media/big.png') {
        res.writeHead(200, { 'content-type': 'image/png' });
        return res.end(Buffer.alloc(5_000, 1));
      }
      if (url === '/media/chunked.png') {
        // No content-length: the size is only known by reading.
        res.writeHead(200, { 'content-type': 'image/png' });
        for (let i = 0; i < 5; i++) res.write(Buffer.alloc(1_000, 2));
        return res.end();
      }
      res.writeHead(404, { 'content-type': 'text/plain' });
      return res.end('not found');
    }
    const body = JSON.parse(raw || '{}') as Record<string, unknown>;
    received.push(body);
    // A turn's model step streams: the reply goes out in the provider's SSE format.
    sendReply(res, body, 200, completion('A small red square on white.'));
  });
});

const contentParts = (body: Record<string, unknown>) =>
  (body['messages'] as { role: string; content: unknown }[])
    .filter((m) => m.role === 'user' && Array.isArray(m.content))
    .flatMap((m) => m.content as Record<string, unknown>[]);

const lastToolResult = (request: ModelRequest) => {
  const tool = [...request.messages].reverse().find((m) => m.role === 'tool');
  return tool ? (JSON.parse(tool.content) as Record<string, unknown>) : null;
};

let kit: DriverKit;
let vision: ReturnType<typeof createModelClient>;

const artistScript = (request: ModelRequest, { call }: { call: number }): ScriptedStep => {
  if (call === 0) return toolCall('generate_image', { prompt: 'a red square' });
  const result = lastToolResult(request)!;
  if (call === 1)
    return toolCall('view_media', {
      media: result['image_message_id'] as string,
      objective: 'What is shown?',
    });
  const imageId = request.messages
    .flatMap((m) => (m.role === 'tool' ? [JSON.parse(m.content) as Record<string, unknown>] : []))
    .find((r) => r['image_message_id'])!['image_message_id'];
  return `Painted ${String(imageId)}: ${String(result['analysis'])}`;
};

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  vision = createModelClient({ provider: 'openai', apiKey: 'sk-test', baseURL: `${base}/v1`, maxRetries: 0 });
  const model = new ScriptedModel({
    artist: artistScript,
    receiver: () => 'noted',
    inspector: (request) =>
      request.messages.some((m) => m.role === 'tool')
        ? 'Some media could not be viewed.'
        : {
            toolCalls: [
              { name: 'view_media', arguments: { media: `${base}/media/missing.png`, objective: 'x' } },
              { name: 'view_media', arguments: { media: `${base}/media/movie.mp4`, objective: 'x' } },
              { name: 'view_media', arguments: { media: `${base}/media/big.png`, objective: 'x' } },
              { name: 'view_media', arguments: { media: 'msg_000000000000000000000000', objective: 'x' } },
              { name: 'view_media', arguments: { media: `${base}/media/chunked.png`, objective: 'x' } },
              { name: 'view_media', arguments: { media: `${base}/media/cat.png`, objective: 'Colour?' } },
            ],
          },
    prober: (request) =>
      request.messages.some((m) => m.role === 'tool')
        ? 'Nothing reachable.'
        : {
            toolCalls: ['127.0.0.1', 'localhost', '[::ffff:127.0.0.1]'].map((host) => ({
              name: 'view_media',
              arguments: { media: `${base.replace('127.0.0.1', host)}/media/cat.png`, objective: 'Copy it' },
            })),
          },
    frugal: (request) =>
      request.messages.some((m) => m.role === 'tool')
        ? 'unreachable'
        : toolCall('view_media', { media: `${base}/media/cat.png`, objective: 'Colour?' }),
  });
  // The media server is local: this deployment opts in to plain http on its own network.
  const view = viewMediaTool({
    client: vision,
    model: 'vision-1',
    maxBytes: 1_000,
    allowHttp: true,
    allowPrivateNetwork: ['127.0.0.1/32'],
  });
  kit = await startDriverKit({
    model,
    runtime: { cost: { costRates: { 'vision-1': { input: 1, output: 2 } } } },
    agents: [
      defineAgent({
        name: 'artist',
        tools: [imageTool({ imageModel: new ScriptedImageModel({ modelId: 'img' }) }), view],
      }),
      defineAgent({ name: 'receiver' }),
      defineAgent({ name: 'inspector', tools: [view] }),
      // The safe default: https and public addresses only.
      defineAgent({ name: 'prober', tools: [viewMediaTool({ client: vision, model: 'vision-1' })] }),
      defineAgent({ name: 'frugal', tools: [view], limits: { maxSpend: 0.001 } }),
      defineAgent({ name: 'looker', model: 'vision-1', client: vision }),
    ],
  });
});
afterAll(async () => {
  await kit?.stop();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('media: view_media, media input, media analysis', () => {
  it('CORE-28 E2E-05 images and files in a user input are stored as parts and reach the provider as real image and file content', async () => {
    const before = received.length;
    const run = await kit.client.run('looker', 'Describe these', {
      media: [
        { data: TINY_PNG_BASE64, mimeType: 'image/png' },
        { url: `data:application/pdf;base64,${PDF_BASE64}`, filename: 'brief.pdf' },
      ],
    });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('A small red square on white.');
    const [task] = await run.transcript();
    expect(task!.content.map((p) => p.type)).toEqual(['text', 'image', 'file']);
    expect(task!.content[2]).toMatchObject({
      mime_type: 'application/pdf',
      filename: 'brief.pdf',
      data: PDF_BASE64,
    });
    const parts = contentParts(received[before]!);
    expect(parts[0]).toMatchObject({ type: 'text', text: expect.stringContaining('Describe these') });
    expect(parts).toContainEqual({
      type: 'image_url',
      image_url: { url: `data:image/png;base64,${TINY_PNG_BASE64}` },
    });
    expect(parts).toContainEqual({
      type: 'file',
      file: { filename: 'brief.pdf', file_data: `data:application/pdf;base64,${PDF_BASE64}` },
    });
    expect(JSON.stringify(received[before])).not.toContain('[image ');
  });

  it('CORE-28 a conversation follow-up with an image (ask) sends it as a real image part', async () => {
    const conversation = await kit.client.conversation('looker');
    const before = received.length;
    const run = await conversation.ask('And this one?', {
      media: [{ url: `data:image/png;base64,${TINY_PNG_BASE64}` }],
    });
    expect((await run.result()).status).toBe('completed');
    expect(contentParts(received[before]!)).toEqual([
      { type: 'text', text: 'And this one?' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${TINY_PNG_BASE64}` } },
    ]);
    await expect(
      conversation.ask('bad', { media: [{ data: 'AAAA', mimeType: 'audio/x-wav' }] }),
    ).rejects.toThrow(InputError);
  });

  it('CORE-28 media input of an unsupported type, too large, or neither URL nor data is an InputError before anything is written', async () => {
    const turnsBefore = (await kit.store.listTurns({})).length;
    for (const media of [
      [{ data: 'AAAA', mimeType: 'video/mp4' }],
      [{ data: Buffer.alloc(21 * 1024 * 1024).toString('base64'), mimeType: 'image/png' }],
      [{ mimeType: 'image/png' }],
      [{ url: 'ftp://example.com/x.png', mimeType: 'image/png' }],
    ]) {
      await expect(kit.client.run('looker', 'x', { media })).rejects.toThrow(InputError);
    }
    expect((await kit.store.listTurns({})).length).toBe(turnsBefore);
  });

  it('CORE-28 E2E-05 a background turn paints, then analyses the image with view_media (a real image part to the provider), returns the image message id through a completion callback, and the id resolves after reconstruction', async () => {
    const receiver = await kit.client.conversation('receiver');
    const before = received.length;
    const run = await kit.client.run('artist', 'Paint and inspect', { callback: receiver.id });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const messages = await run.transcript();
    expect(messages.map((m) => m.kind)).toEqual([
      'text',
      'tool_call',
      'tool_result',
      'image',
      'tool_call',
      'tool_result',
      'media_analysis',
      'text',
    ]);
    const image = messages.find((m) => m.kind === 'image')!;
    const analysis = messages.find((m) => m.kind === 'media_analysis')!;
    expect(turn.outputText).toBe(`Painted ${image.id}: A small red square on white.`);
    expect(analysis.content[0]).toMatchObject({
      type: 'media_analysis',
      text: 'A small red square on white.',
      media: { kind: 'image', mime_type: 'image/png', message_id: image.id },
      model: 'vision-1',
    });
    // The vision call got the painted bytes as an image part.
    const visionCall = received[before]!;
    expect(contentParts(visionCall)).toContainEqual({
      type: 'image_url',
      image_url: { url: `data:image/png;base64,${TINY_PNG_BASE64}` },
    });
    expect(contentParts(visionCall)).toContainEqual({ type: 'text', text: 'What is shown?' });
    // Charged through the rates: 1 000 input at $1/M + 100 output at $2/M.
    expect(turn.cost).toBeCloseTo(0.0012, 8);
    const types = (await run.events()).map((e) => e.type);
    expect(types).toEqual(
      expect.arrayContaining(['image.requested', 'image.completed', 'media.requested', 'media.completed']),
    );

    // The completion callback carries the output (and so the image id) to the receiver.
    let delivery;
    for (let i = 0; i < 100 && !delivery; i++) {
      delivery = (await receiver.inbox()).find((d) => d.sourceTurnId === turn.id);
      if (!delivery) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(delivery!.key).toBe(`completion:${turn.id}`);
    const payload = JSON.parse(delivery!.payload['text'] as string) as Record<string, unknown>;
    expect(JSON.stringify(payload)).toContain(image.id);

    // Another client, built from nothing but the store, resolves the id to the image bytes.
    const other = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal: kit.client.temporal,
      taskQueue: kit.taskQueue,
    });
    const reloaded = await (await other.handle(turn.id)).transcript();
    const resolved = reloaded.find((m) => m.id === image.id)!;
    expect(resolved.content[0]).toMatchObject({
      type: 'image',
      mime_type: 'image/png',
      data: TINY_PNG_BASE64,
    });
  });

  it('CORE-28 view_media bad input: a URL that 404s (no status echoed), an unsupported type, an oversized file (declared or only streamed), an unknown message are ToolErrors the model reads; a good one is analysed; the turn goes on', async () => {
    const run = await kit.client.run('inspector', 'Look at all of them');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual([...Array<string>(5).fill('failed'), 'completed']);
    const errors = executions.slice(0, 5).map((e) => e.error!.message);
    // No status and no URL for the model (issue 28, finding 2): the event log has the detail.
    expect(errors[0]).toBe('media URL could not be fetched (only public https URLs are fetched)');
    expect(errors[1]).toMatch(/unsupported media type video\/mp4/);
    expect(errors[2]).toMatch(/larger than 1000 bytes/);
    expect(errors[3]).toMatch(/no image or file message/);
    expect(errors[4]).toMatch(/larger than 1000 bytes/);
    const messages = await run.transcript();
    expect(messages.filter((m) => m.kind === 'tool_result')).toHaveLength(6);
    expect(messages.filter((m) => m.kind === 'media_analysis')).toHaveLength(1);
    expect(messages.findIndex((m) => m.kind === 'media_analysis')).toBeGreaterThan(
      messages.map((m) => m.kind).lastIndexOf('tool_result'),
    );
    expect(analysisUrl(messages.find((m) => m.kind === 'media_analysis')!.content[0])).toBe(
      `${base}/media/cat.png`,
    );
  });

  it('security: a turn whose model asks view_media (default options) for 127.0.0.1, localhost and [::ffff:127.0.0.1] gets three refusals without status or URL; the worker sends no request', async () => {
    const before = fetched.length;
    const calls = received.length;
    const run = await kit.client.run('prober', 'Look at the local files');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual(['failed', 'failed', 'failed']);
    expect(new Set(executions.map((e) => e.error!.message))).toEqual(
      new Set(['media URL could not be fetched (only public https URLs are fetched)']),
    );
    expect(fetched.length).toBe(before);
    // No vision call either.
    expect(received.length).toBe(calls);
    expect((await run.transcript()).some((m) => m.kind === 'media_analysis')).toBe(false);
  });

  it('CORE-26 a media analysis over maxSpend fails the run with BudgetError; the cost is recorded, no analysis is stored', async () => {
    const run = await kit.client.run('frugal', 'Look');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ message: 'cost limit reached' });
    expect(turn.cost).toBeCloseTo(0.0012, 8);
    expect((await run.transcript()).some((m) => m.kind === 'media_analysis')).toBe(false);
    expect((await run.events()).map((e) => e.type)).toContain('media.completed');
  });
});

function analysisUrl(part: unknown): unknown {
  return (part as { media?: { url?: string } }).media?.url;
}
