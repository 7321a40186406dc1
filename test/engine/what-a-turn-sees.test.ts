/**
 * Issue 43, "What a turn sees" (decision 52): whatever earlier turns of the conversation wrote
 * before a turn starts work (results, answers, repairs, cancels) is in its request, its own
 * message comes before its own calls, and no request ever holds a call without its result.
 * Each case ends an earlier turn while the next one waits in the lane, then runs the next turn
 * on the strict scripted model and on a local OpenAI-compatible server (through the AI SDK's
 * provider) that refuses unmatched calls as the provider does. Real dev server, real SQLite.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { MissingToolResultsError, generateText } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { ConversationHandle } from '../../src/client/turnkit-client.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import { ModelError } from '../../src/errors.js';
import { ProviderRegistryModel } from '../../src/models/provider-registry.js';
import { ScriptedModel, toolPairingError } from '../../src/models/scripted-model.js';
import type { ModelMessage, ModelRequest } from '../../src/models/types.js';
import type { MessageRecord, Store } from '../../src/store/types.js';
import { turnWorkflowId } from '../../src/workflows/contract.js';
import type { Completion } from '../helpers/openai-sse.js';
import type { StrictProvider } from '../helpers/strict-provider.js';
import { startStrictProvider, wirePairingError } from '../helpers/strict-provider.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import { waitUntil } from '../helpers/wait.js';

const wire = defineTool({
  name: 'wire',
  description: 'Sends money; a person approves each call.',
  input: z.object({}),
  needsApproval: true,
  execute: () => ({ sent: true }),
});
/** Runs until its attempt is aborted (a cancel) or its workflow is gone (a terminate). */
const hold = defineTool({
  name: 'hold',
  description: 'Holds until stopped.',
  input: z.object({}),
  execute: (_input, context) =>
    new Promise((_, reject) => context.signal.addEventListener('abort', () => reject(new Error('aborted')))),
});
const desk = (name: string, model: string | undefined, extra: object = {}) =>
  defineAgent({ name, tools: [wire, hold], ...(model ? { model } : {}), ...extra });
const clerk = (model?: string) =>
  defineAgent({ name: 'clerk', description: 'Wires money.', tools: [wire], ...(model ? { model } : {}) });
const boss = (model?: string) =>
  defineAgent({
    name: 'boss',
    subAgents: [clerk(model)],
    limits: { timeout: 4 },
    ...(model ? { model } : {}),
  });

/** What both models answer: `wire`, `hold` or `delegate` calls that tool; a result is acknowledged; anything else is heard. */
type Step = { text: string } | { call: string; args?: object };
function respond(last: { role: string; text: string; toolName?: string } | undefined): Step {
  if (!last) return { text: 'nothing to answer' };
  if (last.role === 'tool') return { text: `done with ${last.toolName ?? 'the call'}` };
  if (last.text === 'wire' || last.text === 'hold') return { call: last.text };
  if (last.text === 'delegate') return { call: 'clerk', args: { task: 'wire' } };
  if (last.role === 'user' && /wire/.test(last.text)) return { call: 'wire' };
  return { text: `heard ${last.text}` };
}

const lastOf = (messages: readonly ModelMessage[]) => {
  const last = messages.at(-1);
  if (!last) return undefined;
  return last.role === 'tool'
    ? { role: 'tool', text: last.content, toolName: last.toolName }
    : { role: last.role, text: last.content };
};
const scripted = new ScriptedModel({
  '*': (request) => {
    const step = respond(lastOf(request.messages));
    return 'text' in step ? step.text : { toolCalls: [{ name: step.call, arguments: step.args ?? {} }] };
  },
});

let provider: StrictProvider;
let callCount = 0;
const providerAnswer = (body: Record<string, unknown>): Completion => {
  const messages = (body['messages'] ?? []) as {
    role: string;
    content?: unknown;
    tool_call_id?: string;
  }[];
  const last = messages.at(-1);
  const text = typeof last?.content === 'string' ? last.content : JSON.stringify(last?.content ?? '');
  const step = respond(last ? { role: last.role, text, toolName: 'the call' } : undefined);
  if ('text' in step) return { text: step.text };
  callCount += 1;
  return { toolCalls: [{ id: `call_p${callCount}`, name: step.call, arguments: step.args ?? {} }] };
};

