/**
 * A Temporal reset supersedes a turn's workflow run (issue 5, fencing): the new run takes the
 * turn over from its committed phase and finishes it, while every write of the old run —
 * here a tool that was still running in the old run's activity — fails with LostClaim.
 * Both reset points the Temporal UI offers are covered: the first workflow task (the claim
 * runs again) and the last one (the claim is replayed, and the first write fails).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import { OUTCOME_UNKNOWN } from '../../src/engine/step/result-texts.js';
import type { ModelClient } from '../../src/models/types.js';
import type { JsonObject } from '../../src/store/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { resetWorkflow } from '../helpers/reset.js';
import { requireTemporal } from '../helpers/temporal.js';
import { gate, waitUntil } from '../helpers/wait.js';

const temporalUp = await requireTemporal();

/** Per run (the prompt names it): the hold tool's gate, its calls and its returns. */
const holds = new Map<string, { gate: ReturnType<typeof gate>; calls: number; returned: number }>();

const hold = defineTool({
  name: 'hold',
  description: 'Holds until the test lets it go; ignores its abort signal on purpose.',
  input: z.object({ key: z.string() }),
  execute: async ({ key }) => {
    const entry = holds.get(key)!;
    entry.calls += 1;
    await entry.gate.promise;
    entry.returned += 1;
    return { held: key };
  },
});

const modelCalls: string[] = [];
/** `holder` calls the hold tool, `delegator` its `holder` sub-agent; both then answer. */
const model: ModelClient = {
  async chat(request) {
    const agent = request.metadata.agentName;
    // The user message is "Task:\n<key>" (the sub-agent's task is the key itself).
    const key = request.messages
      .find((m) => m.role === 'user')!
      .content.split('\n')
      .pop()!;
    modelCalls.push(`${agent}:${key}`);
    const usage = { inputTokens: 1, outputTokens: 1 };
    if (!request.messages.some((m) => m.role === 'tool')) {
      const call: { name: string; arguments: JsonObject } =
        agent === 'delegator'
          ? { name: 'holder', arguments: { task: key } }
          : { name: 'hold', arguments: { key } };
      return { parts: [{ type: 'tool_call', id: `call_${modelCalls.length}`, ...call }], usage };
    }
    return { parts: [{ type: 'text', text: `${agent} finished` }], usage };
  },
};
const holder = defineAgent({ name: 'holder', tools: [hold] });

describe.skipIf(!temporalUp)('a reset supersedes the turn’s workflow run', () => {
  let kit: TestKit;
  beforeAll(async () => {
    kit = await startKit({
      agents: [holder, defineAgent({ name: 'delegator', subAgents: [holder] })],
      model,
    });
  });
  afterAll(async () => {
    for (const entry of holds.values()) entry.gate.open();
    await kit?.stop();
  });

  const holdRunning = async (run: RunHandle) =>
    (await run.toolExecutions()).some((e) => e.toolName === 'hold' && e.status === 'running');

  async function expectRuns(run: RunHandle, runs: { oldRunId: string; newRunId: string }, reclaims = 1) {
    const workflows = kit.client.temporal.workflow;
    const status = async (runId: string) =>
      (await workflows.getHandle(run.workflowId, runId).describe()).status.name;
    expect(await status(runs.oldRunId)).toBe('TERMINATED');
    expect(await status(runs.newRunId)).toBe('COMPLETED');
    expect((await run.events()).filter((e) => e.type === 'turn.reclaimed')).toHaveLength(reclaims);
  }

  describe.each(['first', 'last'] as const)('reset to the %s workflow task', (point) => {
    it(`BG-21 while a tool runs: the new run takes the turn over from its tools phase; the old run’s late tool result is refused (LostClaim)`, async () => {
      const key = `reset-${point}-${randomUUID()}`;
      holds.set(key, { gate: gate(), calls: 0, returned: 0 });
      const run = await kit.client.run('holder', key);
      await waitUntil(() => holdRunning(run));
      const runs = await resetWorkflow(kit.client.temporal, run.workflowId, point);
      const turn = await run.result();
      // Only now does the old run's tool return: its result must not land.
      holds.get(key)!.gate.open();
      await waitUntil(async () => holds.get(key)!.returned === 1);
      await new Promise((resolve) => setTimeout(resolve, 1_500));

      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('holder finished');
      // The hold tool ran once, in the old run; the new run marked it interrupted, never re-ran it.
      expect(holds.get(key)!.calls).toBe(1);
      expect((await run.toolExecutions()).map((e) => [e.toolName, e.status])).toEqual([
        ['hold', 'interrupted'],
      ]);
      const messages = await run.transcript();
      const results = messages.filter((m) => m.kind === 'tool_result');
      expect(results).toHaveLength(1);
      expect(JSON.stringify(results[0]!.content)).toContain(OUTCOME_UNKNOWN);
      expect(JSON.stringify(messages)).not.toContain('"held"');
      // One model call per run: the old run's committed response was not asked for again.
      expect(modelCalls.filter((c) => c === `holder:${key}`)).toHaveLength(2);
      expect(messages.filter((m) => m.role === 'assistant')).toHaveLength(2);
      await expectRuns(run, runs);
    }, 60_000);

    it(`BG-21 while waiting on a sub-agent: the new run resumes the waiting turn, follows the same child and completes with its result`, async () => {
      const key = `reset-wait-${point}-${randomUUID()}`;
      holds.set(key, { gate: gate(), calls: 0, returned: 0 });
      const run = await kit.client.run('delegator', key);
      await waitUntil(async () => (await run.turn()).status === 'waiting');
      const [child] = await kit.store.listTurns({ parentTurnId: run.turnId });
      await waitUntil(async () => (await kit.store.listToolExecutions({ turnId: child!.id })).length > 0);
      const runs = await resetWorkflow(kit.client.temporal, run.workflowId, point);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      holds.get(key)!.gate.open();
      const turn = await run.result();

      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('delegator finished');
      const children = await kit.store.listTurns({ parentTurnId: run.turnId });
      expect(children.map((c) => [c.id, c.status])).toEqual([[child!.id, 'completed']]);
      expect(holds.get(key)!.calls).toBe(1);
      const results = (await run.transcript()).filter(
        (m) => m.turnId === run.turnId && m.kind === 'tool_result',
      );
      expect(results).toHaveLength(1);
      expect(JSON.stringify(results[0]!.content)).toContain('holder finished');
      expect(modelCalls.filter((c) => c === `delegator:${key}`)).toHaveLength(2);
      // Replayed past the suspension (claim cleared), the new run needs no take-over: it resumes.
      await expectRuns(run, runs, point === 'first' ? 1 : 0);
    }, 60_000);
  });
});
