/**
 * Layer: engine driver (test/helpers/engine-driver.ts), memory store, no Temporal server.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { ConversationHandle } from '../../src/client/turnkit-client.js';
import { configure, resetConfiguration } from '../../src/config.js';
import { estimateTokens } from '../../src/engine/model/compaction.js';
import { SUMMARY_QUESTION } from '../../src/engine/model/summaries.js';
import { CompactionError, ConfigError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { MessageRecord } from '../../src/store/types.js';
import type { DriverKit } from '../helpers/driver-kit.js';
import { startDriverKit } from '../helpers/driver-kit.js';

const isSummary = (request: ModelRequest) => request.metadata.purpose === 'compaction';
let summaryText = 'SUMMARY: the user asked things and got answers.';

const model = new ScriptedModel({
  '*': (request, { call }) =>
    isSummary(request)
      ? { text: summaryText, usage: { inputTokens: 100, outputTokens: 20 } }
      : { text: `answer ${call}: ${'a'.repeat(150)}`, usage: { inputTokens: 10, outputTokens: 5 } },
});

const small = { contextLimit: 600, reservedTokens: 0, tailMessages: 2, tailTokens: 200 };
const agents = [
  defineAgent({ name: 'manual', compaction: { tailMessages: 2 } }),
  defineAgent({ name: 'auto', compaction: small }),
  defineAgent({
    name: 'summary_model',
    model: 'main-model',
    compaction: { ...small, model: 'summary-model' },
  }),
  defineAgent({ name: 'defaults_model', model: 'main-model', compaction: small }),
  defineAgent({ name: 'off', compaction: false }),
  defineAgent({ name: 'capped', compaction: small, model: 'priced', limits: { maxSpend: 0.5 } }),
  defineAgent({
    name: 'long',
    compaction: { contextLimit: 3000, reservedTokens: 0, tailMessages: 6, tailTokens: 1000 },
  }),
];

let kit: DriverKit;
let client: TurnKitClient;
beforeAll(async () => {
  kit = await startDriverKit({
    agents,
    model,
    runtime: {
      cost: { costRates: { priced: { input: 10_000, output: 0 } } },
      logger: { warn: () => undefined, error: console.error },
    },
  });
  client = new TurnKitClient({
    store: kit.store,
    agents: kit.agents,
    temporal: kit.client.temporal,
    taskQueue: kit.taskQueue,
    model,
  });
});
afterAll(async () => kit?.stop());
afterEach(() => {
  resetConfiguration();
  summaryText = 'SUMMARY: the user asked things and got answers.';
});

const requests = (agent: string) => model.callsFor(agent).map((c) => c.request);
const mainRequests = (agent: string) => requests(agent).filter((r) => !isSummary(r));
const summaryRequests = (agent: string) => requests(agent).filter(isSummary);
const summaries = (messages: MessageRecord[]) => messages.filter((m) => m.kind === 'context_summary');

async function talk(conversation: ConversationHandle, count: number, prefix = 'question') {
  for (let i = 0; i < count; i += 1) {
    const turn = await (await conversation.ask(`${prefix} ${i}: ${'q'.repeat(150)}`)).result();
    expect(turn.status).toBe('completed');
  }
}

describe('compaction (CORE-25)', () => {
  it('CORE-25 manual compaction appends a summary, keeps every original, and the projection puts it where its range starts', async () => {
    const conversation = await client.conversation('manual');
    await talk(conversation, 3);
    const before = await conversation.messages();
    const summary = await conversation.compact({ focus: 'the questions' });
    const after = await conversation.messages();
    expect(after).toHaveLength(before.length + 1);
    expect(after.slice(0, before.length)).toEqual(before); // nothing deleted or changed
    expect(summary.kind).toBe('context_summary');
    expect(summary.role).toBe('assistant');
    expect(summary.metadata['compaction']).toMatchObject({
      auto: false,
      focus: 'the questions',
      replaces_from_sequence: before[0]!.sequence,
      replaces_through_sequence: before[3]!.sequence,
      tail_start_sequence: before[4]!.sequence,
      summary_model: 'scripted',
      input_tokens: expect.any(Number),
      summary_tokens: 20,
      created_for_turn_id: null,
    });
    const request = summaryRequests('manual').at(-1)!;
    expect(request.tools).toEqual([]);
    expect(request.instructions).toContain('## Goal');
    expect(request.messages[0]!.content).toContain('Focus the summary on: the questions');
    expect(request.messages[0]!.content).toContain('question 0');
    expect(request.messages[0]!.content).not.toContain('question 2');

    // The next turn sees the summary (as a question and a reference-only answer), then the tail.
    await talk(conversation, 1, 'next');
    const seen = mainRequests('manual').at(-1)!.messages;
    expect(seen[0]).toEqual({ role: 'user', content: SUMMARY_QUESTION });
    expect(seen[1]!.content).toContain('For reference only');
    expect(seen[1]!.content).toContain('SUMMARY:');
    expect(seen.map((m) => m.content).join('\n')).not.toContain('question 0');
    expect(seen.map((m) => m.content).join('\n')).toContain('question 2');
  });

  it('CORE-25 a newer summary replaces the older one in the projection; the older stays stored', async () => {
    const conversation = await client.conversation('manual');
    await talk(conversation, 3);
    const first = await conversation.compact();
    await talk(conversation, 2, 'later');
    summaryText = 'SUMMARY TWO';
    const second = await conversation.compact();
    expect(second.metadata['compaction']).toMatchObject({
      replaces_from_sequence: (first.metadata['compaction'] as { replaces_from_sequence: number })
        .replaces_from_sequence,
    });
    expect(summaryRequests('manual').at(-1)!.messages[0]!.content).toContain('<previous_summary>\nSUMMARY:');
    await talk(conversation, 1, 'final');
    const seen = mainRequests('manual')
      .at(-1)!
      .messages.map((m) => m.content)
      .join('\n');
    expect(seen).toContain('SUMMARY TWO');
    expect(seen).not.toContain('SUMMARY: the user');
    expect(summaries(await conversation.messages()).map((m) => m.id)).toEqual([first.id, second.id]);
  });

  it('CORE-25 manual compaction raises CompactionError: nothing to summarize, an empty summary, a failing model, disabled', async () => {
    const fresh = await client.conversation('manual');
    await fresh.say('only one message');
    await expect(fresh.compact()).rejects.toBeInstanceOf(CompactionError);
    const conversation = await client.conversation('manual');
    await talk(conversation, 2);
    summaryText = '';
    await expect(conversation.compact()).rejects.toThrow(/empty summary/);
    const failing = new ScriptedModel({ '*': [{ error: { status: 400, message: 'nope' } }] });
    await expect(conversation.compact({ client: failing })).rejects.toBeInstanceOf(CompactionError);
    const off = await client.conversation('off');
    await expect(off.compact()).rejects.toThrow(/disabled/);
    expect(summaries(await conversation.messages())).toEqual([]);
  });

  it('CORE-25 automatic compaction runs in its own activity before the main call; its usage is charged to the turn', async () => {
    const conversation = await client.conversation('auto');
    await talk(conversation, 6);
    const turns = await kit.store.listTurns({ conversationId: conversation.id });
    const compacted = [];
    for (const turn of turns) {
      const events = (await kit.store.listEvents(turn.id)).map((e) => e.type);
      if (events.includes('compaction.completed')) {
        compacted.push(turn);
        expect(events.indexOf('compaction.completed')).toBeLessThan(events.indexOf('model.requested'));
        expect(turn.usage).toMatchObject({ input_tokens: 110, output_tokens: 25 });
      }
    }
    expect(compacted.length).toBeGreaterThan(0);
    const order = requests('auto').map((r) => (isSummary(r) ? 'summary' : 'main'));
    expect(order.indexOf('summary')).toBeGreaterThan(0);
    expect(order[order.indexOf('summary') + 1]).toBe('main');
    const stored = summaries(await conversation.messages());
    expect(stored[0]!.metadata['compaction']).toMatchObject({
      auto: true,
      created_for_turn_id: compacted[0]!.id,
    });
    expect(stored[0]!.turnId).toBe(compacted[0]!.id);
  });

  it('CORE-25 the summary model defaults to the turn model and can be overridden', async () => {
    await talk(await client.conversation('defaults_model'), 6);
    expect(summaryRequests('defaults_model').at(-1)!.model).toBe('main-model');
    await talk(await client.conversation('summary_model'), 6);
    expect(summaryRequests('summary_model').at(-1)!.model).toBe('summary-model');
    expect(mainRequests('summary_model').at(-1)!.model).toBe('main-model');
  });

  it('CORE-25 disabled globally or per turn (compact: false); compact: true forces it below the threshold', async () => {
    configure({ compaction: false });
    const globallyOff = defineAgent({ name: 'globally_off', compaction: small });
    kit.agents.register(globallyOff); // the worker's and the client's registry
    expect(globallyOff.compaction).toBeNull();
    resetConfiguration();
    await talk(await client.conversation('globally_off'), 6);
    expect(summaryRequests('globally_off')).toEqual([]);

    const conversation = await client.conversation('auto');
    await conversation.say(`first ${'q'.repeat(1500)}`);
    await conversation.say(`second ${'q'.repeat(1500)}`);
    const skipped = await (await conversation.ask('third', { compact: false })).result();
    expect((await kit.store.listEvents(skipped.id)).map((e) => e.type)).not.toContain('compaction.started');

    const roomy = await client.conversation('manual'); // default context limit: far below the threshold
    await talk(roomy, 2);
    const forced = await (await roomy.ask('force it', { compact: true })).result();
    expect((await kit.store.listEvents(forced.id)).map((e) => e.type)).toContain('compaction.completed');
  });

  it('CORE-25 an unknown compaction key is a ConfigError', () => {
    expect(() => defineAgent({ name: 'bad', compaction: { tailMesages: 3 } as never })).toThrow(ConfigError);
    expect(() => configure({ compaction: { nope: true } as never })).toThrow(ConfigError);
    expect(() => defineAgent({ name: 'bad', compaction: { threshold: 'high' } as never })).toThrow(
      ConfigError,
    );
  });

  it('CORE-25 a failing automatic compaction is recorded and ignored; a BudgetError from it fails the turn', async () => {
    const conversation = await client.conversation('auto');
    await conversation.say(`first ${'q'.repeat(1500)}`);
    await conversation.say(`second ${'q'.repeat(1500)}`);
    summaryText = '';
    const turn = await (await conversation.ask('third')).result();
    expect(turn.status).toBe('completed');
    const failed = (await kit.store.listEvents(turn.id)).find((e) => e.type === 'compaction.failed');
    expect(failed?.payload['error']).toMatchObject({ class: 'TurnKit::CompactionError' });
    expect(summaries(await conversation.messages())).toEqual([]);

    summaryText = 'SUMMARY';
    const capped = await client.conversation('capped');
    await capped.say(`first ${'q'.repeat(1500)}`);
    await capped.say(`second ${'q'.repeat(1500)}`);
    const denied = await (await capped.ask('third')).result();
    expect(denied.status).toBe('failed');
    expect(denied.error).toMatchObject({ class: 'TurnKit::BudgetError', message: 'cost limit reached' });
    expect(mainRequests('capped')).toEqual([]); // the main call never ran
    expect(denied.cost).toBeGreaterThan(0.5); // the compaction's cost was recorded
  });

  it('CORE-25 a 200-turn conversation: every model request stays under the context limit, summaries are stored, nothing is deleted', async () => {
    const conversation = await client.conversation('long');
    await talk(conversation, 200);
    const contextLimit = 3000;
    for (const request of mainRequests('long')) {
      const system = Math.ceil((request.instructions.length + request.dynamicInstructions.length) / 4);
      expect(estimateTokens(request.messages) + system).toBeLessThan(contextLimit);
    }
    const messages = await conversation.messages();
    const stored = summaries(messages);
    expect(stored.length).toBeGreaterThan(1);
    expect(messages.filter((m) => m.kind !== 'context_summary')).toHaveLength(400); // every ask and answer
    expect(mainRequests('long').at(-1)!.messages[0]).toEqual({ role: 'user', content: SUMMARY_QUESTION });
    // Without compaction the history would be far over the limit.
    expect(messages.reduce((n, m) => n + JSON.stringify(m.content).length, 0) / 4).toBeGreaterThan(
      3 * contextLimit,
    );
  }, 600_000);
});
