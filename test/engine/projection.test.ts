import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectMessages } from '../../src/engine/model/model-request.js';
import { openStore } from '../../src/store/index.js';
import type { ContentPart, Store } from '../../src/store/types.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

let store: Store;
beforeAll(async () => {
  store = await openStore(tempSqliteUrl('projection'));
});
afterAll(async () => store?.close());

describe('message parts (CORE-12)', () => {
  it('CORE-12 every part type round-trips through the SQLite store and projects as spec §3.7 says', async () => {
    const conversation = await store.createConversation({ agentName: 'any' });
    const add = (role: 'user' | 'assistant' | 'tool', kind: string, content: ContentPart[], metadata = {}) =>
      store.appendMessage({ conversationId: conversation.id, role, kind: kind as never, content, metadata });
    const parts: Record<string, ContentPart[]> = {
      text: [{ type: 'text', text: 'hello' }],
      toolCall: [
        { type: 'text', text: 'let me look' },
        { type: 'thinking', text: 'I should look it up', signature: 'sig' },
        { type: 'tool_call', id: 'call_1', name: 'lookup', arguments: { word: 'durable' } },
      ],
      toolResult: [
        { type: 'tool_result', tool_call_id: 'call_1', text: '{"meaning":"lasting"}', error: false },
      ],
      image: [{ type: 'image', mime_type: 'image/png', url: 'https://example.test/a.png', data: 'AAAA' }],
      media: [{ type: 'media_analysis', text: 'a red square', media: { mime_type: 'image/png' } }],
      provider: [
        { type: 'provider', kind: 'citation', data: { url: 'https://example.test' } },
        { type: 'text', text: 'with a citation' },
      ],
    };
    await add('user', 'text', parts['text']!);
    await add('assistant', 'tool_call', parts['toolCall']!);
    await add('tool', 'tool_result', parts['toolResult']!, { tool_name: 'lookup' });
    const image = await add('assistant', 'image', parts['image']!);
    const analysis = await add('assistant', 'media_analysis', parts['media']!);
    await add('assistant', 'text', parts['provider']!);

    const stored = await store.listMessages(conversation.id);
    expect(stored.map((m) => m.content)).toEqual(Object.values(parts));

    const projected = projectMessages(stored);
    expect(projected[0]).toEqual({ role: 'user', content: 'hello' });
    // Thinking before text; tool calls exposed.
    expect(projected[1]).toEqual({
      role: 'assistant',
      content: 'I should look it up\nlet me look',
      toolCalls: [{ id: 'call_1', name: 'lookup', arguments: { word: 'durable' } }],
    });
    expect(projected[2]).toEqual({
      role: 'tool',
      content: '{"meaning":"lasting"}',
      toolCallId: 'call_1',
      toolName: 'lookup',
    });
    // An image is described, never sent as bytes.
    expect(projected[3]).toEqual({
      role: 'assistant',
      content: `[image image/png https://example.test/a.png message ${image.id}]`,
    });
    expect(JSON.stringify(projected[3])).not.toContain('AAAA');
    expect(projected[4]).toEqual({
      role: 'assistant',
      // Named by its message, like an image, so the model can refer to it.
      content: `[media analysis of {"mime_type":"image/png"} message ${analysis.id}]\na red square`,
    });
    // Provider-specific parts stay in the store and out of the request.
    expect(projected[5]).toEqual({ role: 'assistant', content: 'with a citation' });
  });
});
