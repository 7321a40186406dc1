/**
 * Races between real OS processes (spec §9.2): two racer processes (racer.ts, run with tsx),
 * each with its own connection to one SQLite file or one PostgreSQL schema, are handed the
 * same operation and a shared start time, and start within a millisecond of each other.
 * Each race is repeated for several rounds on fresh rows.
 */
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../../src/store/sqlite-store.js';
import type { Store } from '../../../src/store/types.js';
import { describePostgres, openPgTestStore, pgTestUrl } from '../../helpers/postgres.js';

const racerScript = fileURLToPath(new URL('./racer.ts', import.meta.url));
const ROUNDS = 5;
const TOKENS = ['a'.repeat(32), 'b'.repeat(32)] as const;

interface Outcome {
  id: number;
  won: boolean;
  error?: string;
  token?: string;
  messageId?: string | null;
  sequences?: number[];
}

/** A long-lived racer process, driven one JSON line at a time. */
class Racer {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #waiting = new Map<number, (outcome: Outcome) => void>();
  readonly ready: Promise<void>;
  #stderr = '';

  constructor(url: string, schema: string) {
    this.#child = spawn(process.execPath, ['--import', 'tsx', racerScript, url, schema], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.#child.stderr.on('data', (chunk) => (this.#stderr += chunk));
    let markReady!: () => void;
    let failed!: (error: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => ((markReady = resolve), (failed = reject)));
    this.#child.on('exit', (code) => failed(new Error(`racer exited with ${code}: ${this.#stderr}`)));
    createInterface({ input: this.#child.stdout }).on('line', (line) => {
      const message = JSON.parse(line) as Outcome & { ready?: boolean };
      if (message.ready) markReady();
      else this.#waiting.get(message.id)?.(message);
    });
  }

  run(id: number, op: string, args: string[], startAt: number): Promise<Outcome> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`racer timed out on ${op}: ${this.#stderr}`)), 30_000);
      this.#waiting.set(id, (outcome) => {
        clearTimeout(timer);
        resolve(outcome);
      });
      this.#child.stdin.write(`${JSON.stringify({ id, op, args, startAt })}\n`);
    });
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.#child.once('exit', resolve));
    this.#child.stdin.end();
    await exited;
  }
}

interface Setup {
  store: Store;
  url: string;
  schema: string;
  close(): Promise<void>;
}

