import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ArgumentError } from '../../src/errors.js';
import type { ModelClient } from '../../src/models/types.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const aborted: { agent: string; at: number }[] = [];
let lateToolFinished = 0;

// A model that blocks until aborted, except for agents that first ask for the slow tool.
const model: ModelClient = {
  async chat(request, { signal }) {
    const agent = request.metadata.agentName;
    if (agent === 'tooling' && !request.messages.some((m) => m.role === 'tool')) {
      return {
        parts: [{ type: 'tool_call', id: 'call_slow', name: 'slow', arguments: {} }],
        usage: { inputTokens: 1, outputTokens: 1 },
      };
    }
    if (agent === 'quick')
      return { parts: [{ type: 'text', text: 'quick answer' }], usage: { inputTokens: 1, outputTokens: 1 } };
    return new Promise((_, reject) => {
      signal.addEventListener('abort', () => {
        aborted.push({ agent, at: Date.now() });
        reject(signal.reason ?? new Error('aborted'));
      });
    });
  },
};

// Ignores its abort signal on purpose: its late result must still be dropped.
const slow = defineTool({
  name: 'slow',
  description: 'Takes a while.',
  input: z.object({}),
  execute: async () => {
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    lateToolFinished += 1;
    return { late: true };
  },
});

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [
      defineAgent({ name: 'blocked' }),
      defineAgent({ name: 'tooling', tools: [slow] }),
      defineAgent({ name: 'quick' }),
    ],
    model,
    runtime: {
      authorization: (request) =>
        request.action !== 'cancel' || (request.principal as { role?: string } | null)?.role === 'owner',
    },
  });
});
afterAll(async () => kit?.stop());

async function waitFor(predicate: () => Promise<boolean>, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function modelRequested(run: RunHandle) {
  return (await run.events()).some((e) => e.type === 'model.requested');
}

describe('cancellation by workflow signal', () => {
  it('BG-30 cancel during a blocked model call aborts the request and ends the turn cancelled with no output', async () => {
    const run = await kit.client.run('blocked', 'Block');
    await waitFor(() => modelRequested(run));
    const sent = Date.now();
    await run.cancel({ principal: { role: 'owner' } });
    const turn = await run.result();
    expect(turn.status).toBe('cancelled');
    expect(turn.outputText).toBeNull();
    expect(turn.claimToken).toBeNull();
    expect(turn.error).toEqual({ class: 'TurnKit::Cancelled', message: 'cancelled by application' });
    // The abort reaches the activity with its next heartbeat; the turn does not wait for it.
    await waitFor(async () => aborted.some((a) => a.agent === 'blocked'), 5_000);
    const abort = aborted.find((a) => a.agent === 'blocked');
    expect(abort!.at - sent).toBeGreaterThanOrEqual(0);
    expect((await run.events()).map((e) => e.type)).toContain('turn.cancelled');
  });

  it('BG-42 a tool blocked while its turn is cancelled cannot append its late result; the execution is interrupted and the call still has one result', async () => {
    const run = await kit.client.run('tooling', 'Use the slow tool');
    await waitFor(async () => (await run.toolExecutions()).some((e) => e.status === 'running'));
    await run.cancel({ principal: { role: 'owner' } });
    const turn = await run.result();
    expect(turn.status).toBe('cancelled');
    await waitFor(async () => lateToolFinished > 0, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    const [execution] = await run.toolExecutions();
    expect(execution!.status).toBe('interrupted');
    const results = (await run.transcript()).filter((m) => m.kind === 'tool_result');
    expect(results).toHaveLength(1);
    expect(results[0]!.metadata['interrupted']).toBe(true);
  });

  it('a cancel from a principal without permission is recorded as denied and the turn goes on', async () => {
    const run = await kit.client.run('blocked', 'Block again');
    await waitFor(() => modelRequested(run));
    await run.cancel({ principal: { role: 'intruder' } });
    await waitFor(async () => (await run.events()).some((e) => e.type === 'cancel.denied'));
    expect(await run.status()).toBe('running');
    await run.cancel({ principal: { role: 'owner' } });
    expect((await run.result()).status).toBe('cancelled');
  });

  it('a malformed cancel payload sent as a raw signal is rejected and recorded; the turn is unaffected', async () => {
    const run = await kit.client.run('blocked', 'Block once more');
    await waitFor(() => modelRequested(run));
    await kit.client.temporal.workflow
      .getHandle(run.workflowId)
      .signal('cancel', { descendants: 'everything' });
    await waitFor(async () => (await run.events()).some((e) => e.type === 'cancel.rejected'));
    expect(await run.status()).toBe('running');
    await expect(kit.client.cancel(run.turnId, { descendants: 'sideways' as never })).rejects.toBeInstanceOf(
      ArgumentError,
    );
    await run.cancel({ principal: { role: 'owner' }, descendants: 'cascade' });
    expect((await run.result()).status).toBe('cancelled');
  });

  it('cancelling a finished turn is a no-op', async () => {
    const run = await kit.client.run('quick', 'Answer');
    expect((await run.result()).status).toBe('completed');
    await run.cancel({ principal: { role: 'owner' } });
    expect(await run.status()).toBe('completed');
  });
});
