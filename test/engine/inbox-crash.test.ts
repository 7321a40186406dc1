/**
 * Round-4 audit, the inbox (issue 43: #8, #14): a post's crash windows and who may read a
 * recorded post. The lane's `acceptPost` local activity is retried from the start after a
 * crash; here its first attempt dies at a named point (its Temporal client or its store raises
 * right there, as a killed worker stops there) and the second attempt is the retry, on the
 * real dev server with a real SQLite store. Only the model is scripted.
 */
import type { Client } from '@temporalio/client';
import { WithStartWorkflowOperation, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { PostRequest } from '../../src/contract/post-request.js';
import { acceptPost } from '../../src/engine/lane/post.js';
import type { AuthorizationRequest } from '../../src/engine/runtime.js';
import { Runtime } from '../../src/engine/runtime.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { PostConflictError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { Store } from '../../src/store/types.js';
import {
  cancelSignal,
  laneWorkflowId,
  laneWorkflowOptions,
  postUpdate,
  UPDATES,
} from '../../src/workflows/contract.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';

const gates = new Map<string, ReturnType<typeof gate>>();
/** Holds until its gate opens or the call is aborted (a cancel). */
const block = defineTool({
  name: 'block',
  description: 'Holds until the test opens the named gate.',
  input: z.object({ gate: z.string() }),
  execute: async ({ gate: name }, context) => {
    if (!gates.has(name)) gates.set(name, gate());
    await Promise.race([
      gates.get(name)!.promise,
      new Promise((_, reject) =>
        context.signal.addEventListener('abort', () => reject(new Error('aborted'))),
      ),
    ]);
    return { opened: name };
  },
});
const openGate = (name: string) => {
  if (!gates.has(name)) gates.set(name, gate());
  gates.get(name)!.open();
};

const userTexts = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === 'user').map((m) => String(m.content));
/** `tools:<gate>` in the last user message, with no tool result after it: a blocking call. */
const answer = (request: ModelRequest) => {
  const lastUser = request.messages.map((m) => m.role).lastIndexOf('user');
  const name = /tools:(\S+)/.exec(String(request.messages[lastUser]?.content ?? ''))?.[1];
  if (name && !request.messages.slice(lastUser).some((m) => m.role === 'tool'))
    return { toolCalls: [{ name: 'block', arguments: { gate: name } }] };
  return `seen: ${userTexts(request).join(' | ')}`;
};
const model = new ScriptedModel({ crashy: answer });
const authorization = (request: AuthorizationRequest) => request.principal !== 'mallory';

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [defineAgent({ name: 'crashy', tools: [block] })],
    model,
    runtime: { authorization },
  });
});
afterAll(async () => kit?.stop());

/** A worker that dies at a named point: the attempt stops there, with nothing after it done. */
class Crash extends Error {}

type FaultPoint = 'after-steer-update' | 'before-cancel-signal';

/** The Temporal client of an attempt that dies at `point` (once). */
function faultyTemporal(real: Client, point: FaultPoint): Client {
  let fired = false;
  const fire = () => {
    fired = true;
    throw new Crash(`the worker died at ${point}`);
  };
  const workflow = new Proxy(real.workflow, {
    get(target, property) {
      if (property !== 'getHandle') return Reflect.get(target, property, target) as unknown;
      return (...args: Parameters<Client['workflow']['getHandle']>) => {
        const handle = target.getHandle(...args);
        return new Proxy(handle, {
          get(h, name) {
            if (name === 'executeUpdate')
              return async (...update: Parameters<typeof handle.executeUpdate>) => {
                const result = await h.executeUpdate(...update);
                if (point === 'after-steer-update' && !fired && update[0] === UPDATES.steer) fire();
                return result;
              };
            if (name === 'signal')
              return async (...signal: Parameters<typeof handle.signal>) => {
                if (point === 'before-cancel-signal' && !fired && signal[0] === cancelSignal) fire();
                return h.signal(...signal);
              };
            return Reflect.get(h, name, h) as unknown;
          },
        });
      };
    },
  });
  return new Proxy(real, {
    get: (target, property) =>
      property === 'workflow' ? workflow : (Reflect.get(target, property, target) as unknown),
  });
}

