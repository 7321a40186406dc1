/**
 * Issue 21, a person in the loop: tool approvals and turn controls (pause, resume, steer) as
 * Temporal Updates, on the real dev server with a real SQLite store; only the model is replaced.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { signPrincipal } from '../../src/engine/controls/principal-signature.js';
import { ArgumentError, AuthorizationError, ControlError } from '../../src/errors.js';
import type { ModelClient, ModelRequest } from '../../src/models/types.js';
import type { ContentPart } from '../../src/store/types.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import { temporalAddress } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';

const KEY = 'approvals-test-signing-key-0123456789';
const ran: string[] = [];
const modelGate = { current: gate() };
/** The policy holds a principal named `slow…` here until the test opens it (`slow-no` is then denied). */
const policyGate = { current: gate() };
const policyEntered: string[] = [];
/** The `finisher` agent's output check holds here until the test opens it. */
const checkGate = { current: gate() };
let checking = 0;

/**
 * The task says which calls the first model call makes (`CALLS: wire#a lookup#b`); every
 * later call answers with what it read: the tool results and the user messages.
 */
const model: ModelClient = {
  async chat(request: ModelRequest) {
    const first = request.messages.find((m) => m.role === 'user')?.content ?? '';
    const answered = request.messages.some((m) => m.role === 'assistant');
    if (first.includes('GATE') && !answered) await modelGate.current.promise;
    if (!answered && first.includes('CALLS:')) {
      const calls = first.split('CALLS:')[1]!.trim().split(/\s+/);
      return {
        parts: calls.map((spec): ContentPart => {
          const [name, tag] = spec.split('#') as [string, string];
          const amount = Number(tag.replace(/\D/g, '') || '0');
          return {
            type: 'tool_call',
            id: `call_${tag}`,
            name,
            arguments:
              name === 'guarded'
                ? { amount }
                : name === 'child_approver'
                  ? { task: `CALLS: wire#${tag}w lookup#${tag}l` }
                  : { tag },
          };
        }),
        usage: { inputTokens: 1, outputTokens: 1 },
      };
    }
    const read = request.messages
      .filter((m) => m.role === 'tool' || (m.role === 'user' && m !== request.messages[0]))
      .map((m) => m.content);
    return {
      parts: [{ type: 'text', text: `read: ${read.join(' | ')}` }],
      usage: { inputTokens: 1, outputTokens: 1 },
    };
  },
};

const wire = defineTool({
  name: 'wire',
  description: 'Sends money; a person approves each call.',
  input: z.object({ tag: z.string() }),
  needsApproval: true,
  execute: ({ tag }) => {
    ran.push(`wire#${tag}`);
    return { sent: tag };
  },
});
const lookup = defineTool({
  name: 'lookup',
  description: 'Reads something.',
  input: z.object({ tag: z.string() }),
  execute: ({ tag }) => {
    ran.push(`lookup#${tag}`);
    return { found: tag };
  },
});
const guarded = defineTool({
  name: 'guarded',
  description: 'Needs approval above 100.',
  input: z.object({ amount: z.number() }),
  needsApproval: ({ amount }) => amount > 100,
  execute: ({ amount }) => {
    ran.push(`guarded#${amount}`);
    return { paid: amount };
  },
});
const broken = defineTool({
  name: 'broken',
  description: 'Its approval check throws.',
  input: z.object({ tag: z.string() }),
  needsApproval: () => {
    throw new Error('approval service unreachable');
  },
  execute: ({ tag }) => {
    ran.push(`broken#${tag}`);
    return {};
  },
});
const timed = defineTool({
  name: 'timed',
  description: 'Rejected when nobody decides in time.',
  input: z.object({ tag: z.string() }),
  needsApproval: true,
  approvalTimeout: 1_500,
  execute: ({ tag }) => {
    ran.push(`timed#${tag}`);
    return {};
  },
});

