/**
 * Round-4 audit #15 (issue 44): the inbox's polling reads are bounded by what they return,
 * not by the conversation. `messagesAfter` reads its page, `inputStatus` and a receipt read
 * the rows they answer from. Counted at the store (rows each list returned), on a real SQLite
 * file, the memory store and PostgreSQL; no Temporal is involved in these reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { inputStatus, messagesAfter } from '../../src/client/post.js';
import type { PostRequest } from '../../src/contract/post-request.js';
import { appendPostMessage, recordPost } from '../../src/engine/lane/post-record.js';
import { Runtime } from '../../src/engine/runtime.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { openPgTestStore } from '../helpers/postgres.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const agents = new AgentRegistry([defineAgent({ name: 'inbox' })]);
/** Rows each list of the store returned since the last reset. */
type Counts = { listMessages: number; listTurns: number };

/** The store, counting the rows its lists return. */
function counting(store: Store): { store: Store; counts: Counts } {
  const counts: Counts = { listMessages: 0, listTurns: 0 };
  const proxy = new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      if (property !== 'listMessages' && property !== 'listTurns') return bound;
      return async (...args: unknown[]) => {
        const rows = (await bound(...args)) as unknown[];
        counts[property] += rows.length;
        return rows;
      };
    },
  });
  return { store: proxy, counts };
}

const request = (requestId: string, text: string): PostRequest => ({
  requestId,
  text,
  principal: null,
  policy: null,
  media: [],
  signature: null,
});
const now = () => new Date().toISOString();

/** A conversation of `turns` finished turns, each answering its own user message. */
async function longConversation(store: Store, turns: number) {
  const conversation = await store.createConversation({ agentName: 'inbox' });
  for (let i = 0; i < turns; i++) {
    const message = await store.appendMessage({
      conversationId: conversation.id,
      role: 'user',
      content: `question ${i}`,
    });
    const turn = await store.createTurn({
      conversationId: conversation.id,
      agentName: 'inbox',
      contextMessageSequence: message.sequence,
      submittedAt: now(),
    });
    await store.updateTurn(turn.id, { status: 'completed', completedAt: now() });
    await store.appendMessage({
      conversationId: conversation.id,
      turnId: turn.id,
      role: 'assistant',
      content: `answer ${i}`,
    });
  }
  return conversation;
}

const backends: [string, () => Promise<{ store: Store; close(): Promise<void> }>][] = [
  [
    'SQLite',
    async () => {
      const store = await openStore(tempSqliteUrl('inbox-scale'));
      return { store, close: () => store.close() };
    },
  ],
  [
    'the memory store',
    async () => {
      const store = await openStore('memory:');
      return { store, close: () => store.close() };
    },
  ],
  [
    'PostgreSQL',
    async () => {
      const pg = await openPgTestStore();
      return { store: pg.store, close: pg.drop };
    },
  ],
];

describe.each(backends)('scale: the inbox’s polling reads on %s', (_name, open) => {
  const TURNS = 150;
  let store: Store;
  let close: () => Promise<void>;
  let conversationId: string;
  beforeAll(async () => {
    ({ store, close } = await open());
    conversationId = (await longConversation(store, TURNS)).id;
  }, 120_000);
  afterAll(async () => close?.());

  it('scale: #15 messagesAfter reads only the page it returns; paging from 0 meets every message once', async () => {
    const { store: read, counts } = counting(store);
    const runtime = new Runtime({ store: read, agents });
    const page = await messagesAfter(runtime, conversationId, 0, { limit: 10 });
    expect(page.messages.map((m) => m.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(counts.listMessages).toBe(10);
    const seen: number[] = [];
    for (let cursor = 0; ;) {
      const next = await messagesAfter(runtime, conversationId, cursor, { limit: 64 });
      if (next.messages.length === 0) break;
      seen.push(...next.messages.map((m) => m.sequence));
      cursor = next.cursor;
    }
    expect(seen).toEqual(Array.from({ length: 2 * TURNS }, (_, i) => i + 1));
    // Every poll read what it returned, plus the empty last one.
    expect(counts.listMessages).toBe(10 + 2 * TURNS);
  });

  it('scale: #15 inputStatus of a queued post reads one turn, whatever the conversation holds', async () => {
    const post = request('scale-queued', 'one more thing');
    const message = await appendPostMessage(store, conversationId, post);
    await recordPost(store, conversationId, { request: post, disposition: 'queued', message });
    const answering = await store.createTurn({
      conversationId,
      agentName: 'inbox',
      contextMessageSequence: message.sequence,
      submittedAt: now(),
    });
    const { store: read, counts } = counting(store);
    const status = await inputStatus(new Runtime({ store: read, agents }), conversationId, 'scale-queued');
    expect(status).toMatchObject({
      disposition: 'queued',
      messageId: message.id,
      turnId: answering.id,
      turnStatus: 'pending',
    });
    expect(counts).toEqual({ listMessages: 0, listTurns: 1 });
  });

  it('scale: #15 a steered post’s receipt reads the steered turn’s text, not the conversation after it', async () => {
    const conversation = await store.createConversation({ agentName: 'inbox' });
    const ask = await store.appendMessage({ conversationId: conversation.id, role: 'user', content: 'go' });
    const steered = await store.createTurn({
      conversationId: conversation.id,
      agentName: 'inbox',
      contextMessageSequence: ask.sequence,
      submittedAt: now(),
    });
    const post = request('scale-steer', 'change of plan');
    await recordPost(store, conversation.id, {
      request: post,
      disposition: 'steered',
      turnId: steered.id,
      steer: { id: 'post:scale-steer', afterSequence: ask.sequence },
    });
    // The turn works a long while (tool calls and results), then takes the steer.
    for (let i = 0; i < TURNS; i++)
      await store.appendMessage({
        conversationId: conversation.id,
        turnId: steered.id,
        role: 'tool',
        kind: 'tool_result',
        content: [{ type: 'tool_result', tool_call_id: `call_${i}`, text: `result ${i}`, error: false }],
      });
    const written = await store.appendMessage({
      conversationId: conversation.id,
      turnId: steered.id,
      role: 'user',
      content: 'change of plan',
      metadata: { steer_id: 'post:scale-steer' },
    });
    const { store: read, counts } = counting(store);
    const status = await inputStatus(new Runtime({ store: read, agents }), conversation.id, 'scale-steer');
    expect(status).toMatchObject({ disposition: 'steered', messageId: written.id, turnId: steered.id });
    expect(counts).toEqual({ listMessages: 1, listTurns: 0 });
  });
});
