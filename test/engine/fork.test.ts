/**
 * Fork and regenerate (decision 47), on the real dev server with real SQLite and PostgreSQL
 * stores; only the model is scripted. A fork carries a copy of the history through one
 * message, a turn on it sees exactly that, and the original is never written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { ConversationHandle } from '../../src/client/turnkit-client.js';
import { AuthorizationError, ForkError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelClient, ModelRequest } from '../../src/models/types.js';
import { canonicalJson } from '../../src/store/records.js';
import { openStore } from '../../src/store/index.js';
import type { MessageRecord, Store } from '../../src/store/types.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit, tempSqliteUrl } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

/** The last user text the model was sent. */
const lastUser = (request: ModelRequest) =>
  [...request.messages].reverse().find((message) => message.role === 'user')?.content ?? '';
const afterLastUser = (request: ModelRequest) =>
  request.messages.slice(request.messages.map((m) => m.role).lastIndexOf('user') + 1);

/** Answers `echo: <text>`; a text asking for the tool first calls `lookup`. */
const echo = (name: string) => (request: ModelRequest) => {
  const text = String(lastUser(request));
  if (text.includes('use the tool') && !afterLastUser(request).some((m) => m.role === 'tool'))
    return { toolCalls: [{ name: 'lookup', arguments: { word: 'fork' } }] };
  if (text.includes('hold the tool') && !afterLastUser(request).some((m) => m.role === 'tool'))
    return { toolCalls: [{ name: 'hold', arguments: {} }] };
  return `${name}: ${text}`;
};
const alpha = new ScriptedModel({ '*': echo('alpha') });
const beta = new ScriptedModel({ '*': echo('beta') });
/** Two scripted models behind one client: `beta:*` models answer from `beta`. */
const models: ModelClient = {
  chat: (request, options) => (request.model.startsWith('beta:') ? beta : alpha).chat(request, options),
};

let release: () => void = () => undefined;
let held = false;
const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  input: z.object({ word: z.string() }),
  execute: ({ word }) => ({ word, meaning: 'a branch' }),
});
const hold = defineTool({
  name: 'hold',
  description: 'Waits until the test lets it go.',
  input: z.object({}),
  execute: async () => {
    held = true;
    await new Promise<void>((resolve) => (release = resolve));
    return { released: true };
  },
});
const agent = defineAgent({
  name: 'chat',
  model: 'alpha:one',
  instructions: 'Answer briefly.',
  tools: [lookup, hold],
  limits: { maxIterations: 6 },
});

const ann = { user: 'ann' };
const bob = { user: 'bob' };
/** Forks only by the source conversation's own principal; everything else is allowed. */
const policy = (request: { action: string; principal: unknown; conversation_principal?: unknown }) =>
  request.action !== 'fork' ||
  canonicalJson(request.principal ?? null) === canonicalJson(request.conversation_principal ?? null);

const shape = (messages: readonly MessageRecord[]) =>
  messages.map((m) => ({ sequence: m.sequence, role: m.role, kind: m.kind, content: m.content }));
const roles = (request: ModelRequest) => request.messages.map((m) => `${m.role}: ${String(m.content)}`);
/** The model calls a turn made (both models). */
const callsOf = (turnId: string) =>
  [...alpha.calls, ...beta.calls].filter((call) => call.request.metadata.turnId === turnId);