const slowTimed = defineTool({
  name: 'slow_timed',
  description: 'Its approval times out soon.',
  input: z.object({ tag: z.string() }),
  needsApproval: true,
  approvalTimeout: 1_000,
  execute: ({ tag }) => {
    ran.push(`slow_timed#${tag}`);
    return { done: tag };
  },
});
const childApprover = defineAgent({
  name: 'child_approver',
  description: 'A sub-agent whose wire calls need approval.',
  tools: [wire, lookup],
});

const CONTROL_ACTIONS = new Set(['approve', 'reject', 'pause', 'resume', 'steer', 'cancel']);
let kit: TestKit;
let signed: TurnKitClient;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'approver', tools: [wire, lookup, guarded, broken, timed, slowTimed] }),
      defineAgent({
        name: 'finisher',
        outputConstraints: [
          async () => {
            checking += 1;
            await checkGate.current.promise;
            return null;
          },
        ],
      }),
      defineAgent({ name: 'delegator', subAgents: [childApprover] }),
    ],
    model,
    runtime: {
      signingKey: KEY,
      authorization: async (request) => {
        if (!CONTROL_ACTIONS.has(request.action)) return true;
        if (typeof request.principal === 'string' && request.principal.startsWith('slow')) {
          policyEntered.push(`${request.action}:${request.principal}`);
          await policyGate.current.promise;
          return request.principal !== 'slow-no';
        }
        if (request.principal === 'mallory') return false;
        // A principal the policy honours only when its signature checked out.
        if (request.principal === 'treasurer') return request['verified'] === true;
        return true;
      },
    },
  });
  signed = new TurnKitClient({
    store: kit.store,
    agents: kit.agents,
    temporal: kit.client.temporal,
    taskQueue: kit.taskQueue,
    signingKey: KEY,
  });
});
afterAll(async () => kit?.stop());

const awaiting = (run: RunHandle, count = 1) =>
  waitUntil(async () => (await run.pendingApprovals()).length >= count);
const pendingActivities = async (run: RunHandle) =>
  (await kit.client.temporal.workflow.getHandle(run.workflowId).describe()).raw.pendingActivities ?? [];
const resultTexts = async (run: RunHandle) =>
  (await run.transcript())
    .filter((m) => m.kind === 'tool_result')
    .flatMap((m) => m.content.filter((p) => p.type === 'tool_result'))
    .map((p) => ({ id: (p as { tool_call_id: string }).tool_call_id, text: (p as { text: string }).text }));
const eventTypes = async (run: RunHandle) => (await run.events()).map((e) => e.type);
const rawUpdate = (run: RunHandle, name: string, payload: unknown) =>
  kit.client.temporal.workflow
    .getHandle(run.workflowId)
    .executeUpdate(name, { args: [payload] })
    // The ApplicationFailure the validator or handler threw.
    .catch((error: Error) => {
      throw error.cause ?? error;
    });

