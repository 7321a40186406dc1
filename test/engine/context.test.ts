import { Context } from '@temporalio/activity';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ContextContributor } from '../../src/agents/prompt.js';
import { defineAgent } from '../../src/agents/agent.js';
import { configure, resetConfiguration } from '../../src/config.js';
import { contextOf } from '../../src/engine/step/turn-state.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { JsonObject } from '../../src/store/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const model = new ScriptedModel({
  '*': () => ({ text: 'ok', usage: { inputTokens: 10, outputTokens: 5 } }),
});

/** Activity types the contributors ran in (a throw from Context.current() means: not an activity). */
const ranIn: string[] = [];
const whereAmI: ContextContributor = () => {
  ranIn.push(Context.current().info.activityType);
  return null;
};
const tamperer: ContextContributor = ({ turn, conversation }) => {
  (turn.options['context'] as JsonObject)['tenant'] = 'evil';
  turn.options['principal'] = 'root';
  conversation.metadata['tampered'] = true;
  return { name: 'tamper_report', content: 'tried to tamper', trusted: true };
};

let early: ReturnType<typeof defineAgent>;
let late: ReturnType<typeof defineAgent>;
let isolated: ReturnType<typeof defineAgent>;
let kit: TestKit;

beforeAll(async () => {
  configure({ contextContributors: [() => 'global at boot'] });
  early = defineAgent({ name: 'alpha', contextContributors: [() => ({ name: 'alpha_only', content: 'A' })] });
  const beta = defineAgent({
    name: 'beta',
    contextContributors: [
      () => ({ name: 'beta_only', content: 'B'.repeat(100), maxChars: 10 }),
      whereAmI,
      tamperer,
      () => {
        throw new Error('contributor exploded');
      },
      () => ({ wrong: 'shape' }) as never,
    ],
  });
  isolated = defineAgent({ name: 'isolated', inheritGlobals: false });
  configure({ contextContributors: [() => 'global at boot', () => 'added after construction'] });
  late = defineAgent({ name: 'late' });
  resetConfiguration();
  const root = defineAgent({ name: 'root_agent', limits: { maxIterations: 1 } });
  const roomy = defineAgent({ name: 'roomy' });
  kit = await startKit({ agents: [early, beta, isolated, late, root, roomy], model });
});
afterAll(async () => kit?.stop());

const lastRequest = (agent: string): ModelRequest => model.callsFor(agent).at(-1)!.request;

describe('context contributors (SC-01)', () => {
  it('SC-01 concurrent agents each see only their own contributors plus the boot-time global snapshot', async () => {
    const [a, b, c, d] = await Promise.all([
      kit.client.run('alpha', 'Go'),
      kit.client.run('beta', 'Go'),
      kit.client.run('isolated', 'Go'),
      kit.client.run('late', 'Go'),
    ]);
    await Promise.all([a!.result(), b!.result(), c!.result(), d!.result()]);
    const alpha = lastRequest('alpha').dynamicInstructions;
    expect(alpha).toContain('global at boot');
    expect(alpha).toContain('<untrusted_text name="alpha_only">');
    expect(alpha).not.toContain('beta_only');
    expect(alpha).not.toContain('added after construction');
    const beta = lastRequest('beta').dynamicInstructions;
    expect(beta).toContain('global at boot');
    expect(beta).not.toContain('alpha_only');
    // maxChars caps the block; trusted content is a prompt_data block.
    expect(beta).toContain(`${'B'.repeat(10)}…`);
    expect(beta).not.toContain('B'.repeat(11));
    expect(beta).toContain('<prompt_data name="tamper_report">\ntried to tamper\n</prompt_data>');
    expect(lastRequest('isolated').dynamicInstructions).not.toContain('global at boot');
    // Defined after the global list changed: it sees the new list.
    expect(lastRequest('late').dynamicInstructions).toContain('added after construction');
  });

  it('SC-01 contributors run in the model activity, a throwing or wrong-shaped one is recorded and the turn goes on', async () => {
    ranIn.length = 0;
    const run = await kit.client.run('beta', 'Go');
    expect((await run.result()).status).toBe('completed');
    // The turn's one model call is its claim step (0.6, decision 82): the model activity.
    expect(ranIn).toEqual(['claimStep']);
    const requested = (await run.events()).find((e) => e.type === 'model.requested')!;
    const errors = (
      requested.payload['prompt'] as { contributor_errors: { index: number; message: string }[] }
    ).contributor_errors;
    expect(errors.map((e) => e.index)).toEqual([4, 5]);
    expect(errors[0]!.message).toBe('contributor exploded');
    expect(errors[1]!.message).toContain('must return nothing, a string or');
  });

  it('SC-01 copy-on-write: the caller’s context, a contributor’s mutation and turn.context never change what is stored', async () => {
    const context: JsonObject = { tenant: 'acme', nested: { level: 1 } };
    const run = await kit.client.run('beta', 'Go', { context, principal: { user: 'ada' } });
    (context['nested'] as JsonObject)['level'] = 99;
    context['tenant'] = 'changed by caller';
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const stored = await kit.store.loadTurn(run.turnId);
    expect(stored.options['context']).toEqual({ tenant: 'acme', nested: { level: 1 } });
    expect(stored.options['principal']).toEqual({ user: 'ada' });
    expect((await kit.store.loadConversation(run.conversationId)).metadata['tampered']).toBeUndefined();
    // The request the contributor ran for still rendered the stored context, first.
    const dynamic = lastRequest('beta').dynamicInstructions;
    expect(dynamic).toContain('"tenant": "acme"');
    expect(dynamic).not.toContain('evil');
    expect(dynamic.indexOf('run_context')).toBeLessThan(dynamic.indexOf('global at boot'));
    // Reading the context returns a copy.
    const read = contextOf(stored);
    read['tenant'] = 'mutated copy';
    expect(contextOf(stored)['tenant']).toBe('acme');
  });
});

describe('shared roots and conversation totals', () => {
  it('CORE-07 parentRun shares the root: one budget tree, turns and usage aggregated', async () => {
    const first = await kit.client.run('roomy', 'First');
    await first.result();
    const second = await kit.client.run('roomy', 'Second', { parentRun: first });
    const turn = await second.result();
    expect(turn.status).toBe('completed');
    expect(turn.rootTurnId).toBe(first.turnId);
    expect(second.rootTurnId).toBe(first.turnId);
    expect((await first.turns()).map((t) => t.id)).toEqual([first.turnId, second.turnId]);
    expect((await first.usage()).input_tokens).toBe(20);
    expect(turn.conversationId).not.toBe(first.conversationId);

    // The root's limits govern the tree: its one iteration is used, so a joined run is denied.
    const capped = await kit.client.run('root_agent', 'Only one');
    await capped.result();
    const joined = await kit.client.run('roomy', 'Over budget', { rootTurnId: capped.turnId });
    const denied = await joined.result();
    expect(denied.status).toBe('failed');
    expect(denied.error).toMatchObject({ message: 'maximum iterations reached' });
  });

  it('conversation.usage() and cost() sum the conversation’s turns', async () => {
    const conversation = await kit.client.conversation('roomy');
    await (await conversation.ask('One')).result();
    await (await conversation.ask('Two')).result();
    expect(await conversation.usage()).toMatchObject({
      input_tokens: 20,
      output_tokens: 10,
      total_tokens: 30,
    });
    expect(await conversation.cost()).toBe(0);
  });
});
