import { MockImageModelV3 } from 'ai/test';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolContext } from '../../src/agents/tool.js';
import { validateToolArguments } from '../../src/agents/tool.js';
import { ArgumentError, ToolError, ToolValidationError } from '../../src/errors.js';
import type { ImageRequest } from '../../src/models/image.js';
import { AiSdkImageModel, ScriptedImageModel, TINY_PNG_BASE64 } from '../../src/models/image.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { PaintGate, PaintResult } from '../../src/specialists/painter.js';
import { PAINTER_INSTRUCTIONS, painter, paintImageTool } from '../../src/specialists/painter.js';
import type { JsonObject } from '../../src/store/types.js';
import { toolContext } from './context.js';

const allow: PaintGate = () => true;

/** `ref.example` stands for a public image host; it serves a PNG at any path and counts requests. */
const served: string[] = [];
const refServer = createServer((req, res) => {
  served.push(req.url ?? '');
  res.writeHead(200, { 'content-type': 'image/png' });
  res.end(Buffer.from(TINY_PNG_BASE64, 'base64'));
});
let ref = '';
beforeAll(async () => {
  await new Promise<void>((resolve) => refServer.listen(0, '127.0.0.1', resolve));
  ref = `http://ref.example:${(refServer.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => refServer.close(() => resolve())));
const PNG_DATA_URL = `data:image/png;base64,${TINY_PNG_BASE64}`;

function setup(
  options: { gate?: PaintGate; maxReferenceImages?: number; imageModel?: ScriptedImageModel } = {},
) {
  const imageModel =
    options.imageModel ??
    new ScriptedImageModel({
      modelId: 'img-1',
      provider: 'acme',
      script: [
        { images: [{ mediaType: 'image/png', url: 'https://cdn.example/cat.png', data: TINY_PNG_BASE64 }] },
      ],
    });
  const agent = painter({
    model: 'text-model',
    imageModel,
    gate: options.gate ?? allow,
    maxReferenceImages: options.maxReferenceImages,
    // ref.example is the local server, let through as a deployment's own image host would be.
    resolveHost: async () => [{ address: '127.0.0.1', family: 4 }],
    allowHttp: true,
    allowPrivateNetwork: ['127.0.0.1/32'],
  });
  const tool = agent.tools[0]!;
  const paint = async (args: JsonObject, context?: ToolContext) =>
    (await tool.execute(
      await validateToolArguments(tool, args),
      context ?? (await toolContext()),
    )) as PaintResult;
  return { agent, tool, imageModel, paint };
}

describe('painter', () => {
  it('SP-03 painter: the gate receives the request with the image model; references and mask are fetched by the tool and forwarded as data: URLs, params as given; returns the URL and image message id', async () => {
    served.length = 0;
    const seen: { request: ImageRequest; context: ToolContext }[] = [];
    const { paint, imageModel } = setup({
      gate: (request, { context }) => {
        seen.push({ request, context });
        return true;
      },
    });
    const context = await toolContext();
    const result = await paint(
      {
        prompt: 'a cat in a hat',
        reference_images: [`${ref}/1.png`, 'data:image/png;base64,AAAA'],
        mask: `${ref}/mask.png`,
        params: { size: '1024x1024', seed: 7 },
      },
      context,
    );
    const expected: ImageRequest = {
      model: 'img-1',
      prompt: 'a cat in a hat',
      referenceImages: [`${ref}/1.png`, 'data:image/png;base64,AAAA'],
      mask: `${ref}/mask.png`,
      params: { size: '1024x1024', seed: 7 },
    };
    expect(seen).toHaveLength(1);
    expect(seen[0]!.request).toEqual(expected);
    expect(seen[0]!.context).toBe(context);
    expect(served).toEqual(['/1.png', '/mask.png']);
    expect(imageModel.calls).toEqual([
      {
        ...expected,
        referenceImages: [PNG_DATA_URL, 'data:image/png;base64,AAAA'],
        mask: PNG_DATA_URL,
      },
    ]);
    expect(result.conversation_id).toBe(context.turn.conversationId);
    expect(result.image).toEqual({
      type: 'image',
      url: 'https://cdn.example/cat.png',
      mime_type: 'image/png',
      model: 'img-1',
      provider: 'acme',
    });
    expect(result.image).not.toHaveProperty('data');
    const message = await context.store.loadMessage(result.image_message_id);
    expect(message).toMatchObject({
      role: 'assistant',
      kind: 'image',
      turnId: context.turn.id,
      toolExecutionId: null,
    });
    expect(message.content).toEqual([{ ...result.image, data: TINY_PNG_BASE64 }]);
    expect(message.metadata).toMatchObject({
      tool_execution_id: context.execution.id,
      tool_call_id: 'call_1',
    });
  });

  it('SP-03 painter: a denying gate is a ToolError and nothing is painted; only literal true approves', async () => {
    for (const answer of [false, 'true', 1, {}, null, undefined]) {
      const { paint, imageModel } = setup({ gate: () => answer });
      await expect(paint({ prompt: 'x' })).rejects.toThrow(ToolError);
      expect(imageModel.calls).toHaveLength(0);
    }
    const { paint, imageModel } = setup({ gate: async () => true });
    await expect(paint({ prompt: 'x' })).resolves.toMatchObject({ image: { type: 'image' } });
    expect(imageModel.calls).toHaveLength(1);
  });

  it('SP-03 painter: a non-callable gate is an ArgumentError at construction', () => {
    const imageModel = new ScriptedImageModel();
    for (const gate of [undefined, null, true, 'yes', {}]) {
      expect(() => painter({ imageModel, gate: gate as unknown as PaintGate })).toThrow(ArgumentError);
    }
    expect(() => painter({ imageModel: {} as ScriptedImageModel, gate: allow })).toThrow(ArgumentError);
    expect(() => painter({ imageModel, gate: allow, maxReferenceImages: -1 })).toThrow(ArgumentError);
  });

  it('SP-03 painter: too many reference images is a ToolValidationError before the gate runs', async () => {
    let gated = 0;
    const { paint, imageModel } = setup({ maxReferenceImages: 1, gate: () => ++gated > 0 });
    await expect(paint({ prompt: 'x', reference_images: [PNG_DATA_URL, PNG_DATA_URL] })).rejects.toThrow(
      ToolValidationError,
    );
    expect(gated).toBe(0);
    expect(imageModel.calls).toHaveLength(0);
    await expect(paint({ prompt: 'x', reference_images: [PNG_DATA_URL] })).resolves.toBeDefined();
  });

  it('SP-03 painter: only one paint call is made per tool call; a terminal tool whose completion text is the JSON result', async () => {
    const { agent, tool, paint, imageModel } = setup();
    const result = await paint({ prompt: 'once' });
    expect(imageModel.calls).toHaveLength(1);
    expect(tool.name).toBe('paint_image');
    expect(tool.terminal).toBe(true);
    expect(tool.readOnly).toBe(false);
    expect(tool.recovery).toBe('unknown');
    expect(JSON.parse(tool.completionMessage(JSON.parse(JSON.stringify(result))))).toEqual(result);
    expect(tool.jsonSchema).toMatchObject({ required: ['prompt'] });
    expect(await validateToolArguments(tool, { prompt: 'p' })).toEqual({ prompt: 'p', reference_images: [] });
    expect(agent).toMatchObject({ name: 'painter', model: 'text-model' });
    expect(agent.instructions).toBe(PAINTER_INSTRUCTIONS);
  });

  it('SP-03 painter: an image with neither URL nor data, or no image at all, is a ToolError and no message is written', async () => {
    for (const images of [[{ mediaType: 'image/png' }], []]) {
      const { paint } = setup({ imageModel: new ScriptedImageModel({ script: [{ images }] }) });
      const context = await toolContext();
      await expect(paint({ prompt: 'x' }, context)).rejects.toThrow(ToolError);
      expect(await context.store.listMessages(context.turn.conversationId)).toEqual([]);
    }
  });

  it('SP-03 painter: reported usage and cost are added to the turn', async () => {
    const imageModel = new ScriptedImageModel({
      script: [
        {
          images: [{ mediaType: 'image/png', data: TINY_PNG_BASE64 }],
          usage: { inputTokens: 12, cost: 0.04 },
        },
      ],
    });
    const tool = paintImageTool({ imageModel, gate: allow });
    const context = await toolContext();
    await tool.execute(await validateToolArguments(tool, { prompt: 'x' }), context);
    const turn = await context.store.loadTurn(context.turn.id);
    expect(turn.cost).toBeCloseTo(0.04);
    expect(turn.usage).toMatchObject({ input_tokens: 12, total_tokens: 12 });
  });

  it('SP-03 AiSdkImageModel maps the request onto generateImage and returns base64 images; references reach the SDK as bytes, a URL is refused', async () => {
    const calls: unknown[] = [];
    const sdk = new MockImageModelV3({
      provider: 'mock-provider',
      modelId: 'mock-image',
      doGenerate: async (options) => {
        calls.push({ ...options, abortSignal: undefined });
        return {
          images: [TINY_PNG_BASE64],
          warnings: [],
          response: { timestamp: new Date(), modelId: 'mock-image', headers: undefined },
          usage: { inputTokens: 3, outputTokens: 0, totalTokens: 3 },
        };
      },
    });
    const model = new AiSdkImageModel({ model: sdk, maxRetries: 0 });
    expect(model.modelId).toBe('mock-image');
    const result = await model.generate(
      {
        model: 'mock-image',
        prompt: 'p',
        referenceImages: [PNG_DATA_URL],
        params: { size: '512x512', seed: 3, provider_options: { mock: { style: 'vivid' } } },
      },
      { signal: new AbortController().signal },
    );
    expect(result.images).toEqual([{ mediaType: 'image/png', data: TINY_PNG_BASE64 }]);
    expect(result.usage).toEqual({ inputTokens: 3, outputTokens: 0 });
    expect(calls[0]).toMatchObject({
      prompt: 'p',
      size: '512x512',
      seed: 3,
      n: 1,
      files: [
        {
          type: 'file',
          mediaType: 'image/png',
          data: new Uint8Array(Buffer.from(TINY_PNG_BASE64, 'base64')),
        },
      ],
      providerOptions: { mock: { style: 'vivid' } },
    });
    // A URL (or anything but inline data) never reaches the SDK, which would hand it to the provider.
    for (const reference of ['https://ref.example/1.png', 'http\t://169.254.169.254/', 'iVBORw0KGgo=']) {
      await expect(
        model.generate(
          { model: 'mock-image', prompt: 'p', referenceImages: [reference], params: {} },
          { signal: new AbortController().signal },
        ),
      ).rejects.toThrow(ArgumentError);
    }
    expect(calls).toHaveLength(1);
  });

  it('SP-03 painter: a custom fetch (a proxy) gets each reference hop; the image model still gets data: content', async () => {
    served.length = 0;
    const hops: string[] = [];
    const imageModel = new ScriptedImageModel({ modelId: 'img-1' });
    const agent = painter({
      imageModel,
      gate: allow,
      allowHttp: true,
      allowPrivateNetwork: ['127.0.0.1/32'],
      resolveHost: async () => [{ address: '127.0.0.1', family: 4 }],
      fetch: (url, init) => {
        hops.push(url);
        return fetch(url.replace('ref.example', '127.0.0.1'), init);
      },
    });
    const tool = agent.tools[0]!;
    await tool.execute(
      await validateToolArguments(tool, { prompt: 'x', reference_images: [`${ref}/via-proxy.png`] }),
      await toolContext(),
    );
    expect(hops).toEqual([`${ref}/via-proxy.png`]);
    expect(served).toEqual(['/via-proxy.png']);
    expect(imageModel.calls.map((request) => request.referenceImages)).toEqual([[PNG_DATA_URL]]);
    expect(agent).not.toHaveProperty('fetch');
  });

  it('SP-03 painter takes its text model and client like any agent', () => {
    const client = new ScriptedModel({});
    const agent = painter({
      model: 'm',
      client,
      imageModel: new ScriptedImageModel(),
      gate: allow,
      instructions: 'Square only.',
    });
    expect(agent.client).toBe(client);
    expect(agent.instructions).toBe(`${PAINTER_INSTRUCTIONS}\n\nSquare only.`);
  });
});