describe('approvals', () => {
  it('approval: a call that needs approval waits awaiting_approval holding no activity; approve runs it once and it shows in history', async () => {
    const run = await kit.client.run('approver', 'CALLS: wire#one');
    await awaiting(run);
    const [pending] = await run.pendingApprovals();
    expect(pending).toMatchObject({ toolCallId: 'call_one', toolName: 'wire', arguments: { tag: 'one' } });
    expect(Date.parse(pending!.requestedAt)).toBeGreaterThan(0);
    await waitUntil(async () => (await run.status()) === 'waiting');
    expect(await pendingActivities(run)).toHaveLength(0);
    expect(ran).not.toContain('wire#one');
    expect((await run.controlState()).awaitingApproval).toEqual(['call_one']);

    const answer = await run.approve('call_one', { principal: 'alice', note: 'looks right' });
    expect(answer).toEqual({
      toolCallId: 'call_one',
      decision: 'approved',
      verified: false,
      turnId: run.turnId,
    });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(ran.filter((r) => r === 'wire#one')).toHaveLength(1);
    expect((await run.toolExecutions())[0]!.status).toBe('completed');
    expect(turn.outputText).toContain('"sent":"one"');
    const types = await eventTypes(run);
    expect(types).toEqual(
      expect.arrayContaining(['approval.approved', 'tool_call.approved', 'tool_call.completed']),
    );
    const approved = (await run.events()).find((e) => e.type === 'approval.approved')!;
    expect(approved.payload).toMatchObject({ principal: 'alice', note: 'looks right', verified: false });
    const history = await kit.client.temporal.workflow.getHandle(run.workflowId).fetchHistory();
    const updates = (history.events ?? []).filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes);
    expect(
      updates.map((e) => e.workflowExecutionUpdateAcceptedEventAttributes!.acceptedRequest!.input!.name),
    ).toEqual(['approve']);
  });

  it('approval: a rejected call gets exactly one result, "rejected by …: reason", which the model reads; the tool never runs', async () => {
    const run = await kit.client.run('approver', 'CALLS: wire#two');
    await awaiting(run);
    await run.reject('call_two', { principal: { name: 'bob' }, reason: 'wrong account' });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(ran).not.toContain('wire#two');
    const results = await resultTexts(run);
    expect(results).toHaveLength(1);
    expect(results[0]!.text).toContain('rejected by bob: wrong account');
    expect(turn.outputText).toContain('rejected by bob: wrong account');
    expect((await run.toolExecutions())[0]!.status).toBe('failed');
    expect(await eventTypes(run)).toEqual(
      expect.arrayContaining(['approval.rejected', 'tool_call.rejected']),
    );
  });

  it('approval: several calls are decided independently and a call needing none is not held back; results stay in call order', async () => {
    const run = await kit.client.run('approver', 'CALLS: wire#a3 lookup#b3 wire#c3 guarded#50 guarded#500');
    // lookup and the small guarded call need no approval: they run while both wires wait.
    await waitUntil(async () => ran.includes('lookup#b3') && ran.includes('guarded#50'));
    await awaiting(run, 3);
    expect((await run.pendingApprovals()).map((p) => p.toolCallId)).toEqual([
      'call_a3',
      'call_c3',
      'call_500',
    ]);
    await run.approve('call_c3', { principal: 'alice' });
    await waitUntil(async () => ran.includes('wire#c3'));
    expect(ran).not.toContain('wire#a3');
    await run.reject('call_a3', { principal: 'alice', reason: 'not this one' });
    await run.approve('call_500', { principal: 'alice' });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const results = await resultTexts(run);
    expect(results.map((r) => r.id)).toEqual(['call_a3', 'call_b3', 'call_c3', 'call_50', 'call_500']);
    expect(results[0]!.text).toContain('rejected by alice: not this one');
    expect(ran.filter((r) => r === 'wire#c3' || r === 'guarded#500')).toHaveLength(2);
  });

  it('approval: an approval timeout rejects the call with "approval timed out" on a durable timer', async () => {
    const run = await kit.client.run('approver', 'CALLS: timed#late');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const results = await resultTexts(run);
    expect(results).toHaveLength(1);
    expect(results[0]!.text).toContain('approval timed out');
    expect(ran).not.toContain('timed#late');
    const history = await kit.client.temporal.workflow.getHandle(run.workflowId).fetchHistory();
    expect((history.events ?? []).some((e) => e.timerFiredEventAttributes)).toBe(true);
  });

  it('approval: a decision accepted before the approval timeout fired wins over it; one refused afterwards lets the timeout apply; one decision event per call', async () => {
    policyGate.current = gate();
    policyEntered.length = 0;
    const run = await kit.client.run('approver', 'CALLS: slow_timed#t1 slow_timed#t2');
    await awaiting(run, 2);
    // Both decisions are accepted and held in the policy; both approval timers fire meanwhile.
    const approved = run.approve('call_t1', { principal: 'slow-yes' });
    const denied = run.approve('call_t2', { principal: 'slow-no' }).catch((error: unknown) => error);
    await waitUntil(async () => policyEntered.length === 2);
    const history = kit.client.temporal.workflow.getHandle(run.workflowId);
    await waitUntil(
      async () =>
        ((await history.fetchHistory()).events ?? []).filter((e) => e.timerFiredEventAttributes).length === 2,
    );
    await expect(run.approve('call_t1', { principal: 'alice' })).rejects.toMatchObject({ code: 'decided' });
    policyGate.current.open();
    expect(await approved).toMatchObject({ toolCallId: 'call_t1', decision: 'approved' });
    expect(await denied).toBeInstanceOf(AuthorizationError);
    expect((await run.result()).status).toBe('completed');
    expect(ran.filter((r) => r.startsWith('slow_timed#'))).toEqual(['slow_timed#t1']);
    const results = await resultTexts(run);
    expect(results.map((r) => r.id)).toEqual(['call_t1', 'call_t2']);
    expect(results[0]!.text).toContain('"done":"t1"');
    expect(results[1]!.text).toContain('approval timed out');
    // Exactly one outcome recorded per call: approved, rejected, or timed out.
    const events = await run.events();
    const outcomes = (id: string) =>
      events
        .filter(
          (e) =>
            (e.type === 'approval.approved' || e.type === 'approval.rejected') &&
            e.payload['tool_call_id'] === id,
        )
        .map((e) => e.type)
        .concat(
          events
            .filter(
              (e) => e.type === 'tool_call.rejected' && e.payload['id'] === id && e.payload['timed_out'],
            )
            .map(() => 'timed_out'),
        );
    expect(outcomes('call_t1')).toEqual(['approval.approved']);
    expect(outcomes('call_t2')).toEqual(['timed_out']);
    expect(events.filter((e) => e.type === 'control.denied').map((e) => e.payload['tool_call_id'])).toEqual([
      'call_t2',
    ]);
  });

  it('approval: bad input gets typed errors and writes nothing: approving twice, an unknown id, a malformed payload, an unauthorized principal', async () => {
    const run = await kit.client.run('approver', 'CALLS: wire#bad');
    await awaiting(run);
    await expect(run.approve('call_nope', { principal: 'alice' })).rejects.toMatchObject({
      name: 'ControlError',
      code: 'unknown_call',
    });
    await expect(rawUpdate(run, 'approve', { toolCallId: 42 })).rejects.toThrow(/toolCallId/);
    await expect(rawUpdate(run, 'approve', 'call_bad')).rejects.toThrow(/payload must be an object/);
    await expect(rawUpdate(run, 'reject', { toolCallId: 'call_bad', colour: 'red' })).rejects.toThrow(
      /unknown reject field/,
    );
    const denied = run.approve('call_bad', { principal: 'mallory' });
    await expect(denied).rejects.toBeInstanceOf(AuthorizationError);
    expect(await eventTypes(run)).toContain('control.denied');
    expect(await run.pendingApprovals()).toHaveLength(1);
    await run.approve('call_bad', { principal: 'alice' });
    await expect(run.approve('call_bad', { principal: 'alice' })).rejects.toMatchObject({ code: 'decided' });
    await expect(run.reject('call_bad', { principal: 'alice' })).rejects.toBeInstanceOf(ControlError);
    expect((await run.result()).status).toBe('completed');
    expect(ran.filter((r) => r === 'wire#bad')).toHaveLength(1);
    await expect(run.approve('call_bad')).rejects.toMatchObject({ code: 'finished' });
  });

  it('approval: a needsApproval function that throws fails the call with its message, which the model reads', async () => {
    const run = await kit.client.run('approver', 'CALLS: broken#x');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(ran).not.toContain('broken#x');
    const [result] = await resultTexts(run);
    expect(result!.text).toContain('needsApproval of broken failed: approval service unreachable');
    expect(turn.outputText).toContain('approval service unreachable');
  });

  it('approval: a cancel while a call awaits approval cancels the turn with one result per call; approving after it is refused', async () => {
    const run = await kit.client.run('approver', 'CALLS: wire#c1 lookup#c2 wire#c3x');
    await awaiting(run, 2);
    await run.cancel();
    const turn = await run.result();
    expect(turn.status).toBe('cancelled');
    const results = await resultTexts(run);
    expect(results.map((r) => r.id)).toEqual(['call_c1', 'call_c2', 'call_c3x']);
    expect(results[0]!.text).toContain('not executed: turn was cancelled');
    const rows = await run.toolExecutions();
    expect(rows.map((r) => r.status).sort()).toEqual(['cancelled', 'cancelled', 'completed']);
    await expect(run.approve('call_c1', { principal: 'alice' })).rejects.toMatchObject({ code: 'finished' });
    expect(ran).not.toContain('wire#c1');
  });

  it('approval: `temporal workflow update execute --name approve` from the CLI approves a call', async () => {
    const run = await kit.client.run('approver', 'CALLS: wire#cli');
    await awaiting(run);
    const cli = temporalCli();
    const args = [
      'workflow',
      'update',
      'execute',
      '--address',
      temporalAddress(),
      '--workflow-id',
      run.workflowId,
    ];
    const bad = await promisify(execFile)(cli, [
      ...args,
      '--name',
      'approve',
      '--input',
      '{"toolCallId": 7}',
    ]).catch((error: Error) => error);
    expect(String(bad)).toMatch(/toolCallId/);
    const { stdout } = await promisify(execFile)(cli, [
      ...args,
      '--name',
      'approve',
      '--input',
      '{"toolCallId": "call_cli", "principal": "operator"}',
    ]);
    expect(stdout).toContain('approved');
    expect((await run.result()).status).toBe('completed');
    expect(ran).toContain('wire#cli');
  });
});

