/**
 * Every way a turn workflow is started (the client, a parent's child start, a conversation's
 * lane) builds its options with `turnStartOptions`: on the real dev server, each turn is
 * found by agent, conversation, root and status, and carries a summary.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { TurnRecord } from '../../src/store/types.js';
import {
  TURNKIT_AGENT,
  TURNKIT_CONVERSATION_ID,
  TURNKIT_ROOT_TURN_ID,
  TURNKIT_STATUS,
  turnWorkflowId,
} from '../../src/workflows/contract.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

const helper = defineAgent({ name: 'helper', description: 'Helps.' });
const model = new ScriptedModel({
  lead: (request) =>
    request.messages.some((message) => message.role === 'tool')
      ? 'led'
      : { toolCalls: [{ name: 'helper', arguments: { task: 'help out' } }] },
  helper: () => 'helped',
  chat: () => 'chatted',
});

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [defineAgent({ name: 'lead', subAgents: [helper] }), defineAgent({ name: 'chat' })],
    model,
  });
});
afterAll(async () => kit?.stop());

/** What the Temporal server says about the turn's workflow. */
async function described(turn: TurnRecord) {
  const description = await kit.client.temporal.workflow.getHandle(turnWorkflowId(turn.id)).describe();
  const attributes = description.typedSearchAttributes;
  return {
    agent: attributes.get(TURNKIT_AGENT),
    conversationId: attributes.get(TURNKIT_CONVERSATION_ID),
    rootTurnId: attributes.get(TURNKIT_ROOT_TURN_ID),
    status: attributes.get(TURNKIT_STATUS),
    summary: await description.staticSummary(),
    details: await description.staticDetails(),
  };
}

function expected(turn: TurnRecord, summary: string) {
  const tree = [`conversation \`${turn.conversationId}\``, `root \`${turn.rootTurnId}\``];
  if (turn.parentTurnId) tree.push(`parent \`${turn.parentTurnId}\``);
  return {
    agent: turn.agentName,
    conversationId: turn.conversationId,
    rootTurnId: turn.rootTurnId,
    status: 'completed',
    summary,
    // The static details (markdown) name the agent, the turn, its place in the tree and the task.
    details: [
      `**agent** \`${turn.agentName}\` · **turn** \`${turn.id}\``,
      tree.join(' · '),
      `> ${summary.slice(turn.agentName.length + 2)}`,
    ].join('\n\n'),
  };
}

describe('search attributes on every start path', () => {
  it('client: a run carries agent, conversation, root, status and its task as summary', async () => {
    const run = await kit.client.run('lead', 'lead the   work');
    await run.result();
    const turn = await kit.store.loadTurn(run.turnId);
    expect(await described(turn)).toEqual(expected(turn, 'lead: lead the work'));
  });

  it('child: a sub-agent turn carries its own agent and conversation, its root, status and a summary', async () => {
    const run = await kit.client.run('lead', 'delegate');
    await run.result();
    const [child] = await kit.store.listTurns({ parentTurnId: run.turnId });
    expect(child).toBeDefined();
    expect(child!.rootTurnId).toBe(run.turnId);
    expect(await described(child!)).toEqual(expected(child!, `helper: sub-agent of ${run.turnId}`));
  });

  it('lane: a turn started by a message to an idle conversation carries them all, summary its message', async () => {
    const idle = await kit.client.conversation('chat');
    await kit.client.sendMessage(idle.id, 'wake up, please', { key: 'start-paths-lane' });
    await waitUntil(async () =>
      (await kit.store.listTurns({ conversationId: idle.id })).some((turn) => turn.status === 'completed'),
    );
    const [turn] = await kit.store.listTurns({ conversationId: idle.id });
    await waitUntil(async () => (await described(turn!)).status === 'completed');
    expect(await described(turn!)).toEqual(expected(turn!, 'chat: wake up, please'));
  });
});
