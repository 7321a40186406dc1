/**
 * A chat behind the AI SDK's `useChat`, as web route handlers (Request in, Response out), the
 * shape Next.js's App Router, Hono, Remix and Bun all take (docs/chat-route.md):
 *
 * - `create`: POST /api/chats makes a conversation for the signed-in user; its id is the
 *   page's `useChat({ id })`.
 * - `POST`: POST /api/chat is useChat's request: the last user message is posted to that
 *   conversation, and the answer streams back as the run's UI message stream.
 *
 * In a Next.js app: `export const { POST } = chatRoute({...})` in app/api/chat/route.ts, and
 * the imports are 'turnkit' instead of ../src.
 */
import { z } from 'zod';
import type { TurnKitClient } from '../src/index.js';
import {
  ArgumentError,
  AuthorizationError,
  ConversationBusyError,
  InputError,
  RecordNotFound,
  toUIMessageStreamResponse,
} from '../src/index.js';

export interface ChatRouteOptions {
  client: TurnKitClient;
  /** The agent every chat talks to. */
  agent: string;
  /** Who is asking, from your session (cookie, JWT); `undefined` answers 401. Never from the body. */
  principalOf: (request: Request) => Promise<{ user: string } | undefined>;
}

/** What useChat sends (`DefaultChatTransport`): the chat's id and its messages, the newest last. */
const chatRequest = z.object({
  id: z.string().regex(/^conv_[0-9a-f]{24}$/, 'id must be a conversation id from POST /api/chats'),
  trigger: z.literal('submit-message').optional(),
  messages: z
    .array(
      z.object({
        id: z.string().min(1).max(200),
        role: z.enum(['user', 'assistant', 'system']),
        parts: z.array(z.object({ type: z.string(), text: z.string().optional() })),
      }),
    )
    .min(1),
});

const json = (status: number, body: object) => Response.json(body, { status });

export function chatRoute({ client, agent, principalOf }: ChatRouteOptions) {
  /** The conversation, if it exists and is this user's: anything else is the same 404. */
  async function ownConversation(id: string, user: string) {
    const conversation = await client.store.loadConversation(id).catch((error: unknown) => {
      if (error instanceof RecordNotFound) return undefined;
      throw error;
    });
    const owner = (conversation?.metadata['principal'] as { user?: unknown } | undefined)?.user;
    return owner === user ? conversation : undefined;
  }

  return {
    async create(request: Request): Promise<Response> {
      const principal = await principalOf(request);
      if (!principal) return json(401, { error: 'sign in first' });
      const conversation = await client.conversation(agent, { principal });
      return json(201, { id: conversation.id });
    },

    async POST(request: Request): Promise<Response> {
      const principal = await principalOf(request);
      if (!principal) return json(401, { error: 'sign in first' });
      const parsed = chatRequest.safeParse(await request.json().catch(() => null));
      if (!parsed.success) return json(400, { error: z.prettifyError(parsed.error) });
      const { id, messages } = parsed.data;
      const last = messages.at(-1)!;
      const text = last.parts.map((part) => (part.type === 'text' ? (part.text ?? '') : '')).join('');
      if (last.role !== 'user' || !text.trim())
        return json(400, { error: 'the last message must be a user message with text' });
      if (!(await ownConversation(id, principal.user))) return json(404, { error: 'no such chat' });
      try {
        // The conversation holds the history: only the new message travels. Its useChat id is
        // the request id, so a retried request gets the same turn back, not a second one.
        const receipt = await client.post(id, text, {
          requestId: last.id,
          principal,
          policy: 'interrupt', // a message sent while the agent answers replaces that answer
        });
        if (!receipt.turnId) return json(409, { error: 'the chat is busy; send again' });
        return toUIMessageStreamResponse(await client.handle(receipt.turnId));
      } catch (error) {
        if (error instanceof ArgumentError || error instanceof InputError)
          return json(400, { error: error.message });
        if (error instanceof ConversationBusyError) return json(409, { error: error.message });
        if (error instanceof AuthorizationError) return json(403, { error: 'not allowed' });
        throw error;
      }
    },
  };
}
