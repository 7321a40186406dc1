/**
 * A local OpenAI chat-completions server that refuses what the provider refuses: a request
 * whose assistant tool calls are not each answered by a `tool` message before the next other
 * message, or a `tool` message answering no open call, gets a 400 in OpenAI's error shape.
 * Every request body is recorded, refused or not, for assertions on what a turn sent.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Completion } from './openai-sse.js';
import { answerCompletion, providerServer, sendError } from './openai-sse.js';

interface WireMessage {
  role: string;
  tool_calls?: { id: string }[];
  tool_call_id?: string;
}

/** The provider's refusal of `messages`, or null (the same rule as the scripted model's). */
export function wirePairingError(messages: readonly WireMessage[]): string | null {
  const open = new Set<string>();
  for (const message of messages) {
    if (message.role === 'tool') {
      if (!open.delete(String(message.tool_call_id)))
        return `Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (${String(message.tool_call_id)}).`;
      continue;
    }
    if (open.size > 0)
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`;
    for (const call of message.tool_calls ?? []) open.add(call.id);
  }
  return open.size > 0
    ? `The following tool_call_ids did not have response messages: ${[...open].join(', ')}`
    : null;
}

export interface StrictProvider {
  server: Server;
  baseURL: string;
  /** Every request body received, in order. */
  received: { body: Record<string, unknown>; refused: string | null }[];
  close(): Promise<void>;
}

/** Starts the server on 127.0.0.1; `answer` scripts each accepted request's completion. */
export async function startStrictProvider(
  answer: (body: Record<string, unknown>) => Completion,
): Promise<StrictProvider> {
  const received: StrictProvider['received'] = [];
  const server = providerServer((body, res) => {
    const refused = wirePairingError((body['messages'] ?? []) as WireMessage[]);
    received.push({ body, refused });
    if (refused) return sendError(res, 400, refused);
    void answerCompletion(res, body, answer(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    received,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
