import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../../src/store/sqlite-store.js';
import type { Store } from '../../../src/store/types.js';
import { openPgTestStore, PG_TEST_URL, requirePostgres } from '../../helpers/postgres.js';

const run = promisify(execFile);
const racer = fileURLToPath(new URL('./racer.ts', import.meta.url));
const ROUNDS = 4;
const pgAvailable = await requirePostgres();

type Outcome = { won: boolean; error?: string; token?: string };

/** Starts two racer processes, opens the barrier once both are up, returns their outcomes. */
async function race(
  url: string,
  schema: string,
  operation: string,
  argsA: string[],
  argsB: string[],
): Promise<Outcome[]> {
  const barrier = join(mkdtempSync(join(tmpdir(), 'turnkit-race-')), 'go');
  const start = (args: string[]) =>
    run(process.execPath, ['--import', 'tsx', racer, url, schema, operation, barrier, ...args], {
      timeout: 60_000,
    });
  const both = [start(argsA), start(argsB)];
  // Both processes load and open the store before polling; give them time, then release them together.
  await new Promise((r) => setTimeout(r, 1500));
  writeFileSync(barrier, '');
  return (await Promise.all(both)).map(
    ({ stdout }) => JSON.parse(stdout.trim().split('\n').at(-1)!) as Outcome,
  );
}

function describeRaces(
  backend: 'sqlite' | 'postgres',
  setup: () => Promise<{ store: Store; url: string; schema: string; close(): Promise<void> }>,
) {
  describe(`cross-process races (${backend})`, () => {
    let ctx: Awaited<ReturnType<typeof setup>>;
    beforeAll(async () => {
      ctx = await setup();
    });
    afterAll(async () => ctx?.close());

    const submitted = async (conversationId: string) =>
      ctx.store.createTurn({ conversationId, agentName: 'a', submittedAt: new Date().toISOString() });

    it(`DB-01 ${backend}: two processes racing one claim — exactly one wins, the stored token is the winner's`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const c = await ctx.store.createConversation({ agentName: 'a' });
        const turn = await submitted(c.id);
        const outcomes = await race(
          ctx.url,
          ctx.schema,
          'claim',
          [turn.id, 'a'.repeat(32)],
          [turn.id, 'b'.repeat(32)],
        );
        const winners = outcomes.filter((o) => o.won);
        expect(winners, JSON.stringify(outcomes)).toHaveLength(1);
        expect((await ctx.store.loadTurn(turn.id)).claimToken).toBe(winners[0]!.token);
      }
    }, 120_000);

    it(`DB-02 ${backend}: two processes claiming two turns of one conversation — only one runs`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const c = await ctx.store.createConversation({ agentName: 'a' });
        const [a, b] = [await submitted(c.id), await submitted(c.id)];
        const outcomes = await race(
          ctx.url,
          ctx.schema,
          'lane',
          [c.id, a.id, 'a'.repeat(32)],
          [c.id, b.id, 'b'.repeat(32)],
        );
        expect(
          outcomes.filter((o) => o.won),
          JSON.stringify(outcomes),
        ).toHaveLength(1);
        expect(await ctx.store.listTurns({ conversationId: c.id, status: 'running' })).toHaveLength(1);
      }
    }, 120_000);

    it(`DB-03 ${backend}: two processes delivering one delivery — one destination message`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const c = await ctx.store.createConversation({ agentName: 'a' });
        const delivery = await ctx.store.createDelivery({
          destinationConversationId: c.id,
          key: `race-${c.id}`,
          payload: { text: 'hi' },
        });
        const outcomes = await race(ctx.url, ctx.schema, 'deliver', [delivery.id], [delivery.id]);
        expect(
          outcomes.filter((o) => o.won),
          JSON.stringify(outcomes),
        ).toHaveLength(1);
        expect(await ctx.store.listMessages(c.id)).toHaveLength(1);
      }
    }, 120_000);

    it(`BG-29 ${backend}: two processes adding opposite wait edges — one is rejected as a cycle`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const [x, y] = [
          await ctx.store.createConversation({ agentName: 'a' }),
          await ctx.store.createConversation({ agentName: 'a' }),
        ];
        const [a, b] = [await submitted(x.id), await submitted(y.id)];
        const outcomes = await race(ctx.url, ctx.schema, 'wait', [a.id, b.id], [b.id, a.id]);
        expect(
          outcomes.filter((o) => o.won),
          JSON.stringify(outcomes),
        ).toHaveLength(1);
        expect(outcomes.find((o) => !o.won)!.error).toMatch(/cycle/);
        const edges =
          (await ctx.store.listWaits({ turnId: a.id })).length +
          (await ctx.store.listWaits({ turnId: b.id })).length;
        expect(edges).toBe(1);
      }
    }, 120_000);
  });
}

describeRaces('sqlite', async () => {
  const url = join(mkdtempSync(join(tmpdir(), 'turnkit-race-db-')), 'race.sqlite');
  const store = SqliteStore.open(url);
  return { store, url, schema: '-', close: () => store.close() };
});

describe.skipIf(!pgAvailable)('postgres', () => {
  describeRaces('postgres', async () => {
    const { store, schema, drop } = await openPgTestStore();
    return { store, url: PG_TEST_URL, schema, close: drop };
  });
});