describe('who is asking', () => {
  it('approval: a signed principal is verified; a forged one, an expired signature and one for another turn are each refused', async () => {
    const run = await kit.client.run('approver', 'CALLS: wire#s1 wire#s2');
    await awaiting(run, 2);
    const other = await kit.client.run('approver', 'CALLS: wire#s3');
    await awaiting(other);
    const principal = 'treasurer';
    // Forged: claims to be the treasurer without the key.
    await expect(run.approve('call_s1', { principal })).rejects.toBeInstanceOf(AuthorizationError);
    // Expired: a real signature, replayed after its expiry.
    const expired = signPrincipal(
      KEY,
      { turnId: run.turnId, action: 'approve', principal, params: { toolCallId: 'call_s1' } },
      { ttlMs: -1_000 },
    );
    await expect(
      rawUpdate(run, 'approve', { toolCallId: 'call_s1', principal, signature: expired }),
    ).rejects.toThrow(/not authorized to approve/);
    // Signed for another turn.
    const elsewhere = signPrincipal(KEY, {
      turnId: other.turnId,
      action: 'approve',
      principal,
      params: { toolCallId: 'call_s1' },
    });
    await expect(
      rawUpdate(run, 'approve', { toolCallId: 'call_s1', principal, signature: elsewhere }),
    ).rejects.toThrow(/not authorized to approve/);
    const denials = (await run.events())
      .filter((e) => e.type === 'control.denied')
      .map((e) => e.payload['verification']);
    expect(denials).toEqual(['unsigned', 'expired', 'bad_signature']);
    expect(await run.pendingApprovals()).toHaveLength(2);

    const handle = await signed.handle(run.turnId);
    expect(await handle.approve('call_s1', { principal })).toMatchObject({ verified: true });
    expect(await handle.reject('call_s2', { principal, reason: 'one is enough' })).toMatchObject({
      verified: true,
    });
    expect((await run.result()).status).toBe('completed');
    await (await signed.handle(other.turnId)).cancel({ principal });
    expect((await other.result()).status).toBe('cancelled');
  });
});

