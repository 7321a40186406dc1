/**
 * Deliveries, the conversation lane and application-level joins on the real dev server
 * (spec §5.6, §5.8): messages to busy and idle conversations, completion callbacks,
 * authorization of messages and callbacks, `waitFor` with `wait_results`, root timeouts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { AuthorizationRequest } from '../../src/engine/runtime.js';
import { AuthorizationError, ToolError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';

const gates = new Map<string, ReturnType<typeof gate>>();
const blocker = defineTool({
  name: 'block',
  description: 'Blocks until the test opens the named gate.',
  input: z.object({ gate: z.string() }),
  execute: async ({ gate: name }) => {
    await gates.get(name)?.promise;
    return { opened: name };
  },
});

const userTexts = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === 'user').map((m) => String(m.content));
const modelGates = new Map<string, ReturnType<typeof gate>>();

const model = new ScriptedModel({
  // Blocks its model call while a gate named in the last user message is closed.
  chat: async (request) => {
    const last = userTexts(request).at(-1) ?? '';
    const name = /hold:(\S+)/.exec(last)?.[1];
    if (name) await modelGates.get(name)?.promise;
    return `seen: ${userTexts(request).join(' | ')}`;
  },
  worker: (request) => {
    const name = /gate:(\S+)/.exec(userTexts(request)[0] ?? '')?.[1];
    if (name && !request.messages.some((m) => m.role === 'tool'))
      return { toolCalls: [{ name: 'block', arguments: { gate: name } }] };
    return 'worker done';
  },
  joined: (request) => `joined: ${userTexts(request).at(-1)}`,
});

const policy = { deny: new Set<string>(), seen: [] as AuthorizationRequest[] };
const authorization = (request: AuthorizationRequest) => {
  policy.seen.push(request);
  return !policy.deny.has(request.action);
};

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'chat' }),
      defineAgent({ name: 'worker', tools: [blocker] }),
      defineAgent({ name: 'joined' }),
      defineAgent({ name: 'impatient', limits: { timeout: 2 } }),
    ],
    model,
    runtime: { authorization },
  });
});
afterAll(async () => kit?.stop());

/** A client with the same policy as the worker (checked before it writes anything). */
const client = () =>
  new TurnKitClient({
    store: kit.store,
    agents: kit.agents,
    temporal: kit.client.temporal,
    taskQueue: kit.taskQueue,
    authorization,
  });

