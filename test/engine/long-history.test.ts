import { afterAll, describe, expect, it } from 'vitest';
import { historyForTurn, SHORT_HISTORY } from '../../src/engine/model/model-request.js';
import { activeHistory } from '../../src/engine/model/summaries.js';
import { openStore } from '../../src/store/index.js';
import type { MessageRecord, Store, TurnRecord } from '../../src/store/types.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';
import { countingMessageReads } from '../../bench/results.js';

const stores: Store[] = [];
afterAll(async () => {
  for (const store of stores) await store.close();
});

async function backends(): Promise<[string, Store][]> {
  const memory = await openStore('memory:');
  const sqlite = await openStore(tempSqliteUrl('history'));
  stores.push(memory, sqlite);
  return [
    ['memory', memory],
    ['sqlite', sqlite],
  ];
}

/** A conversation of `count` messages, then summaries written at the sequences given. */
async function conversationWith(
  store: Store,
  count: number,
  summaries: { at: number; from: number; through: number }[],
  own = 0,
): Promise<{ turn: TurnRecord; all: () => Promise<MessageRecord[]> }> {
  const conversation = await store.createConversation({ agentName: 'agent' });
  const turn = await store.createTurn({
    conversationId: conversation.id,
    agentName: 'agent',
    contextMessageSequence: count,
  });
  const byAt = new Map(summaries.map((s) => [s.at, s]));
  for (let sequence = 1; sequence <= count + own; sequence++) {
    const summary = byAt.get(sequence);
    await store.appendMessage({
      conversationId: conversation.id,
      role: sequence % 2 ? 'user' : 'assistant',
      ...(sequence > count ? { turnId: turn.id } : {}),
      ...(summary
        ? {
            kind: 'context_summary' as const,
            content: `summary of ${summary.from}-${summary.through}`,
            metadata: {
              compaction: {
                replaces_from_sequence: summary.from,
                replaces_through_sequence: summary.through,
              },
            },
          }
        : { content: `message ${sequence}` }),
    });
  }
  // Written after the turn's snapshot by another turn: never part of this turn's history.
  await store.appendMessage({ conversationId: conversation.id, role: 'user', content: 'later' });
  return {
    turn,
    all: async () =>
      activeHistory(await store.listMessages(conversation.id, { throughSequence: count, turnId: turn.id })),
  };
}

const shapes: Record<
  string,
  { count: number; summaries: { at: number; from: number; through: number }[]; own?: number }
> = {
  'no summary': { count: 50, summaries: [], own: 2 },
  'one summary, then newer messages and the turn’s own': {
    count: 80,
    summaries: [{ at: 45, from: 1, through: 40 }],
    own: 3,
  },
  'a summary folded into a newer one': {
    count: 80,
    summaries: [
      { at: 45, from: 1, through: 40 },
      { at: 70, from: 1, through: 65 },
    ],
  },
  'head messages, and two summaries with a gap between them': {
    count: 70,
    summaries: [
      { at: 42, from: 5, through: 38 },
      { at: 60, from: 44, through: 56 },
    ],
  },
  'a summary written by the turn itself': {
    count: 60,
    summaries: [{ at: 61, from: 1, through: 57 }],
    own: 2,
  },
  'a short conversation, read whole': { count: 20, summaries: [{ at: 15, from: 1, through: 12 }], own: 2 },
};

describe('a turn reads only what its request needs', () => {
  for (const [name, shape] of Object.entries(shapes)) {
    it(`the same history as reading everything: ${name}`, async () => {
      expect(shape.count > SHORT_HISTORY).toBe(!name.includes('short'));
      for (const [backend, store] of await backends()) {
        const { turn, all } = await conversationWith(store, shape.count, shape.summaries, shape.own);
        expect(await historyForTurn(store, turn), backend).toEqual(await all());
      }
    });
  }

  it('after a summary of 990 messages it reads the summary and the messages after it, not the conversation', async () => {
    for (const [backend, store] of await backends()) {
      const { turn } = await conversationWith(store, 1000, [{ at: 995, from: 1, through: 990 }]);
      const reader = countingMessageReads(store);
      const history = await historyForTurn(reader.store, turn);
      expect(history.map((m) => m.sequence)[0], backend).toBe(995);
      expect(history, backend).toHaveLength(10);
      // The summary twice at most (by kind, and within the range after it), plus 9 messages.
      expect(reader.rows(), backend).toBeLessThanOrEqual(11);
    }
  });

  it('scale: a long turn in a short conversation reads its summary and the messages after it, not all its own messages', async () => {
    for (const [backend, store] of await backends()) {
      // One message of input, then 400 of the turn's own, the first 390 summarized by the turn.
      const { turn, all } = await conversationWith(store, 1, [{ at: 396, from: 2, through: 391 }], 400);
      const running = await store.updateTurn(turn.id, {
        options: { ...turn.options, state: { iterations: 200 } },
      });
      const reader = countingMessageReads(store);
      const history = await historyForTurn(reader.store, running);
      expect(history, backend).toEqual(await all());
      expect(history, backend).toHaveLength(11);
      // The input, the summary twice at most, the ten after the summarized range: never the
      // 400 own messages.
      expect(reader.rows(), backend).toBeLessThanOrEqual(13);
    }
  });
});
