/**
 * Evaluations (issue 43, audit #11 and #17) on the real dev server and a real SQLite store:
 * a replayed call of an approval-gated tool skips the approval and the tool policy, and the
 * report says so; each case has a timeout; `budget.total` is reserved before each case starts.
 */
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { recordedCases } from '../../src/eval/eval-case.js';
import { evaluate } from '../../src/eval/evaluate.js';
import type { Store } from '../../src/store/types.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelClient, ModelRequest } from '../../src/models/types.js';
import { requireTemporal } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';
import { agents as supportAgents, model as supportModel, support, terse } from '../fixtures/eval-agents.js';

const refunds = { count: 0, policyAsked: 0 };
const refund = defineTool({
  name: 'refund',
  description: 'Refunds an order; a person approves every refund.',
  input: z.object({ orderId: z.number() }),
  needsApproval: true,
  execute: ({ orderId }) => {
    refunds.count++;
    return { orderId, refunded: true };
  },
});
const gated = defineAgent({
  name: 'eval_gated',
  instructions: 'Refund the order the user names.',
  tools: [refund],
  toolPolicy: () => {
    refunds.policyAsked++;
    return 'allow';
  },
});

function answer(request: ModelRequest) {
  const last = request.messages.at(-1);
  const orderId = Number(/order (\d+)/.exec(request.messages[0]?.content ?? '')?.[1] ?? 0);
  if (last?.role === 'tool')
    return { text: `Refunded order ${orderId}.`, usage: { inputTokens: 10, outputTokens: 5 } };
  return {
    toolCalls: [{ name: 'refund', arguments: { orderId } }],
    usage: { inputTokens: 10, outputTokens: 5 },
  };
}

const gatedModel = new ScriptedModel({ '*': answer });
/** The gated agent's answers, else the support agents' (test/fixtures/eval-agents.ts). */
const model: ModelClient = {
  chat: (request, options) =>
    (request.metadata.agentName === gated.name ? gatedModel : supportModel).chat(request, options),
};

describe.skipIf(!(await requireTemporal()))('evaluations (audit)', () => {
  let kit: TestKit;

  beforeAll(async () => {
    kit = await startKit({ agents: [gated, ...supportAgents], model });
    // The recorded run: its refund approved by a person.
    const recorded = await kit.client.run(gated, 'Refund order 12.');
    await waitUntil(async () => (await recorded.pendingApprovals()).length === 1, 30_000);
    const [pending] = await recorded.pendingApprovals();
    await recorded.approve(pending!.toolCallId, { principal: 'alice' });
    expect((await recorded.result()).status).toBe('completed');
  }, 60_000);
  afterAll(async () => kit?.stop());

  it('audit: #11 a replayed call of an approval-gated tool is not held for approval nor put to the tool policy, and the report says so', async () => {
    const before = { ...refunds };

    const report = await evaluate({ client: kit.client, agent: gated, cases: { recorded: {} } });
    expect(report.cases).toHaveLength(1);
    const [result] = report.cases;
    expect(result!.run?.status).toBe('completed');
    expect(result!.pass).toBe(true);
    expect(report.passed).toBe(true);
    // No tool code ran, nobody was asked, and the report says what replay left out.
    expect(refunds).toEqual(before);
    expect(result!.replayed).toEqual([
      'refund: replayed without asking for approval',
      'the tool policy was not asked for the replayed calls',
    ]);
  }, 90_000);

  it('audit: #11 a case still waiting when its timeout passes ends as a regression instead of holding the evaluation', async () => {
    // The same case with the real tools: the refund waits for a person nobody is.
    const report = await evaluate({
      client: kit.client,
      agent: gated,
      cases: { recorded: {} },
      tools: 'real',
      caseTimeout: 3,
    });
    const [result] = report.cases;
    expect(result!.run?.status).toBe('failed');
    expect(result!.run?.error).toContain('timed out');
    expect(report.regressions).toHaveLength(1);
    expect(report.regressions[0]!.reason).toContain('timed out');
    expect(report.passed).toBe(false);
  }, 90_000);

  it('audit: #17 budget.total is reserved before each case starts: the cases running at once never spend past it', async () => {
    // Each case costs $0.002 (two answers at $0.001); eight cases would cost $0.016.
    const cases = Array.from({ length: 8 }, (_, i) => ({
      id: `order-${i}`,
      input: `Where is order ${i + 1}?`,
    }));
    const report = await evaluate({
      client: kit.client,
      agent: support,
      cases,
      tools: 'real',
      concurrency: 8,
      budget: { perCase: 0.003, total: 0.01 },
    });
    expect(report.cost).toBeLessThanOrEqual(0.01 + 1e-9);
    const ran = report.cases.filter((result) => result.run);
    const skipped = report.cases.filter((result) => result.skipped === 'budget');
    expect(ran.length + skipped.length).toBe(8);
    expect(skipped.length).toBeGreaterThan(0);
    // Three caps of $0.003 fit in $0.01: never more than three ran at once.
    expect(report.maxParallel).toBeLessThanOrEqual(3);
  }, 120_000);

  it('audit: #17 recorded cases are selected by the store a page at a time (terse agent: no evaluation ran it): a limit of 2 reads 2 turns, and tags page on past the others', async () => {
    const plain: string[] = [];
    for (let i = 0; i < 4; i++)
      plain.push((await (await kit.client.run(terse, `Where is order ${20 + i}?`)).result()).id);
    const vip: string[] = [];
    for (let i = 0; i < 2; i++) {
      const run = await kit.client.run(terse, `Where is order ${30 + i}?`, { metadata: { tags: ['vip'] } });
      vip.push((await run.result()).id);
    }
    const { store, turnsRead } = countingTurnReads(kit.store);
    const first = await recordedCases(store, { agent: terse.name, limit: 2 });
    expect(first).toHaveLength(2);
    expect(turnsRead()).toBe(2);
    // The tagged ones come last: the selection pages past the untagged turns to reach them.
    const tagged = await recordedCases(store, { agent: terse.name, tags: ['vip'], limit: 2 });
    expect(tagged.map((item) => item.recordedTurnId)).toEqual(vip);
    const since = await recordedCases(store, {
      agent: terse.name,
      since: (await kit.store.loadTurn(plain[2]!)).createdAt,
      limit: 3,
    });
    expect(since.map((item) => item.recordedTurnId)).toEqual([plain[2], plain[3], vip[0]]);
  }, 120_000);
});

/** The store, counting the turn rows its `listTurns` returns. */
function countingTurnReads(store: Store): { store: Store; turnsRead: () => number } {
  let rows = 0;
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (property !== 'listTurns')
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      return async (...args: Parameters<Store['listTurns']>) => {
        const found = await target.listTurns(...args);
        rows += found.length;
        return found;
      };
    },
  });
  return { store: counted, turnsRead: () => rows };
}
