/**
 * Issue 31, the conversation inbox: `conversation.post` with receipts and a policy for a busy
 * conversation (queue, steer, interrupt, reject), one Update-with-Start of the lane, request
 * ids held by the store, and `inputStatus` / `messagesAfter` for a front end that polls. On
 * the real dev server with a real SQLite store (PostgreSQL for the idempotency race); only the
 * model is scripted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { ConversationHandle } from '../../src/client/turnkit-client.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { acceptPost } from '../../src/engine/lane/post.js';
import type { AuthorizationRequest } from '../../src/engine/runtime.js';
import { Runtime } from '../../src/engine/runtime.js';
import { ArgumentError, AuthorizationError, ConversationBusyError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import type { MessageRecord, Store } from '../../src/store/types.js';
import { laneStartOptions, laneWorkflowId } from '../../src/workflows/contract.js';
import { describePostgres, openPgTestStore, pgTestUrl } from '../helpers/postgres.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { gate, waitUntil } from '../helpers/wait.js';

const KEY = 'inbox-test-signing-key-0123456789';
const gates = new Map<string, ReturnType<typeof gate>>();
const opened = (name: string) => {
  const g = gate();
  gates.set(name, g);
  return g;
};
/** Holds until its gate opens or the call is aborted (a cancel). */
const block = defineTool({
  name: 'block',
  description: 'Holds until the test opens the named gate.',
  input: z.object({ gate: z.string() }),
  execute: async ({ gate: name }, context) => {
    await Promise.race([
      gates.get(name)?.promise,
      new Promise((_, reject) =>
        context.signal.addEventListener('abort', () => reject(new Error('aborted'))),
      ),
    ]);
    return { opened: name };
  },
});
const lookup = defineTool({
  name: 'lookup',
  description: 'Reads something.',
  input: z.object({ tag: z.string() }),
  execute: ({ tag }) => ({ found: tag }),
});

const userTexts = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === 'user').map((m) => String(m.content));
/** `tools:<gate>` in the last user message: a blocking call and a lookup; then it says what it read. */
const answer = (request: ModelRequest) => {
  const name = /tools:(\S+)/.exec(userTexts(request).at(-1) ?? '')?.[1];
  if (name && !request.messages.some((m) => m.role === 'tool'))
    return {
      toolCalls: [
        { name: 'block', arguments: { gate: name } },
        { name: 'lookup', arguments: { tag: name } },
      ],
    };
  return `seen: ${userTexts(request).join(' | ')}`;
};
const model = new ScriptedModel({ inbox: answer, rejecting: answer, finisher: answer });
const checkGate = { current: gate(), entered: 0 };

const policy = { seen: [] as AuthorizationRequest[] };
const authorization = (request: AuthorizationRequest) => {
  policy.seen.push(request);
  if (request.principal === 'mallory') return false;
  // The CFO is honoured only when the signature checked out.
  if (request.principal === 'cfo') return request['verified'] === true;
  if (request.principal === 'reader') return request.action === 'read_control';
  return true;
};

let kit: TestKit;
/** A client holding the workers' key, with their policy. */
let signed: TurnKitClient;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'inbox', tools: [block, lookup] }),
      defineAgent({ name: 'rejecting', tools: [block, lookup], postPolicy: 'reject' }),
      defineAgent({
        name: 'finisher',
        outputConstraints: [
          async () => {
            checkGate.entered += 1;
            await checkGate.current.promise;
            return null;
          },
        ],
      }),
    ],
    model,
    runtime: { authorization, signingKey: KEY },
  });
  signed = new TurnKitClient({
    store: kit.store,
    agents: kit.agents,
    temporal: kit.client.temporal,
    taskQueue: kit.taskQueue,
    authorization,
    signingKey: KEY,
  });
});
afterAll(async () => kit?.stop());

/** Each tool call in the conversation has exactly one result. */
async function oneResultPerCall(store: Store, conversationId: string): Promise<string[]> {
  const messages = await store.listMessages(conversationId);
  const calls = messages.flatMap((m) => m.content.flatMap((p) => (p.type === 'tool_call' ? [p.id] : [])));
  const results = messages.flatMap((m) =>
    m.content.flatMap((p) => (p.type === 'tool_result' ? [p.tool_call_id] : [])),
  );
  expect(calls.length).toBeGreaterThan(0);
  expect([...results].sort()).toEqual([...calls].sort());
  return results;
}

