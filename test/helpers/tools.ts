/** Tools that several test files define alike. */
import { z } from 'zod';
import { defineTool } from '../../src/agents/tool.js';

/** A tool that runs until its attempt is aborted, then rejects with "aborted". */
export const hangTool = defineTool({
  name: 'hang',
  description: 'Runs until aborted.',
  input: z.object({}),
  execute: (_args, { signal }) =>
    new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
});
