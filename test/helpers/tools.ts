/** Tools that several test files define alike. */
import { z } from 'zod';
import { defineTool } from '../../src/agents/tool.js';
import type { ContentPart, MessageRecord } from '../../src/store/types.js';

/** A tool that runs until its attempt is aborted, then rejects with "aborted". */
export const hangTool = defineTool({
  name: 'hang',
  description: 'Runs until aborted.',
  input: z.object({}),
  execute: (_args, { signal }) =>
    new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
});

/** `wire`: moves money, so a person approves each call; every run is recorded in `ran`. */
export const wireTool = (ran: string[]) =>
  defineTool({
    name: 'wire',
    description: 'Wires money (a person approves).',
    input: z.object({ amount: z.number() }),
    needsApproval: true,
    execute: ({ amount }) => {
      ran.push(`wire ${amount}`);
      return { wired: amount };
    },
  });

/** Every tool result part of a transcript, in order. */
export const toolResults = (messages: MessageRecord[]) =>
  messages.flatMap((m) =>
    m.content.filter((p): p is Extract<ContentPart, { type: 'tool_result' }> => p.type === 'tool_result'),
  );