function describeRaces(backend: 'sqlite' | 'postgres', setup: () => Promise<Setup>): void {
  describe(`cross-process races (${backend})`, () => {
    let ctx: Setup;
    let racers: [Racer, Racer];
    let next = 0;

    beforeAll(async () => {
      ctx = await setup();
      racers = [new Racer(ctx.url, ctx.schema), new Racer(ctx.url, ctx.schema)];
      await Promise.all(racers.map((r) => r.ready));
    }, 60_000);
    afterAll(async () => {
      await Promise.all((racers ?? []).map((r) => r.stop()));
      await ctx?.close();
    });

    /** Both racers run their operation, starting at the same instant. */
    const race = (op: string, argsA: string[], argsB: string[]): Promise<Outcome[]> => {
      const startAt = Date.now() + 150;
      const id = ++next;
      return Promise.all([racers[0].run(id, op, argsA, startAt), racers[1].run(id, op, argsB, startAt)]);
    };
    const submitted = (conversationId: string) =>
      ctx.store.createTurn({ conversationId, agentName: 'a', submittedAt: new Date().toISOString() });
    const conversation = () => ctx.store.createConversation({ agentName: 'a' });

    it(`DB-01 ${backend}: two processes racing one claim — exactly one wins, the stored token is the winner's`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const turn = await submitted((await conversation()).id);
        const outcomes = await race('claim', [turn.id, TOKENS[0]], [turn.id, TOKENS[1]]);
        const winners = outcomes.filter((o) => o.won);
        expect(winners, JSON.stringify(outcomes)).toHaveLength(1);
        expect(
          outcomes.every((o) => o.error === undefined),
          JSON.stringify(outcomes),
        ).toBe(true);
        const stored = await ctx.store.loadTurn(turn.id);
        expect(stored).toMatchObject({ status: 'running', claimToken: winners[0]!.token });
      }
    }, 120_000);

    it(`DB-02 ${backend}: two processes claiming two submitted turns of one conversation (lane check inside atomic) — only one runs`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const c = await conversation();
        const [a, b] = [await submitted(c.id), await submitted(c.id)];
        const outcomes = await race('lane', [c.id, a.id, TOKENS[0]], [c.id, b.id, TOKENS[1]]);
        expect(
          outcomes.filter((o) => o.won),
          JSON.stringify(outcomes),
        ).toHaveLength(1);
        expect(
          outcomes.every((o) => o.error === undefined),
          JSON.stringify(outcomes),
        ).toBe(true);
        const running = await ctx.store.listTurns({ conversationId: c.id, status: 'running' });
        expect(running).toHaveLength(1);
        expect(running[0]!.claimToken).toBe(outcomes.find((o) => o.won)!.token);
      }
    }, 120_000);

    it(`DB-03 ${backend}: two processes delivering one delivery — one destination message, one woken turn`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const [source, destination] = [await conversation(), await conversation()];
        const delivery = await ctx.store.createDelivery({
          sourceConversationId: source.id,
          destinationConversationId: destination.id,
          key: `race-${destination.id}`,
          payload: { text: 'hi' },
        });
        const outcomes = await race('deliver', [delivery.id], [delivery.id]);
        expect(
          outcomes.filter((o) => o.won),
          JSON.stringify(outcomes),
        ).toHaveLength(1);
        const messages = await ctx.store.listMessages(destination.id);
        expect(messages).toHaveLength(1);
        // The loser saw the winner's message, not a second one.
        expect(outcomes.map((o) => o.messageId)).toEqual([messages[0]!.id, messages[0]!.id]);
        expect((await ctx.store.loadDelivery(delivery.id)).messageId).toBe(messages[0]!.id);
        expect(await ctx.store.listTurns({ conversationId: destination.id })).toHaveLength(1);
      }
    }, 120_000);

    it(`BG-29 ${backend}: two processes adding opposite wait edges — one is rejected as a cycle, one edge stored`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const [x, y] = [await conversation(), await conversation()];
        const [a, b] = [await submitted(x.id), await submitted(y.id)];
        const outcomes = await race('wait', [a.id, b.id], [b.id, a.id]);
        expect(
          outcomes.filter((o) => o.won),
          JSON.stringify(outcomes),
        ).toHaveLength(1);
        expect(outcomes.find((o) => !o.won)!.error).toMatch(/ToolError: wait would create a cycle/);
        const edges = [
          ...(await ctx.store.listWaits({ turnId: a.id })),
          ...(await ctx.store.listWaits({ turnId: b.id })),
        ];
        expect(edges).toHaveLength(1);
      }
    }, 120_000);

    it(`${backend}: two processes appending to one conversation and one event log get distinct, gap-free sequences`, async () => {
      const c = await conversation();
      const turn = await submitted(c.id);
      const appended = await race('append', [c.id, '15'], [c.id, '15']);
      expect(
        appended.every((o) => o.won),
        JSON.stringify(appended),
      ).toBe(true);
      const all = appended.flatMap((o) => o.sequences!).sort((p, q) => p - q);
      expect(all).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
      expect((await ctx.store.listMessages(c.id)).map((m) => m.sequence)).toEqual(all);
      const events = await race('events', [turn.id, c.id, '15'], [turn.id, c.id, '15']);
      expect(
        events.every((o) => o.won),
        JSON.stringify(events),
      ).toBe(true);
      expect(events.flatMap((o) => o.sequences!).sort((p, q) => p - q)).toEqual(
        Array.from({ length: 30 }, (_, i) => i + 1),
      );
      expect((await ctx.store.listEvents(turn.id)).map((e) => e.sequence)).toEqual(
        Array.from({ length: 30 }, (_, i) => i + 1),
      );
    }, 120_000);
  });
}

describeRaces('sqlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'turnkit-race-'));
  const url = join(dir, 'race.sqlite');
  const store = await SqliteStore.open(url);
  return {
    store,
    url,
    schema: '-',
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describePostgres('postgres', () => {
  describeRaces('postgres', async () => {
    const { store, schema, drop } = await openPgTestStore();
    return { store, url: pgTestUrl(), schema, close: drop };
  });
});
