/**
 * Layer: Temporal dev server. Output checks are user code: they run in their own scheduled
 * activity (`outputAudit`), never inside the local output step, so its timeout bounds them.
 * What the checks decide is tested on the engine driver: output-checks.test.ts.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { Json } from '../../src/store/types.js';
import { connectClient } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const script = new ScriptedModel({
  asyncer: ['slow but fine'],
  hanger: ['never judged'],
  schemaStrict: () => 'no json at all',
});

const agents = [
  defineAgent({
    name: 'asyncer',
    outputPolicy: {
      check: async (output: Json) => {
        await sleep(300);
        return output === 'slow but fine' ? null : 'unexpected';
      },
    },
  }),
  defineAgent({
    name: 'hanger',
    outputConstraints: [async () => sleep(8_000).then(() => null)],
  }),
  defineAgent({ name: 'schemaStrict', outputSchema: z.object({ answer: z.number() }) }),
];

let kit: TestKit;

beforeAll(async () => {
  kit = await startKit({ agents, model: script });
});
afterAll(async () => kit?.stop());

describe('output checks on the Temporal dev server', () => {
  it('CORE-20 an async constraint runs in its own scheduled activity (outputAudit), not inside the local output step', async () => {
    const run = await kit.client.run('asyncer', 'Be slow');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(await run.policyAudit()).toEqual({ clean: true, violations: [] });
    const temporal = await connectClient();
    const history = await temporal.workflow.getHandle(run.workflowId).fetchHistory();
    const scheduled = (history.events ?? []).flatMap((event) => {
      const name = event.activityTaskScheduledEventAttributes?.activityType?.name;
      return name ? [name] : [];
    });
    expect(scheduled).toContain('outputAudit');
    // No checks, no audit activity: a plain turn keeps its two activities.
    const plain = await kit.client.run('schemaStrict', 'x');
    await plain.result();
    const plainHistory = await temporal.workflow.getHandle(plain.workflowId).fetchHistory();
    expect(
      (plainHistory.events ?? []).some(
        (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'outputAudit',
      ),
    ).toBe(false);
  });

  it('CORE-20 a constraint that never answers is bounded by the output activity timeout: the turn fails, it is not stuck', async () => {
    const client = new TurnKitClient({
      store: kit.store,
      agents: kit.agents,
      temporal: await connectClient(),
      taskQueue: kit.taskQueue,
      turnSettings: { output: { startToCloseTimeout: '2 seconds', maximumAttempts: 1 } },
    });
    const run = await client.run('hanger', 'Wait');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error!.message).toMatch(/timed out/);
    expect(turn.claimToken).toBeNull();
  });
});