describe('deliveries and the conversation lane', () => {
  it('BG-13 E2E-03 a message to a busy conversation (sent twice, one key) is one delivery; the running turn never sees it; the next turn consumes it', async () => {
    modelGates.set('bg13', gate());
    const source = await kit.client.conversation('chat', { principal: { user: 'sender' } });
    const destination = await kit.client.conversation('chat', { principal: { user: 'owner' } });
    const busy = await destination.ask('hold:bg13 first question');
    await waitUntil(async () =>
      model.callsFor('chat').some((c) => userTexts(c.request).at(-1)?.includes('hold:bg13')),
    );
    const first = await source.sendMessage(destination.id, 'a note for later', { key: 'bg13-note' });
    const again = await source.sendMessage(destination.id, 'a note for later', { key: 'bg13-note' });
    expect(again.id).toBe(first.id);
    await kit.client.wakeLane(destination.id);
    // Delivered into the conversation, but no second turn while the first one runs.
    await waitUntil(async () => (await kit.client.inbox(destination.id))[0]!.deliveredAt !== null);
    expect(await kit.store.listTurns({ conversationId: destination.id })).toHaveLength(1);

    modelGates.get('bg13')!.open();
    const done = await busy.result();
    expect(done.outputText).toBe('seen: hold:bg13 first question');
    await waitUntil(async () => {
      const turns = await kit.store.listTurns({ conversationId: destination.id });
      return turns.length === 2 && turns.every((t) => t.status === 'completed');
    });
    const next = (await kit.store.listTurns({ conversationId: destination.id })).find(
      (t) => t.id !== busy.turnId,
    )!;
    expect(next.outputText).toBe('seen: hold:bg13 first question | a note for later');
    expect(next.options['principal']).toEqual({ user: 'owner' });
    expect(await source.outbox()).toHaveLength(1);
    const inbox = await destination.inbox();
    expect(inbox).toHaveLength(1);
    expect(inbox[0]!.deliveredAt).not.toBeNull();
  });

  it('E2E-03 an idle conversation wakes on a message', async () => {
    const idle = await kit.client.conversation('chat');
    await kit.client.sendMessage(idle.id, 'wake up', { key: 'e2e03-idle' });
    await waitUntil(async () =>
      (await kit.store.listTurns({ conversationId: idle.id })).some((t) => t.status === 'completed'),
    );
    const [turn] = await kit.store.listTurns({ conversationId: idle.id });
    expect(turn!.outputText).toBe('seen: wake up');
  });

  it('submitted turns of one conversation run one at a time, oldest first', async () => {
    modelGates.set('lane', gate());
    const conversation = await kit.client.conversation('chat');
    const first = await conversation.ask('hold:lane one');
    const second = await conversation.ask('two');
    await waitUntil(async () => (await first.status()) === 'running');
    expect(await second.status()).toBe('pending');
    modelGates.get('lane')!.open();
    const a = await first.result();
    const b = await second.result();
    expect(a.status).toBe('completed');
    expect(b.outputText).toBe('seen: hold:lane one | two');
    expect(Date.parse(b.startedAt!)).toBeGreaterThanOrEqual(Date.parse(a.completedAt!));
  });

  it('BG-40 a key reused for another message is a ToolError that reveals nothing of the original; one delivery row', async () => {
    const a = await kit.client.conversation('chat');
    const b = await kit.client.conversation('chat');
    const original = await kit.client.sendMessage(b.id, 'the secret plan', { key: 'bg40', from: a.id });
    await expect(
      kit.client.sendMessage(b.id, 'the secret plan', { key: 'bg40', from: a.id }),
    ).resolves.toMatchObject({
      id: original.id,
    });
    for (const attempt of [
      () => kit.client.sendMessage(b.id, 'another text', { key: 'bg40', from: a.id }),
      () => kit.client.sendMessage(b.id, 'the secret plan', { key: 'bg40', from: b.id }),
    ]) {
      const error = await attempt().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ToolError);
      expect((error as Error).message).not.toContain('secret');
    }
    expect((await kit.store.listDeliveries({})).filter((d) => d.key === 'bg40')).toHaveLength(1);
  });

  it('BG-14 a completion callback survives a failing turn.completed listener: the turn completes and the delivery arrives', async () => {
    const recipient = await kit.client.conversation('chat');
    const remove = kit.worker.runtime.addListener((event) => {
      if (event.type === 'turn.completed') throw new Error('listener crashed');
    });
    try {
      const run = await kit.client.run('worker', 'quick job', { callback: recipient.id });
      const turn = await run.result();
      expect(turn.status).toBe('completed');
      await waitUntil(async () => (await recipient.inbox()).some((d) => d.deliveredAt !== null));
      const [delivery] = await recipient.inbox();
      expect(delivery!.key).toBe(`completion:${run.turnId}`);
      const message = await kit.store.loadMessage(delivery!.messageId!);
      expect(JSON.parse((message.content[0] as { text: string }).text)).toMatchObject({
        turn_id: run.turnId,
      });
    } finally {
      remove();
    }
  });

  it('BG-32 with send_message and callback denied, nothing is written: no delivery, no run', async () => {
    const guarded = client();
    const target = await kit.client.conversation('chat');
    policy.deny = new Set(['send_message', 'callback']);
    try {
      await expect(guarded.sendMessage(target.id, 'hi', { key: 'bg32' })).rejects.toBeInstanceOf(
        AuthorizationError,
      );
      const before = (await kit.store.listTurns({})).length;
      await expect(guarded.run('worker', 'never', { callback: target.id })).rejects.toBeInstanceOf(
        AuthorizationError,
      );
      expect((await kit.store.listTurns({})).length).toBe(before);
      expect(await kit.store.listDeliveries({ destinationConversationId: target.id })).toHaveLength(0);
    } finally {
      policy.deny = new Set();
    }
  });

  it('BG-33 callback permission revoked before completion: the turn completes, no delivery, callback_denied recorded', async () => {
    gates.set('bg33', gate());
    const recipient = await kit.client.conversation('chat');
    const run = await client().run('worker', 'gate:bg33 job', { callback: recipient.id });
    await waitUntil(async () => (await run.status()) === 'running');
    policy.deny = new Set(['callback']);
    try {
      gates.get('bg33')!.open();
      const turn = await run.result();
      expect(turn.status).toBe('completed');
      expect(turn.options['callback_denied']).toMatchObject({ class: 'TurnKit::AuthorizationError' });
      expect(await recipient.inbox()).toHaveLength(0);
    } finally {
      policy.deny = new Set();
    }
  });
});