/** The store of an attempt that runs `race` before its first transaction (after its look at the lane). */
function racingStore(real: Store, race: () => Promise<void>): Store {
  let raced = false;
  return new Proxy(real, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      if (property !== 'atomic') return (value as (...a: unknown[]) => unknown).bind(target);
      return async (...args: unknown[]) => {
        if (!raced) {
          raced = true;
          await race();
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

function context(options: { temporal?: Client; store?: Store } = {}) {
  return {
    runtime: new Runtime({ store: options.store ?? kit.store, agents: kit.agents, authorization }),
    temporal: options.temporal ?? kit.client.temporal,
    taskQueue: kit.taskQueue,
  };
}

function request(requestId: string, text: string, policy: PostRequest['policy'], principal = null) {
  return { requestId, text, principal, policy, media: [], signature: null } as PostRequest;
}

/** A conversation whose turn holds its `block` call until the gate `name` opens. */
async function busyConversation(name: string) {
  const conversation = await kit.client.conversation('crashy');
  const first = await conversation.post(`tools:${name}`);
  await waitUntil(async () => blockRunning(first.turnId!));
  return { conversation, first };
}
const blockRunning = async (turnId: string) =>
  (await kit.store.listToolExecutions({ turnIds: [turnId] })).some(
    (e) => e.toolName === 'block' && e.status === 'running',
  );
const terminal = async (turnId: string) =>
  ['completed', 'cancelled', 'failed'].includes((await kit.store.loadTurn(turnId)).status);
const withText = async (conversationId: string, text: string) =>
  (await kit.store.listMessages(conversationId)).filter((m) =>
    m.content.some((p) => p.type === 'text' && p.text === text),
  );

describe('audit: #8 a post’s crash windows (the retry completes what is missing, never repeats it)', () => {
  it('audit: #8a a steered post whose worker died right after its steer Update, retried once the turn finished, is the steer: one message, one turn', async () => {
    const { conversation, first } = await busyConversation('a1');
    const post = request('crash-steer', 'change of plan', 'steer');
    const dying = context({ temporal: faultyTemporal(kit.client.temporal, 'after-steer-update') });
    await expect(acceptPost(dying, conversation.id, post)).rejects.toBeInstanceOf(Crash);
    openGate('a1');
    await waitUntil(() => terminal(first.turnId!));
    const receipt = await acceptPost(context(), conversation.id, post);
    expect(receipt).toMatchObject({ disposition: 'steered', turnId: first.turnId });
    const messages = await withText(conversation.id, 'change of plan');
    expect(messages).toHaveLength(1);
    expect(messages[0]!.metadata).toMatchObject({ steer_id: 'post:crash-steer' });
    expect(await kit.store.listTurns({ conversationId: conversation.id })).toHaveLength(1);
    expect(await conversation.inputStatus('crash-steer')).toMatchObject({
      disposition: 'steered',
      messageId: messages[0]!.id,
      turnId: first.turnId,
      turnStatus: 'completed',
    });
  });

  it('audit: #8b an interrupting post whose worker died before its cancels were sent sends them on the retry: the turn is cancelled and the next one answers', async () => {
    const { conversation, first } = await busyConversation('b1');
    const post = request('crash-interrupt', 'stop, do this', 'interrupt');
    const dying = context({ temporal: faultyTemporal(kit.client.temporal, 'before-cancel-signal') });
    await expect(acceptPost(dying, conversation.id, post)).rejects.toBeInstanceOf(Crash);
    expect((await kit.store.loadTurn(first.turnId!)).status).toBe('running');
    const receipt = await acceptPost(context(), conversation.id, post);
    expect(receipt.disposition).toBe('interrupted');
    expect(receipt.turnId).toMatch(/^turn_/);
    expect(receipt.turnId).not.toBe(first.turnId);
    expect((await kit.store.loadTurn(first.turnId!)).status).toBe('cancelled');
    const next = await (await kit.client.handle(receipt.turnId!)).result();
    expect(next.outputText).toBe('seen: tools:b1 | stop, do this');
    expect(await withText(conversation.id, 'stop, do this')).toHaveLength(1);
  });

  it('audit: #8c the turns an interrupting post cancels are the lane’s as the post is written: a turn that started after the post looked is the one cancelled', async () => {
    const { conversation, first } = await busyConversation('c1');
    const queued = await conversation.post('tools:c2', { policy: 'queue' });
    expect(queued.disposition).toBe('queued');
    let second = '';
    // Between the post's look at the lane and its write, the first turn ends and the lane
    // starts the one that answers the queued message.
    const race = async () => {
      openGate('c1');
      await waitUntil(async () => {
        const turns = await kit.store.listTurns({ conversationId: conversation.id });
        second = turns.find((t) => t.id !== first.turnId)?.id ?? '';
        return second !== '' && (await blockRunning(second));
      });
    };
    const receipt = await acceptPost(
      context({ store: racingStore(kit.store, race) }),
      conversation.id,
      request('race-interrupt', 'stop it', 'interrupt'),
    );
    expect((await kit.store.loadTurn(first.turnId!)).status).toBe('completed');
    expect((await kit.store.loadTurn(second)).status).toBe('cancelled');
    expect(receipt.disposition).toBe('interrupted');
    expect(receipt.turnId).toMatch(/^turn_/);
    expect([first.turnId, second]).not.toContain(receipt.turnId);
    const next = await (await kit.client.handle(receipt.turnId!)).result();
    expect(next.outputText).toBe('seen: tools:c1 | tools:c2 | stop it');
  });
});

describe('audit: #14 a known request id', () => {
  /** The lane's `post` Update sent straight to Temporal (no client-side check). */
  async function postUpdateDirect(conversationId: string, post: PostRequest): Promise<unknown> {
    const start = new WithStartWorkflowOperation('laneWorkflow', {
      ...laneWorkflowOptions(conversationId),
      taskQueue: kit.taskQueue,
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    return kit.client.temporal.workflow
      .executeUpdateWithStart(postUpdate, { args: [post], startWorkflowOperation: start })
      .catch((error: unknown) => error);
  }

  it('audit: #14 the policy is asked before a known request id is answered: another principal sending the Update directly gets an AuthorizationError, not the receipt', async () => {
    const conversation = await kit.client.conversation('crashy');
    const receipt = await conversation.post('hello', { requestId: 'known-1', principal: 'alice' });
    await waitUntil(() => terminal(receipt.turnId!));
    const error = await postUpdateDirect(conversation.id, {
      ...request('known-1', 'hello', null),
      principal: 'mallory',
    });
    expect(error).toBeInstanceOf(WorkflowUpdateFailedError);
    const cause = (error as WorkflowUpdateFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe('AuthorizationError');
    // The same caller again gets the same receipt.
    expect(await conversation.post('hello', { requestId: 'known-1', principal: 'alice' })).toEqual(receipt);
  });

  it('audit: #14 a request id reused with another text is a PostConflictError and nothing is written', async () => {
    const conversation = await kit.client.conversation('crashy');
    const receipt = await conversation.post('first words', { requestId: 'reused-1' });
    await waitUntil(() => terminal(receipt.turnId!));
    const before = (await kit.store.listMessages(conversation.id)).length;
    const error = await conversation.post('other words', { requestId: 'reused-1' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PostConflictError);
    expect((error as PostConflictError).message).toMatch(/reused-1/);
    expect((await kit.store.listMessages(conversation.id)).length).toBe(before);
    expect(await kit.store.listTurns({ conversationId: conversation.id })).toHaveLength(1);
  });
});

describe('audit: #25 a post racing the lane’s idle close', () => {
  it('audit: #25 posts that reach a lane as it closes (a lane that closes 1 ms after it idles) all succeed: each one message, each one turn', async () => {
    const closing = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal: kit.client.temporal,
      taskQueue: kit.taskQueue,
      turnSettings: { laneIdle: 1 },
    });
    const conversation = await closing.conversation('crashy');
    const failures: unknown[] = [];
    const delays = [0, 0, 10, 20, 40, 80, 150, 300];
    for (const [i, delay] of delays.entries()) {
      const receipt = await conversation
        .post(`hello ${i}`, { requestId: `close-${i}` })
        .catch((error: unknown) => {
          failures.push(error);
          return null;
        });
      if (receipt) await (await closing.handle(receipt.turnId!)).result();
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    // However the timing fell above, the lane closes once idle: a post then reaches a closed lane.
    const lane = kit.client.temporal.workflow.getHandle(laneWorkflowId(conversation.id));
    const laneOpen = async () => (await lane.describe()).status.name === 'RUNNING';
    for (let waited = 0; (await laneOpen()) && waited < 10_000; waited += 100)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await laneOpen()).toBe(false);
    const last = await conversation.post('hello again', { requestId: 'close-last' });
    await (await closing.handle(last.turnId!)).result();
    expect(failures.map(String)).toEqual([]);
    const turns = await kit.store.listTurns({ conversationId: conversation.id });
    expect(turns).toHaveLength(delays.length + 1);
    expect(turns.every((turn) => turn.status === 'completed')).toBe(true);
    // More than one lane run served the posts. Visibility lags the runs, so it is read until
    // it shows three of them or ten seconds have passed.
    const laneRuns = async () => {
      let count = 0;
      for await (const _ of kit.client.temporal.workflow.list({
        query: `WorkflowId = '${laneWorkflowId(conversation.id)}'`,
      }))
        count += 1;
      return count;
    };
    let runs = await laneRuns();
    for (let waited = 0; runs < 3 && waited < 10_000; waited += 500) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      runs = await laneRuns();
    }
    console.log(`#25: ${delays.length + 1} posts over ${runs} lane runs`);
    expect(runs).toBeGreaterThanOrEqual(2);
  }, 240_000);
});
