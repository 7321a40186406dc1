/**
 * TurnKit's provider-neutral messages as the AI SDK's `ModelMessage`s: what an AI SDK tool's
 * `execute` and `needsApproval` get as `messages`, shaped as the AI SDK would pass them.
 */
import type { ModelMessage as SdkMessage } from 'ai';
import type { ModelMedia } from './media.js';
import type { ModelMessage } from './types.js';

export function toAiSdkMessages(messages: readonly ModelMessage[]): SdkMessage[] {
  return messages.map((message): SdkMessage => {
    if (message.role === 'tool')
      return {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: message.toolCallId,
            toolName: message.toolName,
            output: { type: 'text', value: message.content },
          },
        ],
      };
    if (message.role === 'assistant' && message.toolCalls?.length)
      return {
        role: 'assistant',
        content: [
          ...(message.content ? [{ type: 'text' as const, text: message.content }] : []),
          ...message.toolCalls.map((call) => ({
            type: 'tool-call' as const,
            toolCallId: call.id,
            toolName: call.name,
            input: call.arguments,
          })),
        ],
      };
    if (message.role === 'user' && message.media?.length)
      return {
        role: 'user',
        content: [
          ...(message.content ? [{ type: 'text' as const, text: message.content }] : []),
          ...message.media.map(mediaPart),
        ],
      };
    return { role: message.role, content: message.content };
  });
}

/** An image as the SDK's image part, anything else as its file part: bytes (base64) or a URL. */
function mediaPart(media: ModelMedia) {
  const content = media.data ?? new URL(media.url!);
  return media.kind === 'image'
    ? { type: 'image' as const, image: content, mediaType: media.mediaType }
    : {
        type: 'file' as const,
        data: content,
        mediaType: media.mediaType,
        ...(media.filename ? { filename: media.filename } : {}),
      };
}
