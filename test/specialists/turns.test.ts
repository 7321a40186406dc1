import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolContext } from '../../src/agents/tool.js';
import type { ImageRequest } from '../../src/models/image.js';
import { ScriptedImageModel } from '../../src/models/image.js';
import { ScriptedModel, toolCall } from '../../src/models/scripted-model.js';
import { oracle } from '../../src/specialists/oracle.js';
import { painter } from '../../src/specialists/painter.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

// Arbitrary bytes (not valid UTF-8) so a lossy store would show.
const BYTES = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe, 0x80, 0x7f]);
const imageModel = new ScriptedImageModel({
  modelId: 'img-e2e',
  script: () => ({ images: [{ mediaType: 'image/png', data: BYTES.toString('base64') }] }),
});
const gated: { request: ImageRequest; turnId: string; tenant: unknown }[] = [];
const model = new ScriptedModel({
  painter: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'unexpected second model call'
      : {
          toolCalls: [
            { name: 'paint_image', arguments: { prompt: 'a red square', params: { size: '256x256' } } },
            // A second paint in the same response is skipped: the first one ended the turn.
            { name: 'paint_image', arguments: { prompt: 'another' } },
          ],
        },
  oracle: (request) => {
    const results = request.messages.filter((m) => m.role === 'tool');
    if (results.length === 0) return toolCall('read_file', { path: 'notes.txt' });
    if (results.length === 1) return toolCall('read_file', { path: '../outside.txt' });
    return `answer from: ${results.map((m) => m.content).join(' | ')}`;
  },
  denied: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'I was not allowed to paint that.'
      : toolCall('paint_image', { prompt: 'forbidden' }),
});

const gate = (request: ImageRequest, { context }: { context: ToolContext }) => {
  gated.push({ request, turnId: context.turn.id, tenant: context.context['tenant'] });
  return request.prompt !== 'forbidden';
};

const base = mkdtempSync(join(tmpdir(), 'turnkit-oracle-turn-'));
writeFileSync(join(base, 'outside.txt'), 'not for the oracle');
const root = join(base, 'root');
mkdirSync(root);

let kit: TestKit;
beforeAll(async () => {
  writeFileSync(join(root, 'notes.txt'), 'the answer is 42');
  kit = await startKit({
    agents: [painter({ imageModel, gate }), painter({ name: 'denied', imageModel, gate }), oracle({ root })],
    model,
  });
});
afterAll(async () => kit?.stop());

describe('painter through a real turn', () => {
  it('SP-04 painter through a real turn: completed; output is JSON whose image_message_id resolves to an image message whose bytes round-trip; no data in the result', async () => {
    const run = await kit.client.run('painter', 'Paint a red square', { context: { tenant: 'acme' } });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(model.callsFor('painter')).toHaveLength(1);
    expect(imageModel.calls).toHaveLength(1);
    expect(gated).toEqual([
      {
        request: {
          model: 'img-e2e',
          prompt: 'a red square',
          referenceImages: [],
          params: { size: '256x256' },
        },
        turnId: turn.id,
        tenant: 'acme',
      },
    ]);

    const output = JSON.parse(turn.outputText!) as Record<string, unknown>;
    expect(Object.keys(output).sort()).toEqual(['conversation_id', 'image', 'image_message_id']);
    expect(output['conversation_id']).toBe(turn.conversationId);
    expect(output['image']).toEqual({
      type: 'image',
      mime_type: 'image/png',
      model: 'img-e2e',
      provider: 'scripted',
    });
    expect(turn.outputText).not.toContain(BYTES.toString('base64'));

    const message = await kit.store.loadMessage(output['image_message_id'] as string);
    expect(message).toMatchObject({
      conversationId: turn.conversationId,
      turnId: turn.id,
      role: 'assistant',
      kind: 'image',
    });
    const part = message.content[0]!;
    expect(part.type).toBe('image');
    if (part.type !== 'image') throw new Error('not an image part');
    expect(Buffer.from(part.data!, 'base64').equals(BYTES)).toBe(true);

    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual(['completed', 'cancelled']);
    expect(JSON.stringify(executions[0]!.result)).not.toContain(BYTES.toString('base64'));
    const kinds = (await kit.store.listMessages(turn.conversationId)).map((m) => m.kind);
    expect(kinds).toEqual(['text', 'tool_call', 'tool_result', 'tool_result', 'image', 'text']);
  });

  it('SP-04 painter through a real turn: a denying gate fails the paint_image execution with a ToolError; nothing is painted; the turn goes on', async () => {
    const before = imageModel.calls.length;
    const run = await kit.client.run('denied', 'Paint something forbidden');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('I was not allowed to paint that.');
    expect(imageModel.calls.length).toBe(before);
    const [execution] = await run.toolExecutions();
    expect(execution).toMatchObject({
      status: 'failed',
      error: { message: expect.stringMatching(/not approved/) },
    });
    const kinds = (await kit.store.listMessages(turn.conversationId)).map((m) => m.kind);
    expect(kinds).not.toContain('image');
  });
});

describe('oracle through a real turn', () => {
  it('SP-01 oracle through a real turn: read_file reads inside root; ".." fails that execution with a ToolError; the turn completes', async () => {
    const run = await kit.client.run('oracle', 'What is the answer?');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toContain('the answer is 42');
    expect(turn.outputText).not.toContain('not for the oracle');
    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual(['completed', 'failed']);
    expect(executions[1]!.error!.message).toMatch(/outside the root/);
  });
});