interface Side {
  name: string;
  kit: TestKit;
  /** Every request the model got for the conversation, with the provider's refusal if any. */
  requests(conversationId: string): { messages: Pairable[]; refused: string | null }[];
}
type Pairable = { role: string; callIds: string[]; resultId?: string; text: string };

const sides: Side[] = [];
beforeAll(async () => {
  provider = await startStrictProvider(providerAnswer);
  const scriptedKit = await startKit({ agents: [desk('desk', undefined), boss()], model: scripted });
  sides.push({
    name: 'strict scripted model',
    kit: scriptedKit,
    requests: (conversationId) =>
      scripted.calls
        .filter((call) => call.request.metadata.conversationId === conversationId)
        .map((call) => ({
          messages: call.request.messages.map(pairableOf),
          refused: toolPairingError(call.request.messages)?.message ?? null,
        })),
  });
  const gw = createOpenAICompatible({ name: 'gw', baseURL: provider.baseURL, apiKey: 'sk-local' });
  const providerKit = await startKit({
    agents: [desk('desk', 'gw:strict'), boss('gw:strict')],
    model: new ProviderRegistryModel({ providers: { gw }, timeoutMs: 10_000 }),
  });
  sides.push({
    name: 'provider-shaped server',
    kit: providerKit,
    requests: (conversationId) =>
      provider.received
        .filter(({ body }) => seenBy(body, conversationId))
        .map(({ body, refused }) => ({
          messages: ((body['messages'] ?? []) as WireMessage[]).map(pairableOfWire),
          refused,
        })),
  });
});
afterAll(async () => {
  for (const side of sides) await side.kit.stop();
  await provider?.close();
});

type WireMessage = {
  role: string;
  content?: unknown;
  tool_calls?: { id: string }[];
  tool_call_id?: string;
};
const pairableOf = (message: ModelMessage): Pairable => ({
  role: message.role,
  callIds: message.role === 'assistant' ? (message.toolCalls ?? []).map((c) => c.id) : [],
  ...(message.role === 'tool' ? { resultId: message.toolCallId } : {}),
  text: message.content,
});
const pairableOfWire = (message: WireMessage): Pairable => ({
  role: message.role,
  callIds: (message.tool_calls ?? []).map((c) => c.id),
  ...(message.tool_call_id ? { resultId: message.tool_call_id } : {}),
  text: typeof message.content === 'string' ? message.content : '',
});

/** The provider's requests carry no conversation id: each conversation's first text is unique. */
const firstTexts = new Map<string, string>();
const seenBy = (body: Record<string, unknown>, conversationId: string) => {
  const first = firstTexts.get(conversationId);
  return ((body['messages'] ?? []) as WireMessage[]).some((m) => m.role === 'user' && m.content === first);
};

let serial = 0;
/** A conversation whose first message is unique (`<kind> <n>` then the command). */
async function opened(side: Side, agent = 'desk'): Promise<ConversationHandle> {
  const conversation = await side.kit.client.conversation(agent);
  serial += 1;
  const intro = await conversation.ask(`hello ${serial}`);
  firstTexts.set(conversation.id, `hello ${serial}`);
  await intro.result();
  return conversation;
}

/** Every request holds one result for each call, right after it; none was refused. */
function expectPaired(side: Side, conversationId: string, atLeast: number): Pairable[][] {
  const requests = side.requests(conversationId);
  expect(requests.length).toBeGreaterThanOrEqual(atLeast);
  for (const { messages, refused } of requests) {
    expect(refused).toBeNull();
    const calls = messages.flatMap((m) => m.callIds);
    const results = messages.flatMap((m) => (m.resultId ? [m.resultId] : []));
    expect([...results].sort()).toEqual([...calls].sort());
  }
  return requests.map((r) => r.messages);
}

/** Each tool call of the conversation has exactly one result in the store. */
async function oneResultPerCall(store: Store, conversationId: string): Promise<MessageRecord[]> {
  const messages = await store.listMessages(conversationId);
  const calls = messages.flatMap((m) => m.content.flatMap((p) => (p.type === 'tool_call' ? [p.id] : [])));
  const results = messages.filter((m) => m.kind === 'tool_result');
  const answered = results.flatMap((m) =>
    m.content.flatMap((p) => (p.type === 'tool_result' ? [p.tool_call_id] : [])),
  );
  expect(calls.length).toBeGreaterThan(0);
  expect([...answered].sort()).toEqual([...calls].sort());
  return results;
}
const resultText = (message: MessageRecord) =>
  message.content.map((p) => (p.type === 'tool_result' ? p.text : '')).join('');

