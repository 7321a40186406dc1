/**
 * A tool that throws because its attempt was aborted (a cancel, the turn's timeout, a worker
 * going away) has no outcome of its own: the runner records nothing, so the turn's end marks
 * the call interrupted ("outcome unknown") or a retry applies the tool's recovery. Engine
 * level on the memory store, so the order is fixed rather than left to a race between the
 * aborted activity and the workflow's repair.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import { Runtime } from '../../src/engine/runtime.js';
import { interruptOpen } from '../../src/engine/step/tool-results.js';
import { outcomeUnknown } from '../../src/engine/step/result-texts.js';
import { runToolCall } from '../../src/engine/tools/tool-call.js';
import { MemoryStore } from '../../src/store/memory-store.js';

let started: () => void = () => undefined;
const hang = defineTool({
  name: 'hang',
  description: 'Runs until aborted.',
  input: z.object({}),
  execute: (_args, { signal }) =>
    new Promise((_, reject) => {
      signal.addEventListener('abort', () => reject(new Error('aborted')));
      started();
    }),
});
const broken = defineTool({
  name: 'broken',
  description: 'Throws at once.',
  input: z.object({}),
  execute: () => {
    throw new Error('broken');
  },
});

async function turnCalling(name: string) {
  const store = new MemoryStore();
  const runtime = new Runtime({
    store,
    agents: new AgentRegistry([defineAgent({ name: 'a', tools: [hang, broken] })]),
  });
  const conversation = await store.createConversation({ agentName: 'a' });
  const turn = await store.createTurn({
    conversationId: conversation.id,
    agentName: 'a',
    options: { state: { phase: 'tools', parts: [{ type: 'tool_call', id: 'call_1', name, arguments: {} }] } },
  });
  await store.claimTurn(turn.id, { claimToken: 'token' });
  const controller = new AbortController();
  const outcome = runToolCall(
    runtime,
    { turnId: turn.id, claimToken: 'token', toolCallId: 'call_1' },
    { signal: controller.signal, heartbeat: () => undefined, maxAttempts: 1 },
  );
  const results = async () =>
    (await store.listMessages(conversation.id)).flatMap((m) =>
      m.content.filter((p) => p.type === 'tool_result'),
    );
  return { store, turn, controller, outcome, results };
}

describe('BG-42 an aborted tool attempt records no outcome of its own', () => {
  it('BG-42 a tool that throws because its attempt was aborted leaves its row running and appends no result; the turn end then marks it outcome unknown', async () => {
    const running = new Promise<void>((resolve) => (started = resolve));
    const { store, turn, controller, outcome, results } = await turnCalling('hang');
    await running;
    controller.abort(new Error('activity cancelled'));
    await expect(outcome).rejects.toThrow('aborted');
    const [row] = await store.listToolExecutions({ turnId: turn.id });
    expect(row!.status).toBe('running');
    expect(await results()).toEqual([]);

    const interrupted = await interruptOpen(store, await store.loadTurn(turn.id));
    expect(interrupted.map((r) => [r.toolCallId, r.status, r.error])).toEqual([
      ['call_1', 'interrupted', { message: outcomeUnknown('turn was cancelled') }],
    ]);
  });

  it('BG-42 contrast: a tool that throws while its attempt is not aborted fails its row, with one result the model reads', async () => {
    const { store, turn, outcome, results } = await turnCalling('broken');
    expect((await outcome).status).toBe('failed');
    const [row] = await store.listToolExecutions({ turnId: turn.id });
    expect(row!.error).toMatchObject({ message: 'broken' });
    expect(await results()).toHaveLength(1);
  });
});