describe('application-level joins', () => {
  it('BG-20 BG-08 waitFor on a prepared run: it waits (and starting it again does nothing) until the target finishes; its first request has wait_results', async () => {
    gates.set('bg20', gate());
    const target = await kit.client.run('worker', 'gate:bg20 long job');
    const joined = await kit.client.prepare('joined', 'Summarize the results');
    await joined.waitFor(target);
    await joined.start();
    expect(await joined.status()).toBe('waiting');
    await joined.start();
    await new Promise((r) => setTimeout(r, 1500));
    expect(await joined.status()).toBe('waiting');
    expect(model.callsFor('joined')).toHaveLength(0);
    gates.get('bg20')!.open();
    const turn = await joined.result();
    expect(turn.status).toBe('completed');
    const [first] = model.callsFor('joined');
    const results = userTexts(first!.request).find((text) => text.includes('wait_results'))!;
    expect(JSON.parse(results).wait_results[0]).toMatchObject({
      turn_id: target.turnId,
      status: 'completed',
    });
    expect(model.callsFor('joined')).toHaveLength(1);
  });

  it('BG-09 a waiting turn past its root timeout fails with "timed out"', async () => {
    gates.set('bg09', gate());
    const target = await kit.client.run('worker', 'gate:bg09 endless job');
    const impatient = await kit.client.prepare('impatient', 'Wait a bit');
    await impatient.waitFor(target);
    await impatient.start();
    const turn = await impatient.result();
    expect(turn.status).toBe('failed');
    expect(turn.error?.message).toMatch(/timed out/);
    gates.get('bg09')!.open();
    expect((await target.result()).status).toBe('completed');
  });

  it('BG-39 waitFor rejects unfinished work in the same conversation and a lane cycle, and writes no edge', async () => {
    modelGates.set('bg39', gate());
    const x = await kit.client.conversation('chat');
    const running = await x.ask('hold:bg39 busy');
    const later = await x.ask('later', { start: false });
    await expect(later.waitFor(running)).rejects.toThrow(/same conversation/);
    expect(await kit.store.listWaits({ turnId: later.turnId })).toHaveLength(0);
    modelGates.get('bg39')!.open();
    await running.result();
  });
});

describe('conversations across processes', () => {
  it('E2E-02 another client reloads a conversation by id and a follow-up uses the earlier history', async () => {
    const conversation = await kit.client.conversation('chat');
    await (await conversation.ask('my name is Ada')).result();
    const other = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal: kit.client.temporal,
      taskQueue: kit.taskQueue,
    });
    const reloaded = await other.loadConversation(conversation.id);
    const turn = await (await reloaded.ask('what is my name?')).result();
    expect(turn.outputText).toBe('seen: my name is Ada | what is my name?');
  });
});