/** The conversation's request at `index` (in the order the model got them). */
function requestAt(side: Side, conversationId: string, index: number): Pairable[] {
  return side.requests(conversationId)[index]!.messages;
}

const running = (run: RunHandle, status: string) =>
  waitUntil(async () => (await run.toolExecutions()).some((e) => e.status === status));

/** The cases of one side: a queued ask, a queued post, a terminate, a cancel, each followed by a new turn. */
function scenarios(sideOf: () => Side, label: string): void {
  it(`audit: a message asked behind a turn awaiting approval is answered by a turn that sees the approved result and answer first, then its message (${label})`, async () => {
    const side = sideOf();
    const conversation = await opened(side);
    const first = await conversation.ask('wire');
    await waitUntil(async () => (await first.pendingApprovals()).length === 1);
    const second = await conversation.ask('and one more thing');
    const before = side.requests(conversation.id).length;
    const [pending] = await first.pendingApprovals();
    await first.approve(pending!.toolCallId);
    expect((await first.result()).status).toBe('completed');
    const answered = await second.result();
    expect(answered.status).toBe('completed');
    expect(answered.outputText).toBe('heard and one more thing');
    expectPaired(side, conversation.id, before + 1);
    // The second turn's request (after the first turn's last call): the first turn's call, its
    // result, its answer, then the new message.
    const seen = requestAt(side, conversation.id, before + 1);
    expect(seen.slice(-4).map((m) => m.role)).toEqual(['assistant', 'tool', 'assistant', 'user']);
    expect(seen.at(-2)!.text).toContain('done with');
    expect(seen.at(-1)!.text).toBe('and one more thing');
    await oneResultPerCall(side.kit.store, conversation.id);
  });

  it(`audit: a post queued behind a turn awaiting approval: the answering turn's request ends with the post, after the first turn's answer (${label})`, async () => {
    const side = sideOf();
    const conversation = await opened(side);
    const first = await conversation.ask('wire');
    await waitUntil(async () => (await first.pendingApprovals()).length === 1);
    const receipt = await conversation.post('queued thought', { policy: 'queue' });
    expect(receipt.disposition).toBe('queued');
    const before = side.requests(conversation.id).length;
    const [pending] = await first.pendingApprovals();
    await first.approve(pending!.toolCallId);
    await waitUntil(
      async () => (await conversation.inputStatus(receipt.requestId))?.turnStatus === 'completed',
    );
    const status = (await conversation.inputStatus(receipt.requestId))!;
    const answered = await side.kit.store.loadTurn(status.turnId!);
    expect(answered.outputText).toBe('heard queued thought');
    expectPaired(side, conversation.id, before + 1);
    const seen = requestAt(side, conversation.id, before + 1);
    expect(seen.slice(-3).map((m) => m.role)).toEqual(['tool', 'assistant', 'user']);
    expect(seen.at(-1)!.text).toBe('queued thought');
  });

  it(`audit: a turn whose workflow is terminated with a tool running: the next turn sees its repaired result, which says "terminated" (${label})`, async () => {
    const side = sideOf();
    const conversation = await opened(side);
    const first = await conversation.ask('hold');
    await running(first, 'running');
    const before = side.requests(conversation.id).length;
    // The same as `temporal workflow terminate`.
    await side.kit.client.temporal.workflow
      .getHandle(turnWorkflowId(first.turnId))
      .terminate('operator (test)');
    const second = await conversation.ask('are you there');
    const answered = await second.result();
    expect(answered.status).toBe('completed');
    expect(answered.outputText).toBe('heard are you there');
    const failed = await side.kit.store.loadTurn(first.turnId);
    expect(failed.error).toMatchObject({ class: 'TurnKit::WorkflowClosed', message: 'terminated' });
    const results = await oneResultPerCall(side.kit.store, conversation.id);
    const repaired = resultText(results.at(-1)!);
    expect(repaired).toContain('terminated');
    expect(repaired).not.toContain('worker stopped');
    const [execution] = await first.toolExecutions();
    expect(execution!.error?.message).toContain('terminated');
    expectPaired(side, conversation.id, before + 1);
    const seen = requestAt(side, conversation.id, before);
    expect(seen.slice(-3).map((m) => m.role)).toEqual(['assistant', 'tool', 'user']);
    expect(seen.at(-2)!.text).toContain('terminated');
  });

  it(`audit: a turn cancelled with a tool running while the next waits in the lane: the next turn sees the cancelled result, which says "cancelled" (${label})`, async () => {
    const side = sideOf();
    const conversation = await opened(side);
    const first = await conversation.ask('hold');
    await running(first, 'running');
    const second = await conversation.ask('still there');
    const before = side.requests(conversation.id).length;
    await first.cancel();
    expect((await first.result()).status).toBe('cancelled');
    const answered = await second.result();
    expect(answered.status).toBe('completed');
    expect(answered.outputText).toBe('heard still there');
    const results = await oneResultPerCall(side.kit.store, conversation.id);
    expect(resultText(results.at(-1)!)).toContain('cancelled');
    expect(resultText(results.at(-1)!)).not.toContain('worker stopped');
    expectPaired(side, conversation.id, before + 1);
    const seen = requestAt(side, conversation.id, before);
    expect(seen.slice(-3).map((m) => m.role)).toEqual(['assistant', 'tool', 'user']);
  });
}

