/**
 * Layer: engine driver (test/helpers/engine-driver.ts), memory store, no Temporal server; the
 * same block on the dev server is in budget-policy-workflow.test.ts.
 *
 * TurnKit's later `tool_policy` (decision 38): `defineAgent({ toolPolicy })` is asked once per
 * call before it runs; a blocked call gets its one result "blocked by policy: …", the model
 * reads it, and `tool_policy_blocked` is written with the result, in one transaction.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { ToolPolicy, ToolPolicyCall, ToolPolicyContext } from '../../src/agents/tool-policy.js';
import { ArgumentError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { DriverKit } from '../helpers/driver-kit.js';
import { startDriverKit } from '../helpers/driver-kit.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import { toolResults, wireTool } from '../helpers/tools.js';

const ran: string[] = [];
const deploy = defineTool({
  name: 'deploy',
  description: 'Deploys a service.',
  input: z.object({ service: z.string() }),
  execute: ({ service }) => {
    ran.push(`deploy ${service}`);
    return { deployed: service };
  },
});
const lookup = defineTool({
  name: 'lookup',
  description: 'Looks something up.',
  input: z.object({ q: z.string() }),
  readOnly: true,
  execute: ({ q }) => {
    ran.push(`lookup ${q}`);
    return { found: q };
  },
});
const wire = wireTool(ran);

let fetches = 0;
const fetchTool = defineTool({
  name: 'fetch',
  description: 'Fetches a page (replay-safe; the first try fails).',
  input: z.object({ url: z.string() }),
  readOnly: true,
  execute: ({ url }) => {
    if (++fetches === 1) throw new Error('connection reset');
    ran.push(`fetch ${url}`);
    return { fetched: url };
  },
});

/** What the policy was asked, per test. */
const asked: { call: ToolPolicyCall; context: ToolPolicyContext }[] = [];
let decide: ToolPolicy = () => 'allow';
const policy: ToolPolicy = (call, context) => {
  asked.push({ call, context });
  return decide(call, context);
};

const toolMessages = (request: ModelRequest) => request.messages.filter((m) => m.role === 'tool');
/** First call: the calls; second: what the model read in the results. */
const script =
  (...calls: { name: string; arguments: object }[]) =>
  (request: ModelRequest) =>
    toolMessages(request).length
      ? `read: ${toolMessages(request)
          .map((m) => m.content)
          .join(' | ')}`
      : { toolCalls: calls };

const model = new ScriptedModel({
  guarded: script(
    { name: 'deploy', arguments: { service: 'prod' } },
    { name: 'lookup', arguments: { q: 'docs' } },
  ),
  approver: script({ name: 'wire', arguments: { amount: 5 } }),
  fetcher: script({ name: 'fetch', arguments: { url: 'https://example.com' } }),
});
const warnings: string[] = [];
const logger = { warn: (...args: unknown[]) => warnings.push(args.join(' ')), error: () => undefined };

let kit: DriverKit;
let retried: DriverKit;
beforeAll(async () => {
  const agents = [
    defineAgent({ name: 'guarded', tools: [deploy, lookup], toolPolicy: policy }),
    defineAgent({ name: 'approver', tools: [wire], toolPolicy: policy }),
    defineAgent({ name: 'fetcher', tools: [fetchTool], toolPolicy: policy }),
  ];
  kit = await startDriverKit({ agents, model, runtime: { logger } });
  // Every tool call activity runs a second time with the same input, as a retry whose first
  // attempt committed and died before it reported.
  retried = await startDriverKit({ agents, model, runtime: { logger }, faults: { repeat: ['tool'] } });
});
afterAll(async () => {
  await kit?.stop();
  await retried?.stop();
});
beforeEach(() => {
  asked.length = 0;
  ran.length = 0;
  warnings.length = 0;
  decide = () => 'allow';
});

