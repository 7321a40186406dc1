/**
 * The chat page of docs/chat-route.md: `useChat` talking to examples/chat-route.ts. In a
 * Next.js app this is a client component ('use client'), the import is 'turnkit/ui', and the
 * page that renders it gets `chatId` from POST /api/chats (or your own list of chats).
 */
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';
import { useState } from 'react';
import type { TurnKitUIMessage } from '../../src/ui.js';
import { isRunFailed, messageText, runErrorOf, runStatusOf } from '../../src/ui.js';

export function Chat({ chatId }: { chatId: string }) {
  const { messages, sendMessage, status } = useChat<TurnKitUIMessage>({
    id: chatId,
    transport: new DefaultChatTransport({ api: '/api/chat' }),
  });
  const [input, setInput] = useState('');
  const busy = status === 'submitted' || status === 'streaming';
  return (
    <main>
      <ol aria-label="messages">
        {messages.map((message) => (
          <li key={message.id} data-role={message.role} data-status={runStatusOf(message)}>
            <b>{message.role === 'user' ? 'You' : 'Agent'}:</b> {messageText(message)}
            {isRunFailed(message) ? <em> ({runErrorOf(message)})</em> : null}
          </li>
        ))}
      </ol>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (!input.trim()) return;
          void sendMessage({ text: input });
          setInput('');
        }}
      >
        <input aria-label="message" value={input} onChange={(event) => setInput(event.target.value)} />
        <button type="submit" disabled={busy}>
          Send
        </button>
      </form>
    </main>
  );
}
