import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS, limitsToJson } from '../../src/agents/agent.js';
import { Budget } from '../../src/engine/step/budget.js';
import { BudgetError } from '../../src/errors.js';
import { openStore } from '../../src/store/index.js';
import { MemoryStore } from '../../src/store/memory-store.js';

describe('budget', () => {
  it('CORE-27 seeds iterations, cost and tool counts from the whole root tree', async () => {
    const store = new MemoryStore();
    const conversation = await store.createConversation({ agentName: 'a' });
    const limits = { ...DEFAULT_LIMITS, maxToolExecutions: 3, maxToolExecutionsByName: { search: 2 } };
    const root = await store.createTurn({
      conversationId: conversation.id,
      agentName: 'a',
      options: { budget_limits: limitsToJson(limits), state: { iterations: 2 } },
    });
    await store.updateTurn(root.id, { cost: 0.5 });
    const child = await store.createTurn({
      conversationId: conversation.id,
      agentName: 'a',
      parentTurnId: root.id,
      rootTurnId: root.id,
      options: { state: { iterations: 1 } },
    });
    await store.updateTurn(child.id, { cost: 0.25 });
    const make = async (
      turnId: string,
      toolCallId: string,
      status: 'completed' | 'cancelled' | 'failed' | 'interrupted',
      budgetDenied = false,
    ) => {
      const row = await store.createToolExecution({
        turnId,
        toolCallId,
        toolName: 'search',
        status: 'running',
      });
      await store.claimToolExecution(row.id, {
        from: 'running',
        to: status,
        ...(status === 'failed'
          ? { error: { message: 'x', details: budgetDenied ? { budget_denied: true } : {} } }
          : {}),
      });
    };
    await make(root.id, 'c1', 'completed');
    await make(root.id, 'c2', 'cancelled');
    await make(child.id, 'c3', 'failed', true);
    await make(child.id, 'c4', 'interrupted');

    const budget = await Budget.load(store, root.id, DEFAULT_LIMITS);
    expect(budget.iterations).toBe(3);
    expect(budget.cost).toBeCloseTo(0.75);
    // cancelled and budget-denied executions do not count; interrupted ones do.
    expect(budget.toolExecutions).toBe(2);
    expect(budget.toolExecutionsByName.get('search')).toBe(2);
    expect(budget.limits.maxToolExecutions).toBe(3);
    expect(() => budget.reserveToolExecution('search')).toThrow(
      new BudgetError('maximum executions reached for tool search'),
    );
    budget.reserveToolExecution('other');
    expect(() => budget.reserveToolExecution('other')).toThrow('maximum tool executions reached');
  });

  it('checks depth, timeout and spend with TurnKit messages', () => {
    const start = new Date('2026-01-01T00:00:00Z');
    const budget = new Budget({
      limits: { ...DEFAULT_LIMITS, maxSpend: 1, maxIterations: 1, timeout: 10 },
      rootStartedAt: start,
    });
    expect(() => budget.check(4, start)).toThrow('maximum sub-agent depth reached');
    expect(() => budget.check(0, new Date(start.getTime() + 10_000))).toThrow('turn timed out');
    budget.check(0, new Date(start.getTime() + 9_999));
    budget.addCost(1);
    budget.check(0, start);
    expect(() => budget.addCost(0.01)).toThrow('cost limit reached');
    budget.reserveIteration();
    expect(() => budget.reserveIteration()).toThrow('maximum iterations reached');
    budget.addCost(null);
  });
});

describe('budget on a SQLite file', () => {
  it('long-lived: Budget.load counts in the store, per name, leaving out cancelled, budget-denied and the excluded execution', async () => {
    const store = await openStore(join(mkdtempSync(join(tmpdir(), 'turnkit-budget-')), 'budget.sqlite'));
    try {
      const conversation = await store.createConversation({ agentName: 'a' });
      const root = await store.createTurn({ conversationId: conversation.id, agentName: 'a' });
      const child = await store.createTurn({
        conversationId: conversation.id,
        agentName: 'a',
        parentTurnId: root.id,
        rootTurnId: root.id,
      });
      const make = async (
        turnId: string,
        call: string,
        name: string,
        to: 'completed' | 'cancelled' | 'failed',
        denied = false,
      ) => {
        const row = await store.createToolExecution({
          turnId,
          toolCallId: call,
          toolName: name,
          status: 'running',
        });
        await store.claimToolExecution(row.id, {
          from: 'running',
          to,
          ...(to === 'failed'
            ? { error: { message: 'x', details: denied ? { budget_denied: true } : {} } }
            : {}),
        });
        return row.id;
      };
      const plain = await make(root.id, 'c1', 'search', 'completed');
      await make(root.id, 'c2', 'search', 'cancelled');
      await make(root.id, 'c3', 'search', 'failed', true);
      const failed = await make(child.id, 'c4', 'search', 'failed');
      await make(child.id, 'c5', 'fetch', 'completed');
      await make(child.id, 'c6', 'fetch', 'completed');

      const all = await Budget.load(store, root.id, DEFAULT_LIMITS);
      expect(all.toolExecutions).toBe(4);
      expect(Object.fromEntries(all.toolExecutionsByName)).toEqual({ search: 2, fetch: 2 });
      const withoutPlain = await Budget.load(store, root.id, DEFAULT_LIMITS, {
        excluding: await store.loadToolExecution(plain),
      });
      expect(Object.fromEntries(withoutPlain.toolExecutionsByName)).toEqual({ search: 1, fetch: 2 });
      expect(withoutPlain.toolExecutions).toBe(3);
      const withoutFailed = await Budget.load(store, root.id, DEFAULT_LIMITS, {
        excluding: await store.loadToolExecution(failed),
      });
      expect(Object.fromEntries(withoutFailed.toolExecutionsByName)).toEqual({ search: 1, fetch: 2 });
      // An execution that does not count (cancelled) changes nothing when excluded.
      const cancelled = (await store.listToolExecutions({ turnId: root.id })).find(
        (execution) => execution.status === 'cancelled',
      )!;
      const unchanged = await Budget.load(store, root.id, DEFAULT_LIMITS, { excluding: cancelled });
      expect(unchanged.toolExecutions).toBe(4);
    } finally {
      await store.close();
    }
  });
});