function describeFork(backend: string, open: () => Promise<{ store: Store; close: () => Promise<void> }>) {
  describe(`fork (${backend})`, () => {
    let kit: TestKit;
    let client: TurnKitClient;
    let close: () => Promise<void>;
    beforeAll(async () => {
      const opened = await open();
      close = opened.close;
      kit = await startKit({ store: opened.store, agents: [agent], model: models });
      // The application's client holds the policy (a fork is decided before anything is written).
      client = new TurnKitClient({
        store: kit.store,
        agents: kit.agents,
        temporal: kit.client.temporal,
        taskQueue: kit.taskQueue,
        authorization: policy,
      });
    });
    afterAll(async () => {
      release();
      await kit?.stop();
      await close?.();
    });

    async function chat(...texts: string[]): Promise<ConversationHandle> {
      const conversation = await client.conversation('chat', { principal: ann });
      for (const text of texts) await (await conversation.ask(text)).result();
      return conversation;
    }

    it('fork: a turn on a fork sees exactly the history through the message; the original is unchanged', async () => {
      const original = await chat('first', 'second', 'third');
      const before = await original.messages();
      const turnsBefore = await kit.store.listTurns({ conversationId: original.id });
      const at = before.find(
        (m) =>
          m.role === 'assistant' && m.content[0]?.type === 'text' && m.content[0].text === 'alpha: second',
      )!;
      expect(at).toBeDefined();

      const fork = await original.fork({ at: at.id, principal: ann });
      const carried = await fork.messages();
      expect(shape(carried)).toEqual(shape(before.filter((m) => m.sequence <= at.sequence)));
      expect(carried.every((m) => m.turnId === null && m.conversationId === fork.id)).toBe(true);
      expect(carried.map((m) => m.metadata['forked_from_message_id'])).toEqual(
        before.filter((m) => m.sequence <= at.sequence).map((m) => m.id),
      );
      expect(await fork.origin()).toEqual({ conversationId: original.id, messageId: at.id });
      expect((await original.forks()).map((c) => c.id)).toEqual([fork.id]);
      expect((await kit.store.listForks(original.id)).map((c) => c.forkedFromMessageId)).toEqual([at.id]);

      const run = await fork.ask('branch', { principal: ann });
      expect((await run.result()).outputText).toBe('alpha: branch');
      const [call] = callsOf(run.turnId);
      expect(roles(call!.request)).toEqual([
        'user: first',
        'assistant: alpha: first',
        'user: second',
        'assistant: alpha: second',
        'user: branch',
      ]);

      // The original: the same rows, no new turn, nothing forked into it.
      expect(await original.messages()).toEqual(before);
      expect(await kit.store.listTurns({ conversationId: original.id })).toEqual(turnsBefore);
      expect(await original.origin()).toBeNull();
    });

    it('fork: regenerate runs the input again with another scripted model on a fork just before it', async () => {
      const original = await chat('one', 'two');
      const turns = await kit.store.listTurns({ conversationId: original.id });
      const second = await client.handle(turns[1]!);
      const regenerated = await second.regenerate({
        model: 'beta:two',
        principal: ann,
        instructions: 'Answer in French.',
      });
      const done = await regenerated.result();
      expect(done.status).toBe('completed');
      expect(done.outputText).toBe('beta: two');
      expect(done.model).toBe('beta:two');
      expect(regenerated.conversationId).not.toBe(original.id);
      const [call] = callsOf(regenerated.turnId);
      expect(call!.request.model).toBe('beta:two');
      expect(call!.request.instructions).toContain('Answer in French.');
      expect(call!.request.instructions).not.toContain('Answer briefly.');
      expect(roles(call!.request)).toEqual(['user: one', 'assistant: alpha: one', 'user: two']);
      // The fork ends just before the input; the input is given again to the new turn.
      const fork = await client.loadConversation(regenerated.conversationId);
      const inputs = (await original.messages()).filter((m) => m.role === 'user');
      expect(await fork.origin()).toEqual({
        conversationId: original.id,
        messageId: (await original.messages()).find(
          (m) => m.content[0]?.type === 'text' && m.content[0].text === 'alpha: one',
        )!.id,
      });
      const input = (await fork.messages()).find(
        (m) => m.metadata['regenerated_from_turn_id'] === second.turnId,
      )!;
      expect(input.content).toEqual(inputs[1]!.content);
      expect(input.metadata['forked_from_message_id']).toBe(inputs[1]!.id);
      // The original run is untouched.
      expect((await second.turn()).outputText).toBe('alpha: two');
    });

    it("fork: regenerating a conversation's first turn starts from an empty history", async () => {
      const run = await client.run('chat', 'tell me', { principal: ann });
      await run.result();
      const again = await run.regenerate({ model: 'beta:x', principal: ann });
      expect((await again.result()).outputText).toBe('beta: Task:\ntell me');
      expect(roles(callsOf(again.turnId)[0]!.request)).toEqual(['user: Task:\ntell me']);
      const fork = await client.loadConversation(again.conversationId);
      expect(await fork.origin()).toEqual({ conversationId: run.conversationId, messageId: null });
      expect((await fork.messages()).map((m) => m.sequence)).toEqual([1, 2]);
    });

    it('fork: inside a tool round is a ForkError; at the round’s last result it carries the call and its result', async () => {
      const original = await chat('please use the tool');
      const messages = await original.messages();
      const call = messages.find((m) => m.kind === 'tool_call')!;
      const result = messages.find((m) => m.kind === 'tool_result')!;
      const refused = await original.fork({ at: call.id, principal: ann }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ForkError);
      expect((refused as ForkError).code).toBe('tool_round');
      expect(await original.forks()).toEqual([]);

      const fork = await original.fork({ at: result.id, principal: ann });
      expect((await fork.messages()).map((m) => m.kind)).toEqual(['text', 'tool_call', 'tool_result']);
      const run = await fork.ask('and now?', { principal: ann });
      expect((await run.result()).outputText).toBe('alpha: and now?');
      expect(roles(callsOf(run.turnId)[0]!.request)).toEqual([
        'user: please use the tool',
        'assistant: ',
        'tool: {"word":"fork","meaning":"a branch"}',
        'user: and now?',
      ]);
    });

    it('fork: a message a running turn has not finished answering is a ForkError until the turn ends', async () => {
      const original = await chat('hello');
      held = false;
      const running = await original.ask('please hold the tool');
      await waitUntil(async () => held, 30_000);
      const input = (await original.messages()).find(
        (m) => m.content[0]?.type === 'text' && m.content[0].text === 'please hold the tool',
      )!;
      expect(input.role).toBe('user');
      const refused = await original.fork({ at: input.id, principal: ann }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ForkError);
      expect((refused as ForkError).code).toBe('unfinished_turn');
      // What finished turns answered can be forked while it runs.
      const earlier = (await original.messages()).find((m) => m.role === 'assistant')!;
      const early = await original.fork({ at: earlier.id, principal: ann });
      expect((await early.messages()).length).toBe(2);
      release();
      expect((await running.result()).status).toBe('completed');
      const late = await original.fork({ at: input.id, principal: ann });
      expect((await late.messages()).at(-1)!.content).toEqual(input.content);
    });

    it('fork: another principal is refused by the policy as `fork`, and nothing is written', async () => {
      const original = await chat('secret');
      const [turn] = await kit.store.listTurns({ conversationId: original.id });
      const at = (await original.messages()).at(-1)!;
      await expect(original.fork({ at: at.id, principal: bob })).rejects.toBeInstanceOf(AuthorizationError);
      await expect(original.fork({ at: at.id })).rejects.toBeInstanceOf(AuthorizationError);
      await expect((await client.handle(turn!)).regenerate({ principal: bob })).rejects.toBeInstanceOf(
        AuthorizationError,
      );
      expect(await original.forks()).toEqual([]);
      // A message of another conversation is refused before the policy is asked.
      const other = await chat('elsewhere');
      const foreign = (await other.messages())[0]!;
      const error = await original.fork({ at: foreign.id, principal: ann }).catch((e: unknown) => e);
      expect((error as ForkError).code).toBe('foreign_message');
    });
  });
}

describeFork('sqlite', async () => {
  const store = await openStore(tempSqliteUrl('fork'));
  return { store, close: () => store.close() };
});

describePostgres('fork on PostgreSQL', () => {
  describeFork('postgres', async () => {
    const pg = await openPgTestStore();
    return { store: pg.store, close: pg.drop };
  });
});