describe('tool policy', () => {
  it('tool policy: a blocked call gets its one result "blocked by policy: …", the model reads it, and tool_policy_blocked is written; allowed calls run', async () => {
    decide = (call) => (call.name === 'deploy' ? { block: 'no deploys on Fridays' } : 'allow');
    const run = await kit.client.run('guarded', 'Ship it', {
      principal: { user: 'ada' },
      context: { team: 'infra' },
    });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(ran).toEqual(['lookup docs']);
    const rows = await run.toolExecutions();
    expect(rows.map((row) => [row.toolName, row.status])).toEqual([
      ['deploy', 'failed'],
      ['lookup', 'completed'],
    ]);
    expect(rows[0]!.error).toEqual({
      message: 'blocked by policy: no deploys on Fridays',
      details: { policy_blocked: true },
    });
    const results = toolResults(await run.transcript());
    expect(results).toHaveLength(2);
    expect(results[0]).toMatchObject({ tool_call_id: rows[0]!.toolCallId, error: true });
    expect(turn.outputText).toContain('blocked by policy: no deploys on Fridays');
    const events = await kit.store.listEvents(run.turnId);
    const blocked = events.filter((event) => event.type === 'tool_policy_blocked');
    expect(blocked).toHaveLength(1);
    expect(blocked[0]!.payload).toEqual({
      id: rows[0]!.toolCallId,
      name: 'deploy',
      reason: 'no deploys on Fridays',
      principal: { user: 'ada' },
    });
    // The event is written before the call's failure is reported.
    const types = events.map((event) => event.type);
    expect(types.indexOf('tool_policy_blocked')).toBeLessThan(types.indexOf('tool_call.failed'));
    // What the policy saw: the call as proposed, and the turn it belongs to.
    expect(asked.map(({ call }) => call)).toEqual([
      {
        id: rows[0]!.toolCallId,
        name: 'deploy',
        arguments: { service: 'prod' },
        kind: 'ordinary',
        readOnly: false,
      },
      { id: rows[1]!.toolCallId, name: 'lookup', arguments: { q: 'docs' }, kind: 'ordinary', readOnly: true },
    ]);
    expect(asked[0]!.context).toMatchObject({
      agent: 'guarded',
      principal: { user: 'ada' },
      context: { team: 'infra' },
      turn: { id: run.turnId },
    });
    // The history the model read before the response holding the call: the task.
    const history = await asked[0]!.context.history();
    expect(history.map((message) => message.role)).toEqual(['user']);
  });

  it('tool policy: a policy that answers differently each time is asked once per call: a retried tool call activity keeps the recorded decision, with one result and one event', async () => {
    let answers = 0;
    // Blocks on its first answer, allows on every later one.
    decide = () => (answers++ === 0 ? { block: 'first answer' } : 'allow');
    const run = await retried.client.run('guarded', 'Ship it');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(asked.map(({ call }) => call.name)).toEqual(['deploy', 'lookup']);
    expect(ran).toEqual(['lookup docs']);
    const rows = await run.toolExecutions();
    expect(rows[0]).toMatchObject({
      status: 'failed',
      error: { message: 'blocked by policy: first answer' },
    });
    expect(toolResults(await run.transcript())).toHaveLength(2);
    const events = await retried.store.listEvents(run.turnId);
    expect(events.filter((event) => event.type === 'tool_policy_blocked')).toHaveLength(1);
  });

  it('tool policy: a replay-safe call retried after it threw is not asked again: it runs under the decision its row records', async () => {
    let answers = 0;
    decide = () => (answers++ === 0 ? 'allow' : { block: 'asked twice' });
    const run = await kit.client.run('fetcher', 'Fetch it');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(fetches).toBe(2);
    expect(asked).toHaveLength(1);
    expect(ran).toEqual(['fetch https://example.com']);
    const [row] = await run.toolExecutions();
    expect(row).toMatchObject({ status: 'completed', result: { fetched: 'https://example.com' } });
    expect(toolResults(await run.transcript())).toHaveLength(1);
  });

  it('tool policy: a policy that throws or returns something else blocks the call; the model reads only that the policy could not decide, the event carries why', async () => {
    const cases: [ToolPolicy, RegExp][] = [
      [
        () => {
          throw new Error('policy service down (secret-host:8443)');
        },
        /it threw: policy service down \(secret-host:8443\)/,
      ],
      [() => 'yes' as never, /it returned "yes", not 'allow' or \{ block: reason \}/],
      [() => ({ block: 42 }) as never, /it returned \{"block":42\}/],
      [() => undefined as never, /it returned undefined/],
    ];
    for (const [broken, why] of cases) {
      decide = (call) => (call.name === 'deploy' ? broken(call, {} as ToolPolicyContext) : 'allow');
      const run = await kit.client.run('guarded', 'Ship it');
      const turn = await run.result();
      expect(turn.status).toBe('completed');
      const [blocked] = await run.toolExecutions();
      expect(blocked).toMatchObject({
        status: 'failed',
        error: { message: 'blocked by policy: the tool policy could not decide' },
      });
      expect(JSON.stringify(await run.transcript())).not.toContain('secret-host');
      const event = (await kit.store.listEvents(run.turnId)).find((e) => e.type === 'tool_policy_blocked');
      expect(event?.payload['policy_error']).toMatch(why);
      expect(warnings.pop()).toMatch(why);
    }
    expect(ran.filter((entry) => entry.startsWith('deploy'))).toEqual([]);
  });

  it('tool policy: a blocked call that needs approval is never held for a person; an allowed one is', async () => {
    decide = () => ({ block: 'wires are off' });
    const blocked = await (await kit.client.run('approver', 'Pay')).result();
    expect(blocked.status).toBe('completed');
    expect(blocked.outputText).toContain('blocked by policy: wires are off');
    expect(ran).toEqual([]);

    decide = () => 'allow';
    const run = await kit.client.run('approver', 'Pay');
    expect((await kit.driven(run.turnId)).status).toBe('waiting');
    const [row] = await run.toolExecutions();
    expect(row!.status).toBe('awaiting_approval');
  });

  it('tool policy: a toolPolicy that is not a function is an ArgumentError at defineAgent', () => {
    expect(() => defineAgent({ name: 'bad', toolPolicy: 'allow' as unknown as ToolPolicy })).toThrow(
      new ArgumentError('agent bad: toolPolicy must be a function (call, context) => decision'),
    );
  });
});

