import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { ContentPart, MessageRecord } from '../../src/store/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

const resultsOf = (messages: MessageRecord[]) =>
  messages.flatMap((m) =>
    m.content.filter((p): p is Extract<ContentPart, { type: 'tool_result' }> => p.type === 'tool_result'),
  );
const toolMessages = (request: ModelRequest) => request.messages.filter((m) => m.role === 'tool');

// Reviewer "a" is slow and "b" fast, so b finishes first while the parent still waits.
let releaseA: () => void = () => undefined;
const aGate = new Promise<void>((resolve) => (releaseA = resolve));
const gateA = defineTool({
  name: 'gate_a',
  description: 'Waits for the test.',
  input: z.object({}),
  execute: async () => {
    await aGate;
    return { opened: true };
  },
});
const mutate = defineTool({
  name: 'mutate',
  description: 'Parent-only tool.',
  input: z.object({}),
  execute: () => ({ mutated: true }),
});
const finish = defineTool({
  name: 'finish',
  description: 'Ends the turn.',
  input: z.object({}),
  terminal: 'finished early',
  execute: () => ({}),
});

const model = new ScriptedModel({
  reviewer_a: (request) =>
    toolMessages(request).length ? 'a' : { toolCalls: [{ name: 'gate_a', arguments: {} }] },
  reviewer_b: (request) =>
    request.messages[0]!.content === 'try mutate'
      ? toolMessages(request).length
        ? 'b tried'
        : { toolCalls: [{ name: 'mutate', arguments: {} }] }
      : 'b',
  coordinator: (request) =>
    toolMessages(request).length
      ? 'joined'
      : {
          toolCalls: [
            { name: 'reviewer_a', arguments: { task: 'review part a' } },
            { name: 'reviewer_b', arguments: { task: 'review part b' } },
          ],
        },
  invalid: (request) =>
    toolMessages(request).length
      ? 'handled'
      : {
          toolCalls: [
            { name: 'reviewer_b', arguments: { task: 'valid task' } },
            { name: 'reviewer_b', arguments: { task: 123 } },
          ],
        },
  early: () => ({
    toolCalls: [
      { name: 'finish', arguments: {} },
      { name: 'reviewer_b', arguments: { task: 'never launched' } },
    ],
  }),
  isolated: (request) =>
    toolMessages(request).length
      ? 'reported'
      : { toolCalls: [{ name: 'reviewer_b', arguments: { task: 'try mutate' } }] },
});

const reviewerA = defineAgent({ name: 'reviewer_a', description: 'Reviews part a.', tools: [gateA] });
const reviewerB = defineAgent({ name: 'reviewer_b', description: 'Reviews part b.' });

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'coordinator', subAgents: [reviewerA, reviewerB] }),
      defineAgent({ name: 'invalid', subAgents: [reviewerB] }),
      defineAgent({ name: 'early', tools: [finish], subAgents: [reviewerB] }),
      defineAgent({ name: 'isolated', tools: [mutate], subAgents: [reviewerB] }),
    ],
    model,
  });
});
// A failed assertion must not leave reviewer a's tool holding the worker open at shutdown.
afterAll(async () => {
  releaseA();
  await kit?.stop();
});

describe('sub-agents as child workflows', () => {
  it('BG-12 E2E-01 two children run in parallel while the parent waits; one finishing does not release it; results come in call order', async () => {
    const run = await kit.client.run('coordinator', 'Review both parts');
    // Reviewer a's turn turns running in its first step (the claim is folded into it), which
    // may come after reviewer b has finished: wait for both.
    await waitUntil(async () => {
      const turns = await run.turns();
      return (
        turns.some((t) => t.agentName === 'reviewer_b' && t.status === 'completed') &&
        turns.some((t) => t.agentName === 'reviewer_a' && t.status === 'running')
      );
    });
    const parent = await run.turn();
    expect(parent.status).toBe('waiting');
    expect(parent.claimToken).toBeNull();
    expect(model.callsFor('coordinator')).toHaveLength(1);
    const children = (await run.turns()).filter((t) => t.parentTurnId === run.turnId);
    expect(children.map((c) => c.agentName).sort()).toEqual(['reviewer_a', 'reviewer_b']);
    expect(children.find((c) => c.agentName === 'reviewer_a')!.status).toBe('running');
    // Each child is its own workflow, a child of the parent's.
    const childWorkflow = await kit.client.temporal.workflow
      .getHandle(`turnkit-turn-${children[0]!.id}`)
      .describe();
    expect(childWorkflow.parentExecution?.workflowId).toBe(run.workflowId);

    releaseA();
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('joined');
    expect(model.callsFor('coordinator')).toHaveLength(2);
    const parentResults = resultsOf(await kit.store.listMessages(turn.conversationId));
    const payloads = parentResults.map((r) => JSON.parse(r.text) as { result: string; status: string });
    expect(payloads.map((p) => p.result)).toEqual(['a', 'b']);
    expect(payloads.every((p) => p.status === 'completed')).toBe(true);
    // The child saw only its task.
    expect(model.callsFor('reviewer_b').at(-1)!.request.messages).toEqual([
      { role: 'user', content: 'review part b' },
    ]);
  });

  it('BG-10 a valid and an invalid sub-agent call: no result overtakes the waiting group; results in call order, the second an error', async () => {
    const run = await kit.client.run('invalid', 'Two calls');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('handled');
    const results = resultsOf(await kit.store.listMessages(turn.conversationId));
    expect(results.map((r) => r.error)).toEqual([false, true]);
    expect(JSON.parse(results[1]!.text).message).toContain('task');
    const children = (await run.turns()).filter((t) => t.parentTurnId === run.turnId);
    expect(children).toHaveLength(1);
  });

  it('BG-22 a terminal tool before a sub-agent call prevents the launch', async () => {
    const before = model.callsFor('reviewer_b').length;
    const run = await kit.client.run('early', 'Stop early');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('finished early');
    expect((await run.turns()).filter((t) => t.parentTurnId === run.turnId)).toHaveLength(0);
    expect(model.callsFor('reviewer_b').length).toBe(before);
    const executions = await run.toolExecutions();
    expect(executions.at(-1)!.status).toBe('cancelled');
  });

  it('SP-06 a sub-agent gets only its task and its own tools; calling a parent tool yields "unknown tool: mutate"; the parent reads the full report', async () => {
    const run = await kit.client.run('isolated', 'Delegate');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const child = (await run.turns()).find((t) => t.parentTurnId === run.turnId)!;
    const childExecutions = await kit.store.listToolExecutions({ turnId: child.id });
    expect(childExecutions.map((e) => e.error?.message)).toEqual(['unknown tool: mutate']);
    expect(child.options['principal']).toEqual((await run.turn()).options['principal']);
    const parentExecution = (await kit.store.listToolExecutions({ turnId: run.turnId }))[0]!;
    expect(parentExecution.result).toMatchObject({
      turn_id: child.id,
      status: 'completed',
      result: 'b tried',
    });
    const next = model.callsFor('isolated').at(-1)!.request;
    expect(toolMessages(next)[0]!.content).toContain('b tried');
  });
});
