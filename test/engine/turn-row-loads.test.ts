/**
 * How often each activity of the bench turn (a root; model → one terminal tool → output)
 * reads its own turn row (issue 29): driven in the workflow's order against the memory store,
 * without a server. Each activity opens its turn once; every write block reads the row once
 * more, under the root lock, and that read is the fence check.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import { claimTurn, claimTurnRow } from '../../src/engine/claim/claim.js';
import { BudgetError } from '../../src/errors.js';
import { buildTurn } from '../../src/engine/lane/build-turn.js';
import { runModelStep } from '../../src/engine/model/model-step.js';
import { runOutputStep } from '../../src/engine/output/output-step.js';
import { Runtime } from '../../src/engine/runtime.js';
import { runToolCall } from '../../src/engine/tools/tool-call.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { Store } from '../../src/store/types.js';

const finish = defineTool({
  name: 'finish',
  description: 'Ends the turn.',
  input: z.object({ answer: z.string() }),
  terminal: true,
  execute: ({ answer }) => ({ result: answer }),
});
const agent = defineAgent({ name: 'bench', tools: [finish] });

/** The memory store, counting `loadTurn(turnId)` of one turn. */
function counting(base: MemoryStore, turnId: () => string | null) {
  const count = { loads: 0 };
  const store = new Proxy(base, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      if (property !== 'loadTurn') return (value as (...args: unknown[]) => unknown).bind(target);
      return (id: string) => {
        if (id === turnId()) count.loads += 1;
        return target.loadTurn(id);
      };
    },
  }) as Store;
  return { store, count };
}

async function benchTurn(turnAgent = agent) {
  let turnId: string | null = null;
  const { store, count } = counting(new MemoryStore(), () => turnId);
  const model = new ScriptedModel({
    bench: () => ({ toolCalls: [{ name: 'finish', arguments: { answer: '42' } }] }),
  });
  const runtime = new Runtime({
    store,
    agents: new AgentRegistry([turnAgent]),
    model,
    defaultModel: 'scripted',
  });
  const conversation = await store.createConversation({ agentName: 'bench' });
  const message = await store.appendMessage({
    conversationId: conversation.id,
    role: 'user',
    content: 'What is the answer?',
  });
  const turn = await buildTurn(store, turnAgent, conversation.id, message, { submit: true });
  turnId = turn.id;
  return { runtime, store, count, turnId: turn.id };
}

describe('row loads of the bench turn', () => {
  it('claim 2, model step 3, output step 2: each activity opens its turn once and reads it once per write block', async () => {
    const { runtime, store, count, turnId } = await benchTurn();
    const claimToken = 'r'.repeat(32);
    const signal = new AbortController().signal;
    const loads: Record<string, number> = {};
    const activity = async <T>(name: string, run: () => Promise<T>): Promise<T> => {
      const before = count.loads;
      const result = await run();
      loads[name] = count.loads - before;
      return result;
    };

    const claim = await activity('claim', () =>
      claimTurn(runtime, turnId, claimToken, { supersede: true, taskHistoryLength: 5 }),
    );
    expect(claim.claimed).toBe(true);
    const model = await activity('model', () =>
      runModelStep(
        runtime,
        { turnId, claimToken, step: 'rrrr:1', compaction: true, maxProviderAttempts: 5 },
        { signal, heartbeat: () => undefined },
      ),
    );
    expect(model.phase).toBe('tools');
    const [call] = model.toolCalls;
    const tool = await activity('tool', () =>
      runToolCall(
        runtime,
        { turnId, claimToken, toolCallId: call!.id, close: { last: true } },
        { signal, heartbeat: () => undefined, maxAttempts: 3 },
      ),
    );
    expect(tool).toMatchObject({ status: 'completed' });
    const output = await activity('output', () =>
      runOutputStep(runtime, { turnId, claimToken, taskHistoryLength: 17 }),
    );
    expect(output).toMatchObject({ done: true, status: 'completed' });
    expect((await store.loadTurn(turnId)).outputText).toContain('42');

    console.log('turn row loads per activity', loads);
    expect(loads['claim']).toBeLessThanOrEqual(2);
    expect(loads['model']).toBeLessThanOrEqual(3);
    expect(loads['output']).toBeLessThanOrEqual(2);
  });

  it('claimStep (decision 88): the claim reserves the step it makes next, and the step reads its row only in its response block', async () => {
    const { runtime, store, count, turnId } = await benchTurn();
    const claimToken = 's'.repeat(32);
    const step = 'ssss:1';
    const input = { turnId, claimToken, step, compaction: true, maxProviderAttempts: 5 };
    const claimed = await claimTurnRow(runtime, turnId, claimToken, { reserveStep: input });
    expect(claimed.digest.claimed).toBe(true);
    // Committed with the claim: the iteration and the step it is for.
    const row = await store.loadTurn(turnId);
    expect(row.status).toBe('running');
    expect(row.options['state']).toMatchObject({ iterations: 1, reserved_step: step });
    expect(claimed.reserved?.iterations).toBe(1);
    // The call is opened in the claim's transaction: its event after the claim's, its step's
    // parts after the claim's status.
    expect(claimed.opened?.request.messages.at(-1)).toMatchObject({ role: 'user' });
    expect((await store.listEvents(turnId)).map((event) => event.type)).toEqual([
      'turn.started',
      'model.requested',
    ]);
    const parts = await store.listStreamParts(turnId);
    expect(parts.map((part) => part.type)).toEqual(['status', 'step.started']);
    expect(claimed.opened?.attempt).toBe(parts[1]!.sequence);

    const before = count.loads;
    const model = await runModelStep(
      runtime,
      input,
      { signal: new AbortController().signal, heartbeat: () => undefined },
      { turn: claimed.turn!, reserved: claimed.reserved!, opened: claimed.opened! },
    );
    expect(model).toMatchObject({ phase: 'tools', reused: false });
    expect(count.loads - before).toBe(1);
    // The step opened no call of its own.
    expect((await store.listEvents(turnId)).filter((event) => event.type === 'model.requested')).toHaveLength(
      1,
    );
    // Reserved once: the step did not take a second iteration.
    expect((await store.loadTurn(turnId)).options['state']).toMatchObject({
      iterations: 1,
      model_step: step,
    });
    expect((await store.budgetUsage(turnId)).iterations).toBe(1);
  });

  it('claimStep (decision 88): a budget that refuses the step leaves the claim committed without a reservation, and the step raises', async () => {
    const spent = defineAgent({ name: 'bench', tools: [finish], limits: { maxIterations: 0 } });
    const { runtime, store, turnId } = await benchTurn(spent);
    const claimToken = 't'.repeat(32);
    const claimed = await claimTurnRow(runtime, turnId, claimToken, {
      reserveStep: { turnId, claimToken, step: 'tttt:1' },
    });
    expect(claimed.digest.claimed).toBe(true);
    expect(claimed.reserved).toBeUndefined();
    expect(claimed.opened).toBeUndefined();
    const row = await store.loadTurn(turnId);
    expect(row.status).toBe('running');
    expect(row.options['state'] ?? {}).not.toHaveProperty('reserved_step');
    await expect(
      runModelStep(
        runtime,
        { turnId, claimToken, step: 'tttt:1' },
        { signal: new AbortController().signal, heartbeat: () => undefined },
        { turn: claimed.turn! },
      ),
    ).rejects.toThrow(BudgetError);
  });
});