describePostgres('tool policy on PostgreSQL', () => {
  let pgKit: DriverKit;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const pg = await openPgTestStore();
    drop = pg.drop;
    pgKit = await startDriverKit({
      store: pg.store,
      model,
      runtime: { logger },
      agents: [defineAgent({ name: 'guarded', tools: [deploy, lookup], toolPolicy: policy })],
      faults: { repeat: ['tool'] },
    });
  });
  afterAll(async () => {
    await pgKit?.stop();
    await drop?.();
  });

  it('tool policy: on PostgreSQL, a blocked call retried after its commit has one row, one result and one tool_policy_blocked event, written in one transaction', async () => {
    decide = (call) => (call.name === 'deploy' ? { block: 'frozen' } : 'allow');
    const run = await pgKit.client.run('guarded', 'Ship it');
    expect((await run.result()).status).toBe('completed');
    expect(asked).toHaveLength(2);
    const rows = await run.toolExecutions();
    expect(rows.map((row) => row.status)).toEqual(['failed', 'completed']);
    expect(toolResults(await run.transcript())).toHaveLength(2);
    const events = await pgKit.store.listEvents(run.turnId);
    expect(events.filter((event) => event.type === 'tool_policy_blocked')).toHaveLength(1);
    expect(events.filter((event) => event.type === 'tool_call.failed')).toHaveLength(1);
  });
});
