/**
 * Issue 48, the AG-UI door: `@ag-ui/client`'s HttpAgent against `createAgUiHandler`, the real
 * Temporal dev server and a SQLite store (only the model is scripted). A run streams the turn's
 * events; an approval finishes it with an interrupt, and a run with `resume` decides it and
 * streams the same turn to its end, with no event twice.
 */
import { HttpAgent } from '@ag-ui/client';
import type { BaseEvent, Interrupt } from '@ag-ui/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgUiHandler } from '../../src/protocols/ag-ui-endpoint.js';
import type { ProtocolBench } from '../helpers/protocol-kit.js';
import { bearer, charges, startProtocolBench } from '../helpers/protocol-kit.js';

let bench: Omit<ProtocolBench, 'base'>;
let base: string;

function agentFor(name: string, user: string | null = 'alice', threadId = `thread-${Math.random()}`) {
  return new HttpAgent({
    url: `${base}/agui/${name}`,
    headers: user ? { authorization: `Bearer ${user}` } : {},
    threadId,
    initialMessages: [{ id: `m-${threadId}`, role: 'user', content: 'Charge the card.' }],
  });
}

async function runWith(agent: HttpAgent, parameters: Parameters<HttpAgent['runAgent']>[0] = {}) {
  const events: BaseEvent[] = [];
  const result = await agent.runAgent(parameters, { onEvent: ({ event }) => void events.push(event) });
  return { events, result, types: events.map((e) => e.type) };
}

async function raw(path: string, body: string, user: string | null = 'alice') {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(user ? { authorization: `Bearer ${user}` } : {}) },
    body,
  });
  return { status: response.status, body: await response.text() };
}

beforeAll(async () => {
  bench = await startProtocolBench();
  const served = await bench.serve({
    '/agui': createAgUiHandler({ client: bench.client, authenticate: bearer, maxBodyBytes: 64 * 1024 }),
  });
  base = served.base;
});
afterAll(async () => {
  await bench?.stop();
});

describe('protocols: the AG-UI endpoint', { timeout: 180_000 }, () => {
  it("protocols: a run streams the turn's text, tool call and result, steps, and finishes", async () => {
    const { types, events, result } = await runWith(agentFor('pr_echo'));
    expect(types[0]).toBe('RUN_STARTED');
    expect(types.at(-1)).toBe('RUN_FINISHED');
    expect(types).toEqual(
      expect.arrayContaining([
        'STEP_STARTED',
        'TOOL_CALL_START',
        'TOOL_CALL_ARGS',
        'TOOL_CALL_END',
        'TOOL_CALL_RESULT',
        'TEXT_MESSAGE_START',
        'TEXT_MESSAGE_CONTENT',
        'TEXT_MESSAGE_END',
        'STEP_FINISHED',
      ]),
    );
    const text = events
      .filter((e) => e.type === 'TEXT_MESSAGE_CONTENT')
      .map((e) => (e as unknown as { delta: string }).delta)
      .join('');
    expect(text).toBe('Durable execution keeps agents alive.');
    const { turnId, conversationId } = result.result as { turnId: string; conversationId: string };
    expect(await bench.kit.store.loadTurn(turnId)).toMatchObject({
      status: 'completed',
      conversationId,
      options: { principal: { user: 'alice' } },
    });
  });

  it('protocols: an approval finishes the run with an interrupt, and a run with resume decides it and completes', async () => {
    const agent = agentFor('pr_gate');
    const first = await runWith(agent);
    const finished = first.events.at(-1) as { outcome?: { type: string; interrupts: Interrupt[] } };
    expect(finished.outcome?.type).toBe('interrupt');
    const [interrupt] = finished.outcome!.interrupts;
    expect(interrupt).toMatchObject({ reason: 'tool_approval', metadata: { toolName: 'charge_card' } });
    expect(agent.pendingInterrupts.map((i) => i.id)).toEqual([interrupt!.id]);
    const before = charges.length;

    const second = await runWith(agent, {
      resume: [{ interruptId: interrupt!.id, status: 'resolved', payload: { approved: true } }],
    });
    expect(second.types[0]).toBe('RUN_STARTED');
    expect(second.types.at(-1)).toBe('RUN_FINISHED');
    expect((second.events.at(-1) as { outcome?: unknown }).outcome).toBeUndefined();
    const text = second.events
      .filter((e) => e.type === 'TEXT_MESSAGE_CONTENT')
      .map((e) => (e as unknown as { delta: string }).delta)
      .join('');
    expect(text).toBe('The card was charged.');
    expect(charges.slice(before)).toEqual([42]);
    // No event of the first run comes again: each tool call starts once over both runs.
    const starts = [...first.events, ...second.events].filter((e) => e.type === 'TOOL_CALL_START');
    expect(new Set(starts.map((e) => (e as unknown as { toolCallId: string }).toolCallId)).size).toBe(
      starts.length,
    );
    const { turnId } = second.result.result as { turnId: string };
    expect((await bench.kit.store.loadTurn(turnId)).status).toBe('completed');
  });

  it("protocols: a run without credentials is refused, and another principal's interrupt is not found", async () => {
    const before = await bench.turnCount();
    await expect(runWith(agentFor('pr_echo', null))).rejects.toThrow(/401/);
    expect(await bench.turnCount()).toBe(before);
    const alice = agentFor('pr_gate');
    const first = await runWith(alice);
    const [interrupt] = (first.events.at(-1) as unknown as { outcome: { interrupts: Interrupt[] } }).outcome
      .interrupts;
    const resume = (id: string) =>
      JSON.stringify({
        threadId: 't',
        runId: 'r',
        messages: [],
        tools: [],
        context: [],
        resume: [{ interruptId: id, status: 'resolved', payload: { approved: true } }],
      });
    const foreign = await raw('/agui/pr_gate', resume(interrupt!.id), 'bob');
    const unknown = await raw('/agui/pr_gate', resume('turn_nope~call_x~'), 'bob');
    expect(foreign).toEqual({ status: 404, body: JSON.stringify({ error: 'not found' }) });
    expect(unknown).toEqual(foreign);
    expect((await bench.kit.store.loadTurn(interrupt!.id.split('~')[0]!)).status).not.toBe('completed');
    await runWith(alice, { resume: [{ interruptId: interrupt!.id, status: 'cancelled' }] });
  });

  it('protocols: bad inputs get an HTTP error and write nothing', async () => {
    const before = await bench.turnCount();
    expect((await raw('/agui/pr_echo', '{"threadId": ')).status).toBe(400);
    expect(await raw('/agui/pr_echo', '{"threadId": "t"}')).toMatchObject({
      status: 400,
      body: expect.stringContaining('not a RunAgentInput'),
    });
    const input = { threadId: 't', runId: 'r', messages: [{ id: 'm', role: 'user', content: 'hi' }] };
    expect((await raw('/agui/pr_nobody', JSON.stringify(input))).status).toBe(404);
    const huge = { ...input, messages: [{ id: 'm', role: 'user', content: 'x'.repeat(70_000) }] };
    expect((await raw('/agui/pr_echo', JSON.stringify(huge))).status).toBe(413);
    expect(
      (
        await raw(
          '/agui/pr_echo',
          JSON.stringify({ ...input, resume: [{ interruptId: 'x', status: 'resolved' }] }),
        )
      ).status,
    ).toBe(400);
    expect(await bench.turnCount()).toBe(before);
  });
});
