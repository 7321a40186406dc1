/**
 * Layer: Temporal dev server, two workers in turn. Skills loaded before a worker went away
 * are still offered by the next one (BG-34). The other skill rules run on the engine driver:
 * skills.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { defineSkill } from '../../src/agents/skill.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import { tempSqliteUrl, temporalConnections } from '../helpers/turnkit.js';
import { gate } from '../helpers/wait.js';

const citations: string[] = [];
const cite = defineTool({
  name: 'cite',
  description: 'Cites a source.',
  input: z.object({ source: z.string() }),
  execute: ({ source }) => {
    citations.push(source);
    return { cited: source };
  },
});
const research = defineSkill({
  key: 'research',
  name: 'Research',
  description: 'How to research <carefully>.',
  content: 'Always cite two sources.',
  tools: [cite],
});

const toolNames = (request: ModelRequest) => request.tools.map((tool) => tool.name);

let store: Store;
beforeAll(async () => {
  store = await openStore(tempSqliteUrl());
});
afterAll(async () => store?.close());

describe('loaded skills across a worker change (BG-34)', () => {
  it('BG-34 skill tools loaded before the worker went away are still offered by a new worker; one load_skill execution; the turn completes', async () => {
    const secondCall = gate();
    const modelA = new ScriptedModel({
      crasher: (_request, { call }) => {
        if (call === 0) return { toolCalls: [{ name: 'load_skill', arguments: { key: 'research' } }] };
        secondCall.open();
        return { text: 'never', delayMs: 120_000 };
      },
    });
    const modelB = new ScriptedModel({
      crasher: (request) =>
        request.messages.filter((m) => m.role === 'tool').length >= 2
          ? 'completed on B'
          : { toolCalls: [{ name: 'cite', arguments: { source: 'on worker B' } }] },
    });
    // Each worker (and the client) builds its own agents, as a fresh process would.
    const registry = () => new AgentRegistry([defineAgent({ name: 'crasher', availableSkills: [research] })]);
    const { native, client: temporal } = await temporalConnections();
    const taskQueue = `turnkit-test-${process.pid}-${Date.now()}-bg34`;
    const worker = (model: ScriptedModel) =>
      createWorker({
        store: store,
        agents: registry(),
        model,
        connection: native,
        taskQueue,
        worker: { shutdownGraceTime: '1 second' },
      });
    const client = new TurnKitClient({ store: store, agents: registry(), temporal, taskQueue });
    const workerA = await worker(modelA);
    const runningA = workerA.run();
    const run = await client.run('crasher', 'Load then crash', { promptMode: 'full' });
    await secondCall.promise; // worker A loaded the skill and hangs in its second model call
    workerA.shutdown();
    await runningA;
    const workerB = await worker(modelB);
    const runningB = workerB.run();
    try {
      const turn = await run.result();
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('completed on B');
      const first = modelB.callsFor('crasher')[0]!.request;
      expect(toolNames(first)).toEqual(['cite', 'load_skill']);
      expect(first.instructions).toContain('Always cite two sources.');
      const executions = await run.toolExecutions();
      expect(executions.filter((e) => e.toolName === 'load_skill')).toHaveLength(1);
      expect(executions.find((e) => e.toolName === 'cite')?.status).toBe('completed');
      expect(citations).toContain('on worker B');
    } finally {
      workerB.shutdown();
      await runningB;
    }
  }, 90_000);
});
