/**
 * Layer: engine driver (test/helpers/engine-driver.ts), memory store, no Temporal server.
 * A cancel's authorization goes through the workflow's signal: authorization-cancel.test.ts.
 *
 * Authorization (spec §6): one kit whose policy each test swaps, and a log of every request
 * the policy was asked about.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { AuthorizationRequest } from '../../src/engine/runtime.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { Json, ToolExecutionRecord } from '../../src/store/types.js';
import type { DriverKit } from '../helpers/driver-kit.js';
import { startDriverKit } from '../helpers/driver-kit.js';

const toolMessages = (request: ModelRequest) => request.messages.filter((m) => m.role === 'tool');

let guardedCalls = 0;
const guarded = defineTool({
  name: 'guarded',
  description: 'An effect the policy may forbid.',
  input: z.object({ n: z.number() }),
  execute: ({ n }) => {
    guardedCalls += 1;
    return { done: n };
  },
});

// The tool's own argument is named `principal`: it must never become the turn's principal.
const whoamiSeen: { agent: string; principal: Json; argument: string | undefined }[] = [];
const whoami = defineTool({
  name: 'whoami',
  description: 'Reports who the turn runs for.',
  input: z.object({ principal: z.string().optional() }),
  execute: ({ principal }, context) => {
    whoamiSeen.push({ agent: context.turn.agentName, principal: context.principal, argument: principal });
    return { principal: context.principal };
  },
});

const helper = defineAgent({ name: 'helper', description: 'Helps.', tools: [whoami] });

const model = new ScriptedModel({
  guarded_user: (request) =>
    toolMessages(request).length
      ? 'continued'
      : {
          toolCalls: [
            { name: 'guarded', arguments: { n: 1 } },
            { name: 'guarded', arguments: { n: 2 } },
          ],
        },
  delegator: (request) =>
    toolMessages(request).length
      ? 'delegated'
      : { toolCalls: [{ name: 'helper', arguments: { task: 'help' } }] },
  helper: (request) =>
    toolMessages(request).length
      ? 'helped'
      : { toolCalls: [{ name: 'whoami', arguments: { principal: 'root' } }] },
  impostor: (request) =>
    toolMessages(request).length
      ? 'checked'
      : { toolCalls: [{ name: 'whoami', arguments: { principal: 'root' } }] },
});

type Policy = (request: AuthorizationRequest) => unknown;
const allowAll: Policy = () => true;
let policy: Policy = allowAll;
const seen: AuthorizationRequest[] = [];

let kit: DriverKit;
beforeAll(async () => {
  kit = await startDriverKit({
    agents: [
      defineAgent({ name: 'guarded_user', tools: [guarded] }),
      defineAgent({ name: 'delegator', subAgents: [helper] }),
      defineAgent({ name: 'impostor', tools: [whoami] }),
    ],
    model,
    runtime: {
      authorization: (request) => {
        seen.push(JSON.parse(JSON.stringify(request)) as AuthorizationRequest);
        return policy(request);
      },
    },
  });
});
afterAll(async () => kit?.stop());
beforeEach(() => {
  policy = allowAll;
  seen.length = 0;
});

function expectDenied(execution: ToolExecutionRecord | undefined, action: string) {
  expect(execution?.status).toBe('failed');
  expect(execution?.error?.message).toBe(`not authorized to ${action}`);
  expect((execution?.error as { details?: Record<string, unknown> }).details).toMatchObject({
    class: 'TurnKit::AuthorizationError',
    authorization_denied: true,
  });
}

describe('authorization policy (spec §6)', () => {
  it('BG-25 a policy denying `tool`: the tool is never called, every execution fails authorization_denied, the turn continues and completes', async () => {
    policy = (request) => request.action !== 'tool';
    const before = guardedCalls;
    const run = await kit.client.run('guarded_user', 'Do two guarded things');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('continued');
    expect(guardedCalls).toBe(before);
    const executions = await run.toolExecutions();
    expect(executions).toHaveLength(2);
    for (const execution of executions) expectDenied(execution, 'tool');
    // The model read both denials and went on: two model calls, one result per call.
    expect(
      model
        .callsFor('guarded_user')
        .at(-1)!
        .request.messages.filter((m) => m.role === 'tool'),
    ).toHaveLength(2);
    const results = (await run.transcript()).filter((m) => m.kind === 'tool_result');
    expect(results).toHaveLength(2);
    expect(results.every((m) => m.content.some((p) => p.type === 'tool_result' && p.error))).toBe(true);
    expect(seen.filter((r) => r.action === 'tool').map((r) => r['tool'])).toEqual(['guarded', 'guarded']);
  });

  it('BG-27 denying `launch_agent` for a sub-agent call: the run completes, the child model is never called, no child turn exists, the first execution failed', async () => {
    policy = (request) => request.action !== 'launch_agent';
    const before = model.callsFor('helper').length;
    const run = await kit.client.run('delegator', 'Delegate something');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('delegated');
    expect(model.callsFor('helper')).toHaveLength(before);
    expect((await run.turns()).filter((t) => t.id !== run.turnId)).toHaveLength(0);
    const executions = await run.toolExecutions();
    expectDenied(executions[0], 'launch_agent');
    const launch = seen.find((r) => r.action === 'launch_agent');
    expect(launch).toMatchObject({ turn: run.turnId, agent: 'helper', arguments: { task: 'help' } });
  });

  it('BG-37 denying `wait` blocks the implicit sub-agent join: the policy saw `wait`, no wait rows, no child turns, the execution failed', async () => {
    policy = (request) => request.action !== 'wait';
    const before = model.callsFor('helper').length;
    const run = await kit.client.run('delegator', 'Delegate and join');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(seen.map((r) => r.action)).toContain('wait');
    expect(seen.find((r) => r.action === 'wait')).toMatchObject({ turn: run.turnId });
    expect(await kit.store.listWaits({ turnId: run.turnId })).toHaveLength(0);
    expect((await run.turns()).filter((t) => t.id !== run.turnId)).toHaveLength(0);
    expect(model.callsFor('helper')).toHaveLength(before);
    const [execution] = await run.toolExecutions();
    expectDenied(execution, 'wait');
  });

  it('§6 the principal comes only from the application: a model argument named principal cannot set it, the policy sees the app principal', async () => {
    const app = { user: 'ada', role: 'member' };
    const run = await kit.client.run('impostor', 'Who am I?', { principal: app });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.options['principal']).toEqual(app);
    const toolRequest = seen.find((r) => r.action === 'tool' && r['turn'] === run.turnId)!;
    expect(toolRequest.principal).toEqual(app);
    expect(toolRequest['arguments']).toEqual({ principal: 'root' });
    expect(whoamiSeen.at(-1)).toEqual({ agent: 'impostor', principal: app, argument: 'root' });
    const [execution] = await run.toolExecutions();
    expect(execution!.result).toEqual({ principal: app });
  });

  it('§6 the principal propagates to a child turn: child options.principal, and the policy and the child tool see it', async () => {
    const app = { user: 'grace' };
    const run = await kit.client.run('delegator', 'Delegate with identity', { principal: app });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const child = (await run.turns()).find((t) => t.parentTurnId === run.turnId)!;
    expect(child.status).toBe('completed');
    expect(child.options['principal']).toEqual(app);
    expect(seen.find((r) => r.action === 'launch_agent')!.principal).toEqual(app);
    expect(seen.find((r) => r.action === 'wait')!.principal).toEqual(app);
    const childTool = seen.find((r) => r.action === 'tool' && r['turn'] === child.id)!;
    expect(childTool.principal).toEqual(app);
    expect(whoamiSeen.at(-1)).toEqual({ agent: 'helper', principal: app, argument: 'root' });
  });

  it('§6 a policy returning a truthy value other than literal `true` denies', async () => {
    for (const verdict of [1, 'yes', {}, [true]] as unknown[]) {
      policy = (request) => (request.action === 'tool' ? verdict : true);
      const before = guardedCalls;
      const run = await kit.client.run('guarded_user', `Truthy ${JSON.stringify(verdict)}`);
      expect((await run.result()).status).toBe('completed');
      expect(guardedCalls).toBe(before);
      const executions = await run.toolExecutions();
      expect(executions).toHaveLength(2);
      for (const execution of executions) expectDenied(execution, 'tool');
    }
  });
});
