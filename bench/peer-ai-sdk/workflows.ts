/**
 * THE COMPARISON (not TurnKit): the bench agent written for Temporal's own AI SDK plugin,
 * `@temporalio/ai-sdk`: `generateText` in the workflow through `temporalProvider` (each model
 * call an activity, its request and response in history), the tool an activity.
 */
import { temporalProvider } from '@temporalio/ai-sdk/workflow';
import { proxyActivities } from '@temporalio/workflow';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import type * as activities from './activities.js';

const { lookupActivity } = proxyActivities<typeof activities>({ startToCloseTimeout: '1 minute' });

export async function peerAgentWorkflow(prompt: string): Promise<string> {
  const result = await generateText({
    model: temporalProvider.languageModel('mock'),
    prompt,
    tools: {
      lookup: tool({
        description: 'Looks something up.',
        inputSchema: z.object({ query: z.string() }),
        execute: ({ query }) => lookupActivity(query),
      }),
    },
    stopWhen: stepCountIs(5),
  });
  return result.text;
}