describe('audit: what a turn sees (decision 52)', () => {
  scenarios(() => sides[0]!, 'strict scripted model');
  scenarios(() => sides[1]!, 'provider-shaped server');

  it("audit: a post that arrives after a queued ask is not that ask's: the asked turn sees the earlier turn's work but not the post, and the lane answers the post with a turn of its own", async () => {
    const side = sides[0]!;
    const conversation = await opened(side);
    const first = await conversation.ask('wire');
    await waitUntil(async () => (await first.pendingApprovals()).length === 1);
    const second = await conversation.ask('the asked one');
    const receipt = await conversation.post('the posted one', { policy: 'queue' });
    expect(receipt.disposition).toBe('queued');
    const [pending] = await first.pendingApprovals();
    await first.approve(pending!.toolCallId);
    expect((await second.result()).outputText).toBe('heard the asked one');
    const seenBySecond = scripted.calls.filter((call) => call.request.metadata.turnId === second.turnId);
    expect(seenBySecond.length).toBeGreaterThan(0);
    for (const { request } of seenBySecond)
      expect(request.messages.map((m) => m.content)).not.toContain('the posted one');
    await waitUntil(
      async () => (await conversation.inputStatus(receipt.requestId))?.turnStatus === 'completed',
    );
    const status = (await conversation.inputStatus(receipt.requestId))!;
    expect(status.turnId).not.toBe(second.turnId);
    expect((await side.kit.store.loadTurn(status.turnId!)).outputText).toBe('heard the posted one');
    expectPaired(side, conversation.id, 4);
  });

  it('audit: a turn that times out with a child awaiting approval records "timed out" on every open call, its child\'s too; the conversation goes on', async () => {
    const side = sides[0]!;
    const conversation = await opened(side, 'boss');
    const run = await conversation.ask('delegate');
    const turn = await run.result();
    expect(turn.error).toMatchObject({ class: 'TurnKit::BudgetError', message: 'turn timed out' });
    const [delegation] = await run.toolExecutions();
    expect(delegation!.error?.message ?? JSON.stringify(delegation!.result)).toContain('timed out');
    const children = (await side.kit.store.listTurns({ rootTurnId: run.turnId })).filter(
      (t) => t.id !== run.turnId,
    );
    expect(children).toHaveLength(1);
    await waitUntil(async () => (await side.kit.store.loadTurn(children[0]!.id)).completedAt !== null);
    const childResults = await oneResultPerCall(side.kit.store, children[0]!.conversationId);
    for (const result of childResults) {
      expect(resultText(result)).toContain('timed out');
      expect(resultText(result)).not.toContain('worker stopped');
    }
    const parentResults = await oneResultPerCall(side.kit.store, conversation.id);
    expect(resultText(parentResults.at(-1)!)).toContain('timed out');
    const next = await conversation.ask('after the timeout');
    expect((await next.result()).outputText).toBe('heard after the timeout');
  });
});

