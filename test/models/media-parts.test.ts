import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINY_PNG_BASE64 } from '../../src/models/image.js';
import { createModelClient } from '../../src/models/providers.js';
import type { ModelRequest } from '../../src/models/types.js';

/** A local server speaking OpenAI's and Anthropic's wire formats; it records what it was sent. */
const received: { path: string; body: Record<string, unknown> }[] = [];
let baseUrl = '';
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  let raw = '';
  req.on('data', (chunk) => (raw += chunk));
  req.on('end', () => {
    const path = req.url ?? '';
    received.push({ path, body: JSON.parse(raw || '{}') as Record<string, unknown> });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify(
        path.endsWith('/messages')
          ? {
              id: 'msg_1',
              type: 'message',
              role: 'assistant',
              model: 'claude-test',
              content: [{ type: 'text', text: 'a red square' }],
              stop_reason: 'end_turn',
              usage: { input_tokens: 5, output_tokens: 3 },
            }
          : {
              id: 'chatcmpl-1',
              object: 'chat.completion',
              created: 1,
              model: 'gpt-test',
              choices: [
                { index: 0, message: { role: 'assistant', content: 'a red square' }, finish_reason: 'stop' },
              ],
              usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
            },
      ),
    );
  });
});
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const PDF = Buffer.from('%PDF-1.4 tiny').toString('base64');
const request: ModelRequest = {
  model: 'm',
  instructions: 'Look.',
  dynamicInstructions: '',
  messages: [
    {
      role: 'user',
      content: 'What is in these?',
      media: [
        { kind: 'image', mediaType: 'image/png', data: TINY_PNG_BASE64 },
        { kind: 'file', mediaType: 'application/pdf', data: PDF, filename: 'brief.pdf' },
      ],
    },
  ],
  tools: [],
  metadata: { turnId: 't', conversationId: 'c', agentName: 'a', purpose: 'media_analysis' },
};
const signal = () => ({ signal: new AbortController().signal });

/** Sends the request through a provider's client; returns the result and the user content it sent. */
async function send(provider: 'openai' | 'anthropic') {
  const client = createModelClient({ provider, apiKey: 'sk-test', baseURL: baseUrl, maxRetries: 0 });
  const result = await client.chat(request, signal());
  return { result, content: userContent(received.at(-1)!.body) as Record<string, unknown>[] };
}

const userContent = (body: Record<string, unknown>) =>
  (body['messages'] as { role: string; content: unknown }[]).find((m) => m.role === 'user')!.content;

describe('media parts on the providers wire formats', () => {
  it('CORE-28 OpenAI chat completions: an image_url part with a data URL and a file part with file_data', async () => {
    const { result, content } = await send('openai');
    expect(result.parts).toEqual([{ type: 'text', text: 'a red square' }]);
    expect(content).toEqual([
      { type: 'text', text: 'What is in these?' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${TINY_PNG_BASE64}` } },
      { type: 'file', file: { filename: 'brief.pdf', file_data: `data:application/pdf;base64,${PDF}` } },
    ]);
  });

  it('CORE-28 Anthropic messages: a base64 image block and a base64 document block', async () => {
    const { content } = await send('anthropic');
    expect(content[0]).toMatchObject({ type: 'text', text: 'What is in these?' });
    expect(content[1]).toMatchObject({
      type: 'image',
      source: { type: 'base64', media_type: 'image/png', data: TINY_PNG_BASE64 },
    });
    expect(content[2]).toMatchObject({
      type: 'document',
      source: { type: 'base64', media_type: 'application/pdf', data: PDF },
    });
  });
});