describe('turn controls', () => {
  it('pause: the turn stops before its model call, shows paused and holds no worker; resume goes on; pausing twice is refused', async () => {
    modelGate.current = gate();
    const run = await kit.client.run('approver', 'GATE CALLS: lookup#p1');
    await waitUntil(async () => (await eventTypes(run)).includes('model.requested'));
    const state = await run.pause({ principal: 'alice' });
    expect(state.pauseRequested).toBe(true);
    await expect(run.pause({ principal: 'alice' })).rejects.toMatchObject({ code: 'already_paused' });
    modelGate.current.open();
    // The model call in flight finishes; the turn stops before the tool call.
    await waitUntil(async () => (await run.status()) === 'paused');
    expect(await pendingActivities(run)).toHaveLength(0);
    expect(ran).not.toContain('lookup#p1');
    expect(await run.controlState()).toMatchObject({ paused: true, status: 'paused' });
    const search = await kit.client.temporal.workflow.getHandle(run.workflowId).describe();
    expect(search.typedSearchAttributes.getAll().find((p) => p.key.name === 'TurnKitStatus')?.value).toBe(
      'paused',
    );
    await run.resume({ principal: 'alice' });
    expect((await run.result()).status).toBe('completed');
    expect(ran).toContain('lookup#p1');
    expect(await eventTypes(run)).toEqual(
      expect.arrayContaining([
        'turn.pause_requested',
        'turn.paused',
        'turn.resume_requested',
        'turn.resumed',
      ]),
    );
  });

  it('pause: a cancel of a paused turn works as any cancel', async () => {
    modelGate.current = gate();
    const run = await kit.client.run('approver', 'GATE CALLS: lookup#pc');
    await waitUntil(async () => (await eventTypes(run)).includes('model.requested'));
    await run.pause();
    modelGate.current.open();
    await waitUntil(async () => (await run.status()) === 'paused');
    await run.cancel();
    expect((await run.result()).status).toBe('cancelled');
    const results = await resultTexts(run);
    expect(results).toHaveLength(1);
    expect(results[0]!.text).toContain('not executed');
    expect(ran).not.toContain('lookup#pc');
  });

  it('resume: resuming a turn that is not paused, and a malformed or unauthorized control, are refused with typed errors', async () => {
    const run = await kit.client.run('approver', 'CALLS: wire#r1');
    await awaiting(run);
    await expect(run.resume()).rejects.toMatchObject({ name: 'ControlError', code: 'not_paused' });
    await expect(rawUpdate(run, 'resume', { principal: 'alice', please: true })).rejects.toThrow(
      /unknown resume field/,
    );
    await expect(run.pause({ principal: 'mallory' })).rejects.toBeInstanceOf(AuthorizationError);
    await expect(run.steer('   ')).rejects.toBeInstanceOf(ArgumentError);
    expect((await run.controlState()).pauseRequested).toBe(false);
    await run.approve('call_r1');
    expect((await run.result()).status).toBe('completed');
  });

  it('steer: proposals not yet started are closed as "superseded by human steering" and the next model call reads the message', async () => {
    modelGate.current = gate();
    const run = await kit.client.run('approver', 'GATE CALLS: lookup#s1 wire#s2');
    await waitUntil(async () => (await eventTypes(run)).includes('model.requested'));
    await run.steer('Stop: use the other account.', { principal: 'alice' });
    modelGate.current.open();
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(ran).not.toContain('lookup#s1');
    const results = await resultTexts(run);
    expect(results.map((r) => r.id)).toEqual(['call_s1', 'call_s2']);
    for (const result of results) expect(result.text).toContain('superseded by human steering');
    expect((await run.toolExecutions()).map((r) => r.status)).toEqual(['cancelled', 'cancelled']);
    expect(turn.outputText).toContain('Stop: use the other account.');
    const steer = (await run.transcript()).find((m) => m.role === 'user' && m.metadata['steer_id']);
    expect(steer?.metadata['steered_by']).toBe('alice');
    expect(await eventTypes(run)).toEqual(expect.arrayContaining(['turn.steer_requested', 'turn.steered']));
  });

  it('steer: steering that arrives during the final model call is read before the turn ends: the candidate is dropped and the model answers again', async () => {
    modelGate.current = gate();
    const run = await kit.client.run('approver', 'GATE just answer');
    await waitUntil(async () => (await eventTypes(run)).includes('model.requested'));
    await run.steer('Mention the deadline.', { principal: 'alice' });
    modelGate.current.open();
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('read: Mention the deadline.');
    const assistant = (await run.transcript()).filter((m) => m.role === 'assistant');
    expect(assistant).toHaveLength(2);
  });

  it('steer: steering accepted while the last model call ended and still being authorized is applied: the output waits for it', async () => {
    modelGate.current = gate();
    policyGate.current = gate();
    policyEntered.length = 0;
    const run = await kit.client.run('approver', 'GATE just answer');
    await waitUntil(async () => (await eventTypes(run)).includes('model.requested'));
    const steered = run.steer('Mention the budget.', { principal: 'slow-yes' });
    await waitUntil(async () => policyEntered.includes('steer:slow-yes'));
    modelGate.current.open();
    // The model's answer is written; the turn stands before its output, waiting for the steer.
    await waitUntil(async () => (await run.transcript()).some((m) => m.role === 'assistant'));
    policyGate.current.open();
    expect(await steered).toMatchObject({ pendingSteers: 1 });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('read: Mention the budget.');
    expect((await run.transcript()).filter((m) => m.role === 'assistant')).toHaveLength(2);
    expect(await eventTypes(run)).toContain('turn.steered');
  });

  it('steer: once the turn commits to its output (checks running), steer and pause are refused too_late before anything is written', async () => {
    checkGate.current = gate();
    checking = 0;
    const run = await kit.client.run('finisher', 'just answer');
    await waitUntil(async () => checking > 0);
    expect(await run.controlState()).toMatchObject({ finishing: true, finished: false });
    await expect(run.steer('Add a footnote.', { principal: 'alice' })).rejects.toMatchObject({
      name: 'ControlError',
      code: 'too_late',
    });
    await expect(run.pause({ principal: 'alice' })).rejects.toMatchObject({ code: 'too_late' });
    checkGate.current.open();
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('read: ');
    const types = await eventTypes(run);
    expect(types).not.toContain('turn.steer_requested');
    expect(types).not.toContain('turn.pause_requested');
    expect((await run.transcript()).some((m) => m.metadata['steer_id'])).toBe(false);
  });

  it('pause: a pause accepted before the output stops the turn there; steering sent while paused is applied after the resume', async () => {
    modelGate.current = gate();
    const run = await kit.client.run('approver', 'GATE just answer');
    await waitUntil(async () => (await eventTypes(run)).includes('model.requested'));
    await run.pause({ principal: 'alice' });
    modelGate.current.open();
    await waitUntil(async () => (await run.status()) === 'paused');
    expect((await run.turn()).outputText).toBeNull();
    await run.steer('And sign it.', { principal: 'alice' });
    await run.resume({ principal: 'alice' });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('read: And sign it.');
  });

  it('steer: steering a call awaiting approval supersedes it; steering a finished turn is refused', async () => {
    const run = await kit.client.run('approver', 'CALLS: lookup#w1 wire#w2');
    await awaiting(run);
    await run.steer('Never mind the transfer.', { principal: 'alice' });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const results = await resultTexts(run);
    expect(results.map((r) => r.text.includes('superseded by human steering'))).toEqual([false, true]);
    expect(ran).toContain('lookup#w1');
    expect(ran).not.toContain('wire#w2');
    expect(turn.outputText).toContain('Never mind the transfer.');
    await expect(run.steer('too late')).rejects.toMatchObject({ code: 'finished' });
  });
});