describePostgres('audit: what a turn sees, on PostgreSQL', () => {
  let side: Side;
  let pg: Awaited<ReturnType<typeof openPgTestStore>>;
  beforeAll(async () => {
    pg = await openPgTestStore();
    const kit = await startKit({ agents: [desk('desk', undefined)], model: scripted, store: pg.store });
    side = { ...sides[0]!, name: 'PostgreSQL', kit };
  });
  afterAll(async () => {
    await side?.kit.stop();
    await pg?.drop();
  });
  scenarios(() => side, 'PostgreSQL, strict scripted model');
});

describe('audit: the strict scripted model and the provider-shaped server refuse what providers refuse', () => {
  const request = (messages: ModelMessage[]): ModelRequest => ({
    model: 'scripted',
    instructions: '',
    dynamicInstructions: '',
    messages,
    tools: [],
    metadata: { turnId: 't', conversationId: 'c', agentName: 'a' },
  });
  const call: ModelMessage = {
    role: 'assistant',
    content: '',
    toolCalls: [{ id: 'call_q1', name: 'wire', arguments: {} }],
  };
  const signal = new AbortController().signal;

  it('audit: the scripted model refuses a call without its result, and a result without its call, with a non-retryable ModelError naming the call', async () => {
    const model = new ScriptedModel({ a: () => 'fine' });
    const missing = model.chat(
      request([{ role: 'user', content: 'q' }, call, { role: 'user', content: 'q2' }]),
      { signal },
    );
    await expect(missing).rejects.toBeInstanceOf(ModelError);
    await expect(missing).rejects.toMatchObject({
      retryable: false,
      message: 'scripted model: Tool result is missing for tool call call_q1.',
      details: { code: 'missing_tool_results', toolCallIds: ['call_q1'] },
    });
    const orphan = model.chat(
      request([
        { role: 'user', content: 'q' },
        { role: 'tool', content: '{}', toolCallId: 'call_x', toolName: 'wire' },
      ]),
      { signal },
    );
    await expect(orphan).rejects.toMatchObject({
      details: { code: 'unexpected_tool_result', toolCallIds: ['call_x'] },
    });
    const paired = request([
      { role: 'user', content: 'q' },
      call,
      { role: 'tool', content: '{}', toolCallId: 'call_q1', toolName: 'wire' },
    ]);
    expect((await model.chat(paired, { signal })).parts).toEqual([{ type: 'text', text: 'fine' }]);
    // The explicit opt-out, for a test that feeds a malformed history on purpose.
    const lax = new ScriptedModel({ a: () => 'lax' }, { strictToolPairing: false });
    expect((await lax.chat(request([call]), { signal })).parts).toEqual([{ type: 'text', text: 'lax' }]);
  });

  it('audit: the AI SDK raises AI_MissingToolResultsError before sending; the provider-shaped server answers an unmatched call with a 400', async () => {
    const sent = provider.received.length;
    const gw = createOpenAICompatible({ name: 'gw', baseURL: provider.baseURL, apiKey: 'sk-local' });
    const refused = generateText({
      model: gw('strict'),
      messages: [
        { role: 'user', content: 'q' },
        {
          role: 'assistant',
          content: [{ type: 'tool-call', toolCallId: 'call_q1', toolName: 'wire', input: {} }],
        },
        { role: 'user', content: 'q2' },
      ],
    });
    await expect(refused).rejects.toSatisfy((error) => MissingToolResultsError.isInstance(error));
    await expect(refused).rejects.toMatchObject({
      name: 'AI_MissingToolResultsError',
      toolCallIds: ['call_q1'],
    });
    expect(provider.received.length).toBe(sent);
    // Sent anyway (raw), the server refuses it as the provider does.
    const response = await fetch(`${provider.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'strict',
        messages: [
          { role: 'user', content: 'q' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'call_q1', type: 'function', function: { name: 'wire', arguments: '{}' } }],
          },
          { role: 'user', content: 'q2' },
        ],
      }),
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain('call_q1');
    expect(wirePairingError([{ role: 'tool', tool_call_id: 'call_z' }])).toContain('call_z');
  });
});
