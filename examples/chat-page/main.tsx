/**
 * Mounts the chat for a new conversation (the test's page; in Next.js, a server component
 * creates the conversation and renders <Chat chatId={id} />).
 */
import { createRoot } from 'react-dom/client';
import { Chat } from './chat.js';

const response = await fetch('/api/chats', { method: 'POST' });
const { id } = (await response.json()) as { id: string };
createRoot(document.getElementById('root')!).render(<Chat chatId={id} />);
