/**
 * The claim's takeover path (`supersede`) and the stale-task fence (review finding 20), at
 * the engine level on a SQLite file: a stale first workflow task of the run that paused the
 * turn must not flip it back to `running`; another run of the workflow (a reset's, or the
 * continued run of a continue-as-new) takes it over.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { claimTurn } from '../../src/engine/claim/claim.js';
import { Runtime } from '../../src/engine/runtime.js';
import { StaleTask } from '../../src/errors.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

let store: Store | null = null;
afterEach(async () => {
  await store?.close();
  store = null;
});

/** A turn the run with token `owner` paused at a boundary, its task mark at history 50. */
async function pausedTurn(status: 'paused' | 'waiting' = 'paused') {
  store = await openStore(tempSqliteUrl('supersede'));
  const runtime = new Runtime({
    store,
    agents: new AgentRegistry([defineAgent({ name: 'a' })]),
    model: new ScriptedModel({ a: () => 'ok' }),
  });
  const conversation = await store.createConversation({ agentName: 'a' });
  const turn = await store.createTurn({
    conversationId: conversation.id,
    agentName: 'a',
    options: {
      state: { phase: status === 'paused' ? 'model' : 'tools', task_mark: { token: 'owner', progress: 50 } },
    },
  });
  await store.claimTurn(turn.id, { claimToken: 'owner' });
  await store.claimTurn(turn.id, { from: 'running', to: status, claimToken: null });
  return { runtime, store, turnId: turn.id };
}

describe('claim takeover (supersede)', () => {
  it('long-lived: a stale task of the run that paused the turn gets StaleTask and the turn stays paused', async () => {
    const { runtime, store, turnId } = await pausedTurn();
    const stale = claimTurn(runtime, turnId, 'owner', { supersede: true, taskHistoryLength: 3 });
    await expect(stale).rejects.toBeInstanceOf(StaleTask);
    const row = await store.loadTurn(turnId);
    expect([row.status, row.claimToken]).toEqual(['paused', null]);
    expect((await store.listEvents(turnId)).map((e) => e.type)).not.toContain('turn.reclaimed');
  });

  it('long-lived: the live task of that run takes its own paused turn back (its pause step ran again after a lost worker)', async () => {
    const { runtime, store, turnId } = await pausedTurn();
    const claim = await claimTurn(runtime, turnId, 'owner', { supersede: true, taskHistoryLength: 60 });
    expect(claim.claimed).toBe(true);
    const row = await store.loadTurn(turnId);
    expect([row.status, row.claimToken]).toEqual(['running', 'owner']);
  });

  it('long-lived: another run of the workflow (reset, or continued as new) takes the turn over', async () => {
    const { runtime, store, turnId } = await pausedTurn('waiting');
    const claim = await claimTurn(runtime, turnId, 'next', { supersede: true, taskHistoryLength: 4 });
    expect(claim.claimed).toBe(true);
    const row = await store.loadTurn(turnId);
    expect([row.status, row.claimToken]).toEqual(['running', 'next']);
    expect((await store.listEvents(turnId)).map((e) => e.type)).toContain('turn.reclaimed');
  });
});