/** A conversation whose turn runs `tools:<name>`: its `block` call holds until the gate opens. */
async function busyConversation(agent: string, name: string, client = kit.client) {
  const conversation = await client.conversation(agent);
  const g = opened(name);
  const first = await conversation.post(`tools:${name}`);
  expect(first.disposition).toBe('started');
  await waitUntil(async () =>
    (await kit.store.listToolExecutions({ turnIds: [first.turnId!] })).some(
      (e) => e.toolName === 'block' && e.status === 'running',
    ),
  );
  return { conversation, first, gate: g };
}

const eventName = (event: object) =>
  Object.keys(event)
    .find((key) => key.endsWith('EventAttributes') && (event as Record<string, unknown>)[key])!
    .replace(/EventAttributes$/, '');

async function laneHistory(conversationId: string, runId?: string): Promise<string[]> {
  const history = await kit.client.temporal.workflow
    .getHandle(laneWorkflowId(conversationId), runId)
    .fetchHistory();
  return (history.events ?? []).map(eventName);
}

const turnsOf = (conversation: ConversationHandle) =>
  kit.store.listTurns({ conversationId: conversation.id });
const allDone = async (conversation: ConversationHandle, count: number) =>
  waitUntil(async () => {
    const turns = await turnsOf(conversation);
    return (
      turns.length === count && turns.every((t) => ['completed', 'cancelled', 'failed'].includes(t.status))
    );
  });

