import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import type { ConstraintContext } from '../../src/agents/output-policy.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { checkOutputPolicy } from '../../src/engine/output/check-output-policy.js';
import { toViolations } from '../../src/engine/output/violations.js';
import { ArgumentError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { Json, MessageRecord } from '../../src/store/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { connectClient } from '../helpers/temporal.js';

const textOf = (message: MessageRecord) =>
  message.content.map((part) => (part.type === 'text' ? part.text : '')).join('');

const seen: { output: Json; context: ConstraintContext }[] = [];

const finishTool = defineTool({
  name: 'submit',
  description: 'Submits the answer and ends the turn.',
  input: z.object({ answer: z.string() }),
  terminal: (result) => (result as { answer: string }).answer,
  execute: ({ answer }) => ({ answer }),
});

const script = new ScriptedModel({
  reporter: [{ text: '{"answer":41,"secret":"hunter2"}', outputData: { answer: 41, secret: 'hunter2' } }],
  cleaner: ['All good.'],
  failer: ['The answer is TODO.'],
  reviser: ['Draft: TODO fill in.', 'The answer is 42.'],
  stubborn: ['TODO one', 'TODO two', 'TODO three'],
  resubmitter: [
    { toolCalls: [{ name: 'submit', arguments: { answer: 'TODO' } }] },
    { toolCalls: [{ name: 'submit', arguments: { answer: '42' } }] },
  ],
  asyncer: ['slow but fine'],
  hanger: ['never judged'],
  schema: [
    { text: '{"answer":"42"}', outputData: { answer: '42' } },
    { text: '{"answer":42}', outputData: { answer: 42 } },
  ],
  schemaStrict: () => 'no json at all',
  weird: ['weird'],
  thrower: ['throws'],
});

const noTodo = (output: Json) =>
  typeof output === 'string' && output.includes('TODO') ? 'remove the TODO' : null;

const agents = [
  defineAgent({
    name: 'reporter',
    outputSchema: z.object({ answer: z.number(), secret: z.string() }),
    outputPolicyMode: 'report',
    outputConstraints: [
      (output, context) => {
        seen.push({ output, context });
        return null;
      },
      (output) =>
        output && typeof output === 'object' && !Array.isArray(output) && output['secret']
          ? { rule: 'no_secrets', message: 'the output leaks a secret', metadata: { field: 'secret' } }
          : null,
      (output) =>
        output && typeof output === 'object' && !Array.isArray(output) && output['answer'] !== 42
          ? [{ rule: 'right_answer', error: 'the answer must be 42', expected: 42 }, 'and be sure']
          : true,
    ],
  }),
  defineAgent({ name: 'cleaner', outputConstraints: [() => undefined, () => false, () => true] }),
  defineAgent({ name: 'failer', outputConstraints: [noTodo, () => 'second problem'] }),
  defineAgent({ name: 'reviser', outputRetries: 1, outputConstraints: [noTodo] }),
  defineAgent({ name: 'stubborn', outputRetries: 2, outputConstraints: [noTodo] }),
  defineAgent({
    name: 'resubmitter',
    tools: [finishTool],
    outputRetries: 1,
    outputConstraints: [noTodo],
  }),
  defineAgent({
    name: 'asyncer',
    outputPolicy: {
      check: async (output: Json) => {
        await sleep(300);
        return output === 'slow but fine' ? null : 'unexpected';
      },
    },
  }),
  defineAgent({
    name: 'hanger',
    outputConstraints: [async () => sleep(8_000).then(() => null)],
  }),
  defineAgent({ name: 'schema', outputSchema: z.object({ answer: z.number() }), outputRetries: 1 }),
  defineAgent({ name: 'schemaStrict', outputSchema: z.object({ answer: z.number() }) }),
  defineAgent({
    name: 'weird',
    outputConstraints: [() => 42 as unknown as string],
  }),
  defineAgent({
    name: 'thrower',
    outputConstraints: [
      () => {
        throw new Error('constraint exploded');
      },
    ],
  }),
];

let kit: TestKit;

beforeAll(async () => {
  kit = await startKit({ agents, model: script });
});
afterAll(async () => kit?.stop());

describe('output checks on the Temporal dev server', () => {
  it('CORE-20 a constraint returns nothing, a boolean, a string, a violation (message or error, metadata explicit or the other keys), an audit, or an array of those; anything else is an ArgumentError', async () => {
    expect(toViolations(undefined)).toEqual([]);
    expect(toViolations(null)).toEqual([]);
    expect(toViolations(true)).toEqual([]);
    expect(toViolations(false)).toEqual([]);
    expect(toViolations('too long')).toEqual([{ rule: 'output_constraint', message: 'too long' }]);
    expect(toViolations({ rule: 'tone', message: 'rude', metadata: { score: 3 } })).toEqual([
      { rule: 'tone', message: 'rude', metadata: { score: 3 } },
    ]);
    expect(toViolations({ error: 'bad', limit: 10 })).toEqual([
      { rule: 'output_constraint', message: 'bad', metadata: { limit: 10 } },
    ]);
    expect(toViolations({})).toEqual([{ rule: 'output_constraint', message: 'output constraint failed' }]);
    expect(
      toViolations({ clean: false, violations: [{ rule: 'nested', message: 'from another audit' }] }),
    ).toEqual([{ rule: 'nested', message: 'from another audit' }]);
    expect(toViolations(['a', [null, { message: 'b' }]])).toEqual([
      { rule: 'output_constraint', message: 'a' },
      { rule: 'output_constraint', message: 'b' },
    ]);
    expect(() => toViolations(42)).toThrow(ArgumentError);
    const audit = await checkOutputPolicy('hello TODO', {
      constraints: [noTodo, { check: (output: Json) => (output === 'hello TODO' ? undefined : 'x') }],
    });
    expect(audit).toEqual({
      clean: false,
      violations: [{ rule: 'output_constraint', message: 'remove the TODO' }],
    });
    expect(await checkOutputPolicy('fine', { constraints: [noTodo] })).toEqual({
      clean: true,
      violations: [],
    });
  });

  it('CORE-20 CORE-21 report mode: structured output is audited as data; named violations with metadata complete the turn with a dirty policy_audit', async () => {
    const run = await kit.client.run('reporter', 'Answer with a secret');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputData).toEqual({ answer: 41, secret: 'hunter2' });
    expect(seen.at(-1)!.output).toEqual({ answer: 41, secret: 'hunter2' });
    expect(seen.at(-1)!.context).toMatchObject({
      outputText: '{"answer":41,"secret":"hunter2"}',
      outputData: { answer: 41, secret: 'hunter2' },
      turn: { id: turn.id },
    });
    const expected = {
      clean: false,
      violations: [
        { rule: 'no_secrets', message: 'the output leaks a secret', metadata: { field: 'secret' } },
        { rule: 'right_answer', message: 'the answer must be 42', metadata: { expected: 42 } },
        { rule: 'output_constraint', message: 'and be sure' },
      ],
    };
    expect(await run.policyAudit()).toEqual(expected);
    expect(await run.policyClean()).toBe(false);
    expect((turn.options['state'] as { policy_audit: unknown }).policy_audit).toEqual(expected);
    const events = (await run.events()).map((event) => [event.type, event.payload]);
    expect(events).toContainEqual(['output_policy.completed', { clean: false, violation_count: 3 }]);
    expect(events.at(-1)![0]).toBe('turn.completed');
  });

  it('CORE-20 clean output audits to {clean: true, violations: []}', async () => {
    const run = await kit.client.run('cleaner', 'Say something');
    expect((await run.result()).status).toBe('completed');
    expect(await run.policyAudit()).toEqual({ clean: true, violations: [] });
    expect(await run.policyClean()).toBe(true);
    const plain = await kit.client.run('schemaStrict', 'x');
    await plain.result();
    expect(await plain.policyAudit()).toMatchObject({ clean: false });
  });

  it('CORE-21 fail mode: a dirty audit fails the turn with OutputAudit, the violations joined, and keeps output_text', async () => {
    const run = await kit.client.run('failer', 'Answer');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.outputText).toBe('The answer is TODO.');
    expect(turn.error!.class).toMatch(/OutputAudit$/);
    expect(turn.error!.message).toBe('remove the TODO; second problem');
    expect(turn.error!['policy_audit']).toEqual(await run.policyAudit());
    expect(await run.policyClean()).toBe(false);
    const types = (await run.events()).map((event) => event.type);
    expect(types.slice(-2)).toEqual(['output_policy.completed', 'turn.failed']);
  });

  it('CORE-23 outputRetries 1: a dirty first draft gets a revision message with the violation, a second model call repairs it', async () => {
    const run = await kit.client.run('reviser', 'Answer');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('The answer is 42.');
    const calls = script.callsFor('reviser');
    expect(calls).toHaveLength(2);
    const fed = calls[1]!.request.messages.at(-1)!;
    expect(fed.role).toBe('user');
    expect(fed.content).toContain('1. output_constraint: remove the TODO');
    const messages = await run.transcript();
    const revision = messages.find((m) => m.metadata['source'] === 'output_policy')!;
    expect(revision).toMatchObject({ role: 'user', turnId: turn.id, metadata: { attempt: 1 } });
    expect(textOf(revision)).toContain('remove the TODO');
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    const events = (await run.events()).map((event) => [event.type, event.payload]);
    expect(events).toContainEqual(['output_policy.revision', { violation_count: 1, attempt: 1 }]);
    expect(events).toContainEqual(['output_policy.completed', { clean: true, violation_count: 0 }]);
    expect(await run.policyAudit()).toEqual({ clean: true, violations: [] });
    expect((turn.options['state'] as { revisions_used: number }).revisions_used).toBe(1);
  });

  it('CORE-23 revisions stop at outputRetries: three drafts, two revision messages, then the fail mode applies', async () => {
    const run = await kit.client.run('stubborn', 'Answer');
    const turn = await run.result();
    expect(script.callsFor('stubborn')).toHaveLength(3);
    expect(turn.status).toBe('failed');
    expect(turn.outputText).toBe('TODO three');
    const revisions = (await run.transcript()).filter((m) => m.metadata['source'] === 'output_policy');
    expect(revisions.map((m) => m.metadata['attempt'])).toEqual([1, 2]);
  });

  it('CORE-23 a terminal tool candidate is revised by resubmitting through that tool', async () => {
    const run = await kit.client.run('resubmitter', 'Answer');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('42');
    const revision = (await run.transcript()).find((m) => m.metadata['source'] === 'output_policy')!;
    expect(textOf(revision)).toContain('Resubmit the revised output by calling submit.');
    expect((await run.toolExecutions()).map((e) => e.status)).toEqual(['completed', 'completed']);
  });

  it('CORE-20 an async constraint runs in its own scheduled activity (outputAudit), not inside the local output step', async () => {
    const run = await kit.client.run('asyncer', 'Be slow');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(await run.policyAudit()).toEqual({ clean: true, violations: [] });
    const temporal = await connectClient();
    const history = await temporal.workflow.getHandle(run.workflowId).fetchHistory();
    const scheduled = (history.events ?? []).flatMap((event) => {
      const name = event.activityTaskScheduledEventAttributes?.activityType?.name;
      return name ? [name] : [];
    });
    expect(scheduled).toContain('outputAudit');
    // No checks, no audit activity: a plain turn keeps its two activities.
    const plain = await kit.client.run('schemaStrict', 'x');
    await plain.result();
    const plainHistory = await temporal.workflow.getHandle(plain.workflowId).fetchHistory();
    expect(
      (plainHistory.events ?? []).some(
        (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'outputAudit',
      ),
    ).toBe(false);
  });

  it('CORE-20 a constraint that never answers is bounded by the output activity timeout: the turn fails, it is not stuck', async () => {
    const client = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal: await connectClient(),
      taskQueue: kit.taskQueue,
      turnSettings: { output: { startToCloseTimeout: '2 seconds', maximumAttempts: 1 } },
    });
    const run = await client.run('hanger', 'Wait');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error!.message).toMatch(/timed out/);
    expect(turn.claimToken).toBeNull();
  });

  it('CORE-20 output schema errors: structured output that does not match outputSchema is an output_schema violation a revision can repair; no structured output at all is one too', async () => {
    const run = await kit.client.run('schema', 'Answer');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputData).toEqual({ answer: 42 });
    const revision = (await run.transcript()).find((m) => m.metadata['source'] === 'output_policy')!;
    expect(textOf(revision)).toMatch(/1\. output_schema: answer: .*number/i);
    const strict = await kit.client.run('schemaStrict', 'Answer');
    const failed = await strict.result();
    expect(failed.status).toBe('failed');
    expect(await strict.policyAudit()).toEqual({
      clean: false,
      violations: [
        { rule: 'output_schema', message: 'the output has no structured data matching the output schema' },
      ],
    });
  });

  it('CORE-20 a constraint returning an unsupported value, or throwing, fails the turn with that error instead of leaving it running', async () => {
    const weird = await (await kit.client.run('weird', 'x')).result();
    expect(weird.status).toBe('failed');
    expect(weird.error).toMatchObject({
      message: expect.stringContaining('an output constraint returned number'),
    });
    expect(weird.error!.class).toMatch(/ArgumentError$/);
    const thrown = await (await kit.client.run('thrower', 'x')).result();
    expect(thrown.status).toBe('failed');
    expect(thrown.error!.message).toContain('constraint exploded');
    expect(thrown.claimToken).toBeNull();
  }, 30_000);
});
