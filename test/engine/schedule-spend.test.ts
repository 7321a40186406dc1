/**
 * Round-4 audit #20 (issue 43): a schedule's per-day spend cap is reserved by each firing with
 * its turn, so firings at the same moment cannot each be given the whole cap. The firing
 * activity (`prepareScheduledTurn`) runs five times at once, as five concurrent firings of an
 * `allow_all` schedule do, on a real SQLite file and on PostgreSQL, against the dev server's
 * visibility; nothing is scripted but the absence of a model (no turn runs here).
 */
import { describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import type { ScheduledTurnDigest } from '../../src/contract/schedule.js';
import { Runtime } from '../../src/engine/runtime.js';
import { prepareScheduledTurn } from '../../src/engine/schedule/firing.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import { connectClient } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const agents = new AgentRegistry([defineAgent({ name: 'reporter' })]);

function concurrentFirings(open: () => Promise<{ store: Store; close(): Promise<void> }>): void {
  it('audit: #20 five firings at once share the per-day cap: their caps add up to it at most, the rest are skipped; a finished run frees what it did not spend', async () => {
    const { store, close } = await open();
    try {
      const runtime = new Runtime({ store, agents });
      const temporal = await connectClient();
      const scheduleId = `spend-${process.pid}-${Date.now().toString(36)}`;
      const firing = (n: number) =>
        prepareScheduledTurn(runtime, temporal, {
          definition: {
            scheduleId,
            agent: 'reporter',
            task: 'Spend a little.',
            conversationId: null,
            principal: null,
            budget: { maxSpend: 0.3, maxSpendPerDay: 0.8 },
            mac: null,
          },
          firingId: `turnkit-schedule-${scheduleId}-${n}`,
          firstRunId: `run-${n}`,
          firedAt: Date.now(),
        });
      const results = await Promise.all([1, 2, 3, 4, 5].map(firing));
      const written = results.filter(
        (r): r is Extract<ScheduledTurnDigest, { skipped: false }> => !r.skipped,
      );
      const caps = await Promise.all(
        written.map(
          async (r) =>
            ((await store.loadTurn(r.turnId)).options['budget_limits'] as { max_spend: number }).max_spend,
        ),
      );
      // 0.3 + 0.3 + 0.2: the third gets what is left of the day, the others nothing.
      expect([...caps].sort()).toEqual([0.2, 0.3, 0.3]);
      expect(caps.reduce((a, b) => a + b, 0)).toBeCloseTo(0.8, 6);
      expect(results.filter((r) => r.skipped)).toHaveLength(2);
      for (const skipped of results.filter((r) => r.skipped))
        expect(skipped).toMatchObject({
          reason: expect.stringMatching(/spend per day reached on .*: 0\.8 of 0\.8 USD/),
        });

      // One run ends having spent 0.1 of its 0.3: the next firing may use the 0.2 it left.
      const first = written[caps.indexOf(0.3)]!;
      await store.updateTurn(first.turnId, {
        status: 'completed',
        cost: 0.1,
        completedAt: new Date().toISOString(),
      });
      const next = await firing(6);
      if (next.skipped) throw new Error(`skipped: ${next.reason}`);
      const cap = (await store.loadTurn(next.turnId)).options['budget_limits'] as { max_spend: number };
      expect(cap.max_spend).toBeCloseTo(0.2, 6);
    } finally {
      await close();
    }
  });
}

describe('audit: #20 the per-day spend cap on SQLite', () => {
  concurrentFirings(async () => {
    const store = await openStore(tempSqliteUrl());
    return { store, close: () => store.close() };
  });
});

describePostgres('audit: #20 the per-day spend cap on PostgreSQL', () => {
  concurrentFirings(async () => {
    const { store, drop } = await openPgTestStore();
    return { store, close: drop };
  });
});