describe('sub-agent turns', () => {
  it("approval: pendingApprovals lists the calls awaiting approval across the run's tree, each with its turn; approve and reject through the root's handle reach the child's workflow", async () => {
    const run = await kit.client.run('delegator', 'CALLS: child_approver#k1');
    await awaiting(run);
    const [pending] = await run.pendingApprovals();
    const child = (await kit.store.listTurns({ rootTurnId: run.turnId })).find(
      (t) => t.agentName === 'child_approver',
    )!;
    expect(pending).toMatchObject({
      toolCallId: 'call_k1w',
      toolName: 'wire',
      turnId: child.id,
      agentName: 'child_approver',
    });
    // The child's own handle lists it too; the root's controlState is the root's own.
    expect((await (await kit.client.handle(child.id)).pendingApprovals()).map((p) => p.toolCallId)).toEqual([
      'call_k1w',
    ]);
    await expect(run.approve('call_k1w', { turnId: 'no-such-turn' })).rejects.toBeInstanceOf(ArgumentError);
    await expect(run.approve('call_zz', { principal: 'alice' })).rejects.toMatchObject({
      code: 'unknown_call',
    });
    // Signed for the child's turn: the policy sees it verified.
    const root = await signed.handle(run.turnId);
    expect(await root.approve('call_k1w', { principal: 'treasurer' })).toMatchObject({
      toolCallId: 'call_k1w',
      decision: 'approved',
      verified: true,
      turnId: child.id,
    });
    await expect(root.reject('call_k1w', { principal: 'treasurer' })).rejects.toMatchObject({
      code: 'decided',
    });
    expect((await run.result()).status).toBe('completed');
    expect(ran).toContain('wire#k1w');
    expect(await run.pendingApprovals()).toEqual([]);
  });

  it('approval: a cascading cancel by a principal the policy honours only verified cancels the whole tree; a forged cancel of the child is refused', async () => {
    const run = await kit.client.run('delegator', 'CALLS: child_approver#q1');
    await awaiting(run);
    const child = (await run.pendingApprovals())[0]!.turnId;
    const childRun = await kit.client.handle(child);
    // Forged: the treasurer without the key.
    await childRun.cancel({ descendants: 'cascade', principal: 'treasurer' });
    await waitUntil(async () => (await eventTypes(childRun)).includes('cancel.denied'));
    expect(await childRun.status()).not.toBe('cancelled');
    await (await signed.handle(run.turnId)).cancel({ descendants: 'cascade', principal: 'treasurer' });
    expect((await run.result()).status).toBe('cancelled');
    // The child's workflow ends too: the cascade reached it and was honoured.
    const childEnd = (await kit.client.temporal.workflow.getHandle(childRun.workflowId).result()) as {
      status: string;
    };
    expect(childEnd.status).toBe('cancelled');
    expect((await childRun.turn()).status).toBe('cancelled');
    expect((await eventTypes(childRun)).filter((t) => t === 'cancel.denied')).toHaveLength(1);
    expect(ran).not.toContain('wire#q1w');
  });
});

