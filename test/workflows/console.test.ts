/**
 * What the stock Temporal UI shows of a turn, read back from the real dev server the way the
 * UI reads it: the current details (the `__temporal_workflow_metadata` query), the `state`
 * query, and each activity's summary in the history. Only ids, counts and names appear.
 */
import type { QueryDefinition } from '@temporalio/common';
import { defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { TurnConsoleState } from '../../src/workflows/contract.js';
import { laneWorkflowId, stateQuery, turnWorkflowId } from '../../src/workflows/contract.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';

let held = gate();
const lookup = defineTool({
  name: 'lookup_fact',
  description: 'Looks a fact up.',
  input: z.object({ topic: z.string() }),
  execute: async ({ topic }) => {
    await held.promise;
    return { topic, fact: 'SECRET-FACT-TEXT' };
  },
});
const model = new ScriptedModel({
  console_agent: (request) =>
    request.messages.some((message) => message.role === 'tool')
      ? { text: 'All done.', usage: { inputTokens: 30, outputTokens: 4 } }
      : {
          toolCalls: [
            { name: 'lookup_fact', arguments: { topic: 'durability' } },
            { name: 'lookup_fact', arguments: { topic: 'retries' } },
          ],
          usage: { inputTokens: 10, outputTokens: 6 },
        },
  lane_agent: () => 'Heard you.',
});

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'console_agent', tools: [lookup], limits: { maxIterations: 6 } }),
      defineAgent({ name: 'lane_agent' }),
    ],
    model,
  });
});
afterAll(async () => {
  held.open();
  await kit?.stop();
});

/** A query, as the UI sends it: any replay failure of the workflow shows here. */
function query<T>(workflowId: string, name: string | QueryDefinition<T>): Promise<T> {
  return kit.client.temporal.workflow.getHandle(workflowId).query<T>(name);
}

async function currentDetails(workflowId: string): Promise<string> {
  return (
    (await query<{ currentDetails?: string }>(workflowId, '__temporal_workflow_metadata')).currentDetails ??
    ''
  );
}

async function activitySummaries(workflowId: string): Promise<string[]> {
  const history = await kit.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? [])
    .filter((event) => event.activityTaskScheduledEventAttributes)
    .map((event) =>
      event.userMetadata?.summary
        ? defaultPayloadConverter.fromPayload<string>(event.userMetadata.summary)
        : '',
    );
}

describe('the Temporal UI as the agent console', () => {
  it('console: current details and the state query follow the running turn: phase, iteration, tool, tokens, cost', async () => {
    held = gate();
    const run = await kit.client.run('console_agent', 'Find two facts');
    const workflowId = turnWorkflowId(run.turnId);
    const handle = kit.client.temporal.workflow.getHandle(workflowId);

    // While the first lookup is held: the tools phase, iteration 1 of 6, the tool running.
    await waitUntil(
      async () => (await query<TurnConsoleState>(workflowId, stateQuery)).runningTools.length > 0,
      30_000,
    );
    const running = await query<TurnConsoleState>(workflowId, stateQuery);
    expect(running).toMatchObject({
      turnId: run.turnId,
      status: 'running',
      phase: 'tools',
      iteration: 1,
      maxIterations: 6,
      modelCalls: 1,
      runningTools: ['lookup_fact'],
      lastStep: 'model call 1 → 2 tool calls',
      tokens: 16,
    });
    const details = await currentDetails(workflowId);
    expect(details).toContain('**running** · tools phase · iteration 1 of 6');
    expect(details).toContain('tokens 16');
    expect(details).toContain('running: `lookup_fact`');

    held.open();
    expect((await run.result()).status).toBe('completed');
    const done = await query<TurnConsoleState>(workflowId, stateQuery);
    expect(done).toMatchObject({
      status: 'completed',
      iteration: 2,
      modelCalls: 2,
      runningTools: [],
      tokens: 50,
    });
    expect(await currentDetails(workflowId)).toContain('**completed**');

    // Each activity bar in the timeline says what it was.
    expect(await activitySummaries(workflowId)).toEqual([
      // The first model call is the claim step's (0.6, decision 82).
      'claim, model call 1',
      'tool lookup_fact',
      'tool lookup_fact',
      'model call 2',
    ]);
    // The transcript stays out of history: the tool's output and the task text never appear.
    const history = JSON.stringify(await handle.fetchHistory());
    expect(history).not.toContain('SECRET-FACT-TEXT');
  });

  it('console: a lane workflow shows its conversation, what it delivered and the turns it started', async () => {
    const conversation = await kit.client.conversation('lane_agent');
    await kit.client.sendMessage(conversation.id, 'Are you there?', { key: `console-lane-${Date.now()}` });
    await waitUntil(async () =>
      (await kit.store.listTurns({ conversationId: conversation.id })).some(
        (turn) => turn.status === 'completed',
      ),
    );
    const lane = kit.client.temporal.workflow.getHandle(laneWorkflowId(conversation.id));
    const description = await lane.describe();
    expect(await description.staticSummary()).toBe(`lane of ${conversation.id}`);
    expect(await description.staticDetails()).toContain(`**conversation** \`${conversation.id}\``);
    const [turn] = await kit.store.listTurns({ conversationId: conversation.id });
    await waitUntil(async () => (await currentDetails(lane.workflowId)).includes('turns started 1'), 15_000);
    const details = await currentDetails(lane.workflowId);
    expect(details).toContain('delivered 1');
    expect(details).toContain(`last started \`${turn!.id}\``);
  });
});
