/**
 * repair: a coordination call whose worker died after the call committed, and before the
 * activity reported (issue 27: the lost lane wake-up the chaos suite met). The workflow wakes
 * a `send_message` destination's lane, and starts a `launch_agent` child's workflow, only from
 * the activity's outcome, so the retried attempt, which finds the execution finished, must
 * report them again. Driven in the workflow's order against the memory store, without a server.
 */
import { describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { launchAgentTool, sendMessageTool } from '../../src/agents/coordination.js';
import type { Agent } from '../../src/agents/agent.js';
import type { JsonObject } from '../../src/store/types.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { claimTurn } from '../../src/engine/claim/claim.js';
import { buildTurn } from '../../src/engine/lane/build-turn.js';
import { runModelStep } from '../../src/engine/model/model-step.js';
import { Runtime } from '../../src/engine/runtime.js';
import { runToolCall } from '../../src/engine/tools/tool-call.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { MemoryStore } from '../../src/store/memory-store.js';

/** A turn of `agent` whose model calls `tool` once, claimed and through its model step. */
async function atToolCall(store: MemoryStore, agents: Agent[], tool: string, args: JsonObject) {
  const [agent] = agents;
  const model = new ScriptedModel({
    [agent!.name]: () => ({ toolCalls: [{ name: tool, arguments: args }] }),
  });
  const runtime = new Runtime({ store, agents: new AgentRegistry(agents), model, defaultModel: 'scripted' });
  const conversation = await store.createConversation({ agentName: agent!.name });
  const message = await store.appendMessage({
    conversationId: conversation.id,
    role: 'user',
    content: 'Go.',
  });
  const turnId = (await buildTurn(store, agent!, conversation.id, message, { submit: true })).id;
  const claimToken = 'm'.repeat(32);
  const hooks = { signal: new AbortController().signal, heartbeat: () => undefined, maxAttempts: 3 };
  expect((await claimTurn(runtime, turnId, claimToken, { supersede: true })).claimed).toBe(true);
  const step = await runModelStep(
    runtime,
    { turnId, claimToken, step: 'mmmm:1', compaction: true, maxProviderAttempts: 5 },
    hooks,
  );
  const input = { turnId, claimToken, toolCallId: step.toolCalls[0]!.id, close: { last: true } };
  // One attempt, and the retry of an attempt whose worker died before the workflow heard of it.
  const attempt = () => runToolCall(runtime, input, hooks);
  return { conversation, attempt };
}

describe('repair: a coordination call retried after it committed', () => {
  it('send_message: the retry reports the destination lane’s wake again, and delivers nothing twice', async () => {
    const store = new MemoryStore();
    const listener = await store.createConversation({ agentName: 'messenger' });
    const agent = defineAgent({ name: 'messenger', tools: [sendMessageTool()] });
    const { conversation, attempt } = await atToolCall(store, [agent], 'send_message', {
      conversation_id: listener.id,
      text: 'hello',
    });

    const first = await attempt();
    expect(first).toMatchObject({ status: 'completed', wakeLanes: [listener.id] });
    const retry = await attempt();
    expect(retry).toMatchObject({
      status: 'completed',
      executionId: first.executionId,
      wakeLanes: [listener.id],
    });

    expect(await store.listDeliveries({ destinationConversationId: listener.id })).toHaveLength(1);
    const results = (await store.listMessages(conversation.id)).filter((m) => m.role === 'tool');
    expect(results).toHaveLength(1);
  });

  it('launch_agent: the retry reports the launched child again, and creates no second child', async () => {
    const store = new MemoryStore();
    const helper = defineAgent({ name: 'helper' });
    const boss = defineAgent({ name: 'boss', tools: [launchAgentTool({ agents: [helper] })] });
    const { attempt } = await atToolCall(store, [boss, helper], 'launch_agent', {
      agent_name: 'helper',
      task: 'Look into it.',
    });

    const first = await attempt();
    expect(first.launched).toMatchObject({ agent: 'helper' });
    const retry = await attempt();
    expect(retry.launched).toEqual(first.launched);
    expect((await store.listTurns({ agentName: 'helper' })).map((t) => t.id)).toEqual([
      first.launched!.turnId,
    ]);

    // A child that already ended is not reported: its workflow must not run a second time.
    await store.updateTurn(first.launched!.turnId, { status: 'completed' });
    const late = await attempt();
    expect(late).toMatchObject({ status: 'completed', executionId: first.executionId });
    expect(late.launched).toBeUndefined();
  });
});