describePostgres('approvals and controls on PostgreSQL', () => {
  let pgKit: TestKit;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const pg = await openPgTestStore();
    drop = pg.drop;
    pgKit = await startKit({
      store: pg.store,
      model,
      agents: [defineAgent({ name: 'approver', tools: [wire, lookup] })],
    });
  });
  afterAll(async () => {
    await pgKit?.stop();
    await drop?.();
  });

  it('approval: on PostgreSQL, approve and reject decide held calls, a paused turn holds its lane, steering supersedes the rest', async () => {
    const run = await pgKit.client.run('approver', 'CALLS: wire#pg1 wire#pg2 lookup#pg3');
    await waitUntil(async () => (await run.pendingApprovals()).length === 2);
    await run.pause({ principal: 'alice' });
    await run.approve('call_pg1', { principal: 'alice' });
    await waitUntil(async () => (await run.status()) === 'paused');
    expect(await pgKit.store.busyConversation(run.conversationId)).toBe(true);
    expect(ran).not.toContain('wire#pg1');
    await run.resume({ principal: 'alice' });
    await waitUntil(async () => ran.includes('wire#pg1'));
    await run.steer('Skip the second transfer.', { principal: 'alice' });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const results = await resultTexts(run);
    expect(results.map((r) => r.id)).toEqual(['call_pg1', 'call_pg2', 'call_pg3']);
    expect(results[1]!.text).toContain('superseded by human steering');
    expect(ran).not.toContain('wire#pg2');
    expect(turn.outputText).toContain('Skip the second transfer.');
  });
});

function temporalCli(): string {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'temporal'))) return join(dir, 'temporal');
  }
  return readFileSync(join(process.cwd(), '.temporal', 'venv', 'turnkit-cli-path'), 'utf8').trim();
}
