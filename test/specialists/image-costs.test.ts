import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { imageTool } from '../../src/agents/image-tool.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedImageModel, TINY_PNG_BASE64 } from '../../src/models/image.js';
import { ScriptedModel, toolCall } from '../../src/models/scripted-model.js';
import { painter } from '../../src/specialists/painter.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const png = { images: [{ mediaType: 'image/png', data: TINY_PNG_BASE64 }] };
const rated = new ScriptedImageModel({
  modelId: 'img-rated',
  script: () => ({ ...png, usage: { inputTokens: 1_000, outputTokens: 50_000 } }),
});
const calculated = new ScriptedImageModel({
  modelId: 'img-calc',
  script: () => ({ ...png, usage: { inputTokens: 7, outputTokens: 7 } }),
});
const huge = new ScriptedImageModel({
  modelId: 'img-huge',
  script: () => ({ images: [{ mediaType: 'image/png', data: 'A'.repeat(4_000) }] }),
});

const note = defineTool({
  name: 'note',
  description: 'Takes a note.',
  input: z.object({ text: z.string() }),
  execute: ({ text }) => ({ noted: text }),
});

const paintCall = toolCall('paint_image', { prompt: 'a red square' });
const model = new ScriptedModel({
  rated: () => paintCall,
  calculated: () => paintCall,
  capped: () => paintCall,
  huge: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'could not store it'
      : toolCall('paint_image', { prompt: 'big' }),
  sketchy: () => ({
    toolCalls: [
      { name: 'generate_image', arguments: { prompt: 'a sketch' } },
      { name: 'note', arguments: { text: 'denied' } },
    ],
  }),
  sketcher: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'Drew it and noted it.'
      : {
          toolCalls: [
            { name: 'generate_image', arguments: { prompt: 'a sketch' } },
            { name: 'note', arguments: { text: 'sketched' } },
          ],
        },
});

const allow = () => true as const;
const agents = [
  painter({ name: 'rated', model: 'text-free', imageModel: rated, gate: allow }),
  painter({ name: 'calculated', model: 'text-free', imageModel: calculated, gate: allow }),
  painter({ name: 'capped', model: 'text-free', imageModel: rated, gate: allow, limits: { maxSpend: 1 } }),
  painter({ name: 'huge', model: 'text-free', imageModel: huge, gate: allow, maxImageBytes: 1_000 }),
  defineAgent({ name: 'sketcher', tools: [imageTool({ imageModel: rated }), note] }),
  defineAgent({
    name: 'sketchy',
    tools: [imageTool({ imageModel: calculated }), note],
    limits: { maxToolExecutionsByName: { note: 0 } },
  }),
];

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents,
    model,
    runtime: {
      cost: {
        costRates: { 'img-rated': { input: 10, output: 40 } },
        costCalculator: (usage, id) => (id === 'img-calc' ? usage.inputTokens * 0.01 : null),
      },
    },
  });
});
afterAll(async () => kit?.stop());

describe('image tools: costs, budgets, events and transcript order', () => {
  it('CORE-26 a paint is charged through the runtime cost rates and recorded on the turn; image.requested and image.completed carry it', async () => {
    const run = await kit.client.run('rated', 'Paint');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    // 1 000 input tokens at $10/M + 50 000 output tokens at $40/M.
    expect(turn.cost).toBeCloseTo(2.01, 6);
    expect(turn.usage).toMatchObject({ input_tokens: 1_000, output_tokens: 50_000 });
    expect(await run.cost()).toBeCloseTo(2.01, 6);
    const events = await run.events();
    const requested = events.find((e) => e.type === 'image.requested')!;
    expect(requested.payload).toMatchObject({
      model: 'img-rated',
      prompt: 'a red square',
      reference_image_count: 0,
    });
    const completed = events.find((e) => e.type === 'image.completed')!;
    expect(completed.payload).toMatchObject({ model: 'img-rated', mime_type: 'image/png' });
    expect(completed.payload['cost']).toBeCloseTo(2.01, 6);
    expect(JSON.stringify(completed.payload)).not.toContain(TINY_PNG_BASE64);
    expect(events.findIndex((e) => e.type === 'image.requested')).toBeLessThan(
      events.findIndex((e) => e.type === 'image.completed'),
    );
  });

  it('CORE-26 the runtime cost calculator prices image calls too', async () => {
    const turn = await (await kit.client.run('calculated', 'Paint')).result();
    expect(turn.status).toBe('completed');
    expect(turn.cost).toBeCloseTo(0.07, 6);
  });

  it('CORE-26 a paint over maxSpend fails the run with BudgetError "cost limit reached"; the cost is recorded and no image message is written', async () => {
    const run = await kit.client.run('capped', 'Paint');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ message: 'cost limit reached' });
    expect(turn.error!.class).toMatch(/BudgetError$/);
    expect(turn.cost).toBeCloseTo(2.01, 6);
    const messages = await run.transcript();
    expect(messages.some((m) => m.kind === 'image')).toBe(false);
    // The call still has exactly one result.
    expect(messages.filter((m) => m.kind === 'tool_result')).toHaveLength(1);
    const [execution] = await run.toolExecutions();
    expect(execution!.status).toBe('failed');
  });

  it('CORE-26 an image over the size limit is a ToolError the model reads; its cost is still recorded and nothing is stored', async () => {
    const run = await kit.client.run('huge', 'Paint big');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('could not store it');
    const [execution] = await run.toolExecutions();
    expect(execution).toMatchObject({
      status: 'failed',
      error: { message: expect.stringContaining('larger than 1000 bytes') },
    });
    expect((await run.transcript()).some((m) => m.kind === 'image')).toBe(false);
    expect((await run.events()).map((e) => e.type)).toContain('image.failed');
  });

  it('CORE-28 the image message is written after the results of every call of the response, so each call is immediately followed by its result', async () => {
    const run = await kit.client.run('sketcher', 'Sketch and note');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const messages = await run.transcript();
    expect(messages.map((m) => m.kind)).toEqual([
      'text',
      'tool_call',
      'tool_result',
      'tool_result',
      'image',
      'text',
    ]);
    const [result] = await run.toolExecutions();
    const image = messages.find((m) => m.kind === 'image')!;
    expect((result!.result as { image_message_id: string }).image_message_id).toBe(image.id);
    expect(image).toMatchObject({
      role: 'assistant',
      turnId: turn.id,
      metadata: { tool_name: 'generate_image' },
    });
    // The next model call sees the call, both results, then the image.
    const second = model.callsFor('sketcher')[1]!.request.messages;
    expect(second.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant']);
    const created = (await run.events())
      .filter((e) => e.type === 'message.created')
      .map((e) => e.payload['kind']);
    expect(created).toEqual(['tool_call', 'tool_result', 'tool_result', 'image', 'text']);
  });

  it('CORE-28 a turn that fails after a paint in the same response still writes the image after every result (the repair path)', async () => {
    const run = await kit.client.run('sketchy', 'Sketch and note');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ message: 'maximum executions reached for tool note' });
    const messages = await run.transcript();
    expect(messages.map((m) => m.kind)).toEqual(['text', 'tool_call', 'tool_result', 'tool_result', 'image']);
    expect(turn.cost).toBeCloseTo(0.07, 6);
  });
});