describe('inbox: conversation.post', () => {
  it("inbox: a post to an idle conversation starts its lane and its turn in one round trip: the lane's first workflow task holds its start and the accepted Update", async () => {
    const conversation = await kit.client.conversation('inbox');
    const receipt = await conversation.post('hello there', { requestId: 'idle-1' });
    expect(receipt).toMatchObject({ requestId: 'idle-1', disposition: 'started' });
    expect(receipt.messageId).toMatch(/^msg_/);
    expect(receipt.turnId).toMatch(/^turn_/);
    const events = await laneHistory(conversation.id);
    // Started by the Update-with-Start: its first workflow task accepts the Update and
    // records the post's local activity (the message, the turn, its workflow started).
    expect(events.slice(0, 4)).toEqual([
      'workflowExecutionStarted',
      'workflowTaskScheduled',
      'workflowTaskStarted',
      'workflowTaskCompleted',
    ]);
    const firstTask = events.slice(4, events.indexOf('workflowTaskScheduled', 4));
    const accepted = firstTask.indexOf('workflowExecutionUpdateAccepted');
    expect(accepted).toBeGreaterThanOrEqual(0);
    expect(firstTask.indexOf('markerRecorded', accepted)).toBeGreaterThan(accepted);
    expect(events).toContain('workflowExecutionUpdateCompleted');
    const turn = await (await kit.client.handle(receipt.turnId!)).result();
    expect(turn.outputText).toBe('seen: hello there');
    const message = await kit.store.loadMessage(receipt.messageId!);
    expect(message.metadata).toMatchObject({ request_id: 'idle-1' });
    expect(await conversation.inputStatus('idle-1')).toMatchObject({ ...receipt, turnStatus: 'completed' });
  });

  it('inbox: queue: a post to a busy conversation waits for the lane; the next turn reads both messages, after every tool result', async () => {
    const { conversation, first, gate: g } = await busyConversation('inbox', 'q1');
    const receipt = await conversation.post('and one more thing', { requestId: 'queue-1', policy: 'queue' });
    expect(receipt).toMatchObject({ requestId: 'queue-1', disposition: 'queued', turnId: null });
    expect(receipt.messageId).toMatch(/^msg_/);
    expect((await turnsOf(conversation)).length).toBe(1);
    g.open();
    await allDone(conversation, 2);
    const status = (await conversation.inputStatus('queue-1'))!;
    expect(status.turnId).not.toBe(first.turnId);
    expect(status.turnStatus).toBe('completed');
    const next = await kit.store.loadTurn(status.turnId!);
    expect(next.outputText).toBe('seen: tools:q1 | and one more thing');
    // The message arrived between the calls and their results: the model reads it after them.
    const request = model
      .callsFor('inbox')
      .map((c) => c.request)
      .find((r) => r.metadata.turnId === next.id)!;
    const roles = request.messages.map((m) => m.role);
    expect(roles.lastIndexOf('tool')).toBeLessThan(roles.lastIndexOf('user'));
    await oneResultPerCall(kit.store, conversation.id);
  });

  it('inbox: steer: the running turn reads the post at its next boundary; a call not yet run is superseded, every call keeps one result', async () => {
    const { conversation, first, gate: g } = await busyConversation('inbox', 's1');
    const receipt = await conversation.post('change of plan', { requestId: 'steer-1', policy: 'steer' });
    expect(receipt).toEqual({
      requestId: 'steer-1',
      messageId: null,
      turnId: first.turnId,
      disposition: 'steered',
    });
    g.open();
    const turn = await (await kit.client.handle(first.turnId!)).result();
    expect(turn.outputText).toContain('change of plan');
    expect(await turnsOf(conversation)).toHaveLength(1);
    const status = (await conversation.inputStatus('steer-1'))!;
    const steered = await kit.store.loadMessage(status.messageId!);
    expect(steered.metadata).toMatchObject({ steer_id: 'post:steer-1' });
    expect(steered.turnId).toBe(first.turnId);
    const results = await oneResultPerCall(kit.store, conversation.id);
    expect(results).toHaveLength(2);
  });

  it('inbox: steer: a turn past its output boundary cannot take it: the post is queued for the next turn', async () => {
    checkGate.current = gate();
    checkGate.entered = 0;
    const conversation = await kit.client.conversation('finisher');
    const first = await conversation.post('draft it');
    await waitUntil(async () => checkGate.entered > 0);
    const receipt = await conversation.post('too late words', { requestId: 'late-1', policy: 'steer' });
    expect(receipt).toMatchObject({ disposition: 'queued', turnId: null });
    checkGate.current.open();
    await allDone(conversation, 2);
    const status = (await conversation.inputStatus('late-1'))!;
    expect(status.turnId).not.toBe(first.turnId);
    expect((await kit.store.loadTurn(status.turnId!)).outputText).toBe('seen: draft it | too late words');
    expect((await kit.store.loadTurn(first.turnId!)).outputText).toBe('seen: draft it');
  });

  it('inbox: interrupt: the running turn is cancelled (retain) and a new one reads both messages; the cancelled calls keep one result each', async () => {
    const { conversation, first } = await busyConversation('inbox', 'i1');
    const receipt = await conversation.post('stop, do this instead', {
      requestId: 'int-1',
      policy: 'interrupt',
    });
    expect(receipt.disposition).toBe('interrupted');
    expect(receipt.turnId).toMatch(/^turn_/);
    expect(receipt.turnId).not.toBe(first.turnId);
    const next = await (await kit.client.handle(receipt.turnId!)).result();
    expect((await kit.store.loadTurn(first.turnId!)).status).toBe('cancelled');
    expect(next.outputText).toBe('seen: tools:i1 | stop, do this instead');
    // Posted before the cancel closed the calls (stored between a call and its result), the
    // model reads it after their results.
    const stored = await conversation.messages();
    const posted = stored.find((m) => m.id === receipt.messageId)!;
    expect(stored.some((m) => m.kind === 'tool_result' && m.sequence > posted.sequence)).toBe(true);
    const request = model
      .callsFor('inbox')
      .map((c) => c.request)
      .find((r) => r.metadata.turnId === next.id)!;
    const roles = request.messages.map((m) => m.role);
    expect(roles.filter((role) => role === 'tool')).toHaveLength(2);
    expect(roles.lastIndexOf('tool')).toBeLessThan(roles.lastIndexOf('user'));
    await oneResultPerCall(kit.store, conversation.id);
    expect(await conversation.inputStatus('int-1')).toMatchObject({
      turnId: next.id,
      turnStatus: 'completed',
    });
  });

  it("inbox: reject: a post to a busy conversation is a ConversationBusyError and nothing is written; the agent's default applies unless the post says", async () => {
    const { conversation, gate: g } = await busyConversation('rejecting', 'r1');
    const before = {
      messages: (await conversation.messages()).length,
      turns: (await turnsOf(conversation)).length,
      deliveries: (await conversation.inbox()).length,
    };
    const error = await conversation.post('me too', { requestId: 'rej-1' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConversationBusyError);
    expect((error as ConversationBusyError).receipt).toMatchObject({
      requestId: 'rej-1',
      disposition: 'rejected',
    });
    await expect(
      conversation.post('me too', { requestId: 'rej-2', policy: 'reject' }),
    ).rejects.toBeInstanceOf(ConversationBusyError);
    expect({
      messages: (await conversation.messages()).length,
      turns: (await turnsOf(conversation)).length,
      deliveries: (await conversation.inbox()).length,
    }).toEqual(before);
    expect(await conversation.inputStatus('rej-1')).toBeNull();
    // The post's own policy wins over the agent's.
    const queued = await conversation.post('me too', { requestId: 'rej-1', policy: 'queue' });
    expect(queued.disposition).toBe('queued');
    g.open();
    await allDone(conversation, 2);
  });

  it('inbox: the same requestId posted twice at once gives one message, one turn and one receipt; later too', async () => {
    const conversation = await kit.client.conversation('inbox');
    const [a, b] = await Promise.all([
      conversation.post('only once', { requestId: 'twice-1' }),
      kit.client.post(conversation.id, 'only once', { requestId: 'twice-1' }),
    ]);
    expect(b).toEqual(a);
    expect(a.disposition).toBe('started');
    await allDone(conversation, 1);
    expect(await conversation.post('only once', { requestId: 'twice-1' })).toEqual(a);
    const posted = (await conversation.messages()).filter((m) => m.metadata['request_id'] === 'twice-1');
    expect(posted).toHaveLength(1);
    expect(await turnsOf(conversation)).toHaveLength(1);
  });

  it('inbox: bad input is a typed error before anything is sent', async () => {
    const conversation = await kit.client.conversation('inbox');
    await expect(conversation.post('')).rejects.toBeInstanceOf(ArgumentError);
    await expect(conversation.post('hi', { policy: 'later' as never })).rejects.toBeInstanceOf(ArgumentError);
    await expect(kit.client.post('conv_missing', 'hi')).rejects.toThrow(/not found/);
    expect(await conversation.messages()).toHaveLength(0);
  });
});

describe('inbox: authorization', () => {
  it('inbox: under a policy that requires verified, a signed post steers and interrupts verified; unsigned, or denied, nothing is written', async () => {
    const { conversation, first } = await busyConversation('inbox', 'v1', signed);
    policy.seen = [];
    const steer = await signed.post(conversation.id, 'the CFO says hi', {
      requestId: 'cfo-steer',
      principal: 'cfo',
      policy: 'steer',
    });
    expect(steer.disposition).toBe('steered');
    const asked = (action: string) =>
      policy.seen.filter((r) => r.action === action && r.principal === 'cfo').map((r) => r['verified']);
    expect(asked('post')).not.toContain(false);
    expect(asked('steer')).toEqual([true]);
    const events = await kit.store.listEvents(first.turnId!);
    expect(events.find((e) => e.type === 'turn.steer_requested')?.payload).toMatchObject({ verified: true });

    const messages = (await conversation.messages()).length;
    // No key, no verified principal: the workers' policy refuses the post itself.
    await expect(
      kit.client.post(conversation.id, 'unsigned', { principal: 'cfo', policy: 'interrupt' }),
    ).rejects.toBeInstanceOf(AuthorizationError);
    await expect(
      signed.post(conversation.id, 'nope', { principal: 'mallory', policy: 'interrupt' }),
    ).rejects.toBeInstanceOf(AuthorizationError);
    expect((await conversation.messages()).length).toBe(messages);
    expect((await kit.store.loadTurn(first.turnId!)).status).toBe('running');

    policy.seen = [];
    const interrupt = await signed.post(conversation.id, 'CFO: stop', {
      principal: 'cfo',
      policy: 'interrupt',
    });
    expect(interrupt.disposition).toBe('interrupted');
    expect(asked('cancel')).not.toContain(false);
    expect((await kit.store.loadTurn(first.turnId!)).status).toBe('cancelled');
    await (await kit.client.handle(interrupt.turnId!)).result();
  });

  it('inbox: inputStatus (read_control) and messagesAfter (read_messages) serve a front end that polls', async () => {
    const conversation = await signed.conversation('inbox');
    const receipt = await conversation.post('poll me', { requestId: 'poll-1' });
    await allDone(conversation, 1);
    expect(await conversation.inputStatus('poll-1', { principal: 'reader' })).toMatchObject({
      ...receipt,
      turnStatus: 'completed',
    });
    expect(await conversation.inputStatus('never-posted')).toBeNull();
    await expect(conversation.messagesAfter(0, { principal: 'reader' })).rejects.toBeInstanceOf(
      AuthorizationError,
    );
    await expect(conversation.inputStatus('poll-1', { principal: 'mallory' })).rejects.toBeInstanceOf(
      AuthorizationError,
    );
    const page = await conversation.messagesAfter(0, { limit: 1 });
    expect(page.messages.map((m) => m.id)).toEqual([receipt.messageId]);
    const rest = await conversation.messagesAfter(page.cursor);
    expect(rest.messages.map((m: MessageRecord) => m.role)).toEqual(['assistant']);
    expect((await conversation.messagesAfter(rest.cursor)).messages).toEqual([]);
    expect(
      policy.seen.some((r) => r.action === 'read_messages' && r['conversation'] === conversation.id),
    ).toBe(true);
    await expect(conversation.messagesAfter(-1)).rejects.toBeInstanceOf(ArgumentError);
  });
});

describe('inbox: the lane', () => {
  it("inbox: posts count toward the lane run's steps: it drains them and continues as new, and no post is lost", async () => {
    const conversation = await kit.client.conversation('inbox');
    // A lane whose runs take two steps (posts included), started by a wake.
    const options = laneStartOptions(conversation.id);
    const lane = await kit.client.temporal.workflow.signalWithStart('laneWorkflow', {
      ...options,
      args: [{ ...options.args[0], stepsPerRun: 2 }],
      taskQueue: kit.taskQueue,
    });
    const receipts = [];
    const firstRunDone = async () =>
      (await laneHistory(conversation.id, lane.signaledRunId)).at(-1) === 'workflowExecutionContinuedAsNew';
    for (const text of ['one', 'two', 'three']) {
      receipts.push(await conversation.post(text));
      await allDone(conversation, receipts.length);
      // The wake and the first post spent the first run's two steps: it continues as new, by
      // itself, however fast the turn was (one that ends first must not race the next post in).
      if (receipts.length === 1) await waitUntil(firstRunDone);
    }
    expect(receipts.map((r) => r.disposition)).toEqual(['started', 'started', 'started']);
    const firstRun = await laneHistory(conversation.id, lane.signaledRunId);
    expect(firstRun.at(-1)).toBe('workflowExecutionContinuedAsNew');
    expect(firstRun.filter((e) => e === 'workflowExecutionUpdateCompleted')).toHaveLength(1);
  });
});

describePostgres('inbox: PostgreSQL', () => {
  let pgKit: TestKit;
  let drop: () => Promise<void>;
  let schema: string;
  beforeAll(async () => {
    const pg = await openPgTestStore();
    drop = pg.drop;
    schema = pg.schema;
    pgKit = await startKit({
      store: pg.store,
      model,
      agents: [defineAgent({ name: 'inbox', tools: [block, lookup] })],
    });
  });
  afterAll(async () => {
    await pgKit?.stop();
    await drop?.();
  });

  it('inbox: on PostgreSQL, the same requestId accepted twice at once by two processes (no lane between them) is one message and one turn', async () => {
    const conversation = await pgKit.client.conversation('inbox');
    // Two stores (two pools, as two workers have), each behind its own runtime.
    const other = await PostgresStore.open(pgTestUrl(), { schema });
    try {
      const context = (store: Store) => ({
        runtime: new Runtime({ store, agents: pgKit.agents }),
        temporal: pgKit.client.temporal,
        taskQueue: pgKit.taskQueue,
      });
      const request = {
        requestId: 'pg-race',
        text: 'race me',
        principal: null,
        policy: null,
        media: [],
        signature: null,
      };
      const receipts = await Promise.all([
        acceptPost(context(pgKit.store), conversation.id, request),
        acceptPost(context(other), conversation.id, request),
        acceptPost(context(other), conversation.id, request),
      ]);
      expect(receipts[1]).toEqual(receipts[0]);
      expect(receipts[2]).toEqual(receipts[0]);
      const posted = (await conversation.messages()).filter((m) => m.metadata['request_id'] === 'pg-race');
      expect(posted).toHaveLength(1);
      await waitUntil(
        async () =>
          (await pgKit.store.listTurns({ conversationId: conversation.id }))[0]?.status === 'completed',
      );
      expect(await pgKit.store.listTurns({ conversationId: conversation.id })).toHaveLength(1);
      expect(await pgKit.client.post(conversation.id, 'race me', { requestId: 'pg-race' })).toEqual(
        receipts[0],
      );
    } finally {
      await other.close();
    }
  });
});
