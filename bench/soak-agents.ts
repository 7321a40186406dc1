/**
 * The agents of `npm run bench:soak` (bench/soak-bench.ts), shared by the bench process (its
 * client resolves them) and the worker processes (bench/soak-worker.ts). The model answers at
 * once, so the figures are TurnKit's own cost and the store's, not a model's. A turn may take
 * an hour: one started with 999 others waits its turn for longer than the
 * default 300 s budget on a small machine, and the soak measures throughput, not deadlines.
 *
 * - `soak_loop`    a tool loop: three `note` calls, one per model step, then the answer
 * - `soak_fanout`  a fan-out: three sub-agents at once (each one `note`, then its answer), then
 *                  "joined"
 */
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { defineTool } from '../src/agents/tool.js';
import type { ModelRequest } from '../src/models/types.js';
import { ScriptedModel } from '../src/models/scripted-model.js';

export const SOAK_SHAPES = ['soak_loop', 'soak_fanout'] as const;
const PARTS = ['soak_part_a', 'soak_part_b', 'soak_part_c'];

const note = defineTool({
  name: 'note',
  description: 'Records a note.',
  input: z.object({ text: z.string() }),
  recovery: 'replaySafe',
  execute: ({ text }) => ({ noted: text }),
});

const toolResults = (request: ModelRequest) => request.messages.filter((m) => m.role === 'tool').length;

const limits = { timeout: 3600 };

export function soakFixture() {
  const part = (name: string) => defineAgent({ name, description: `Does ${name}.`, tools: [note], limits });
  const noteOnce = (request: ModelRequest) =>
    toolResults(request) ? 'part done' : { toolCalls: [{ name: 'note', arguments: { text: 'part' } }] };
  const model = new ScriptedModel({
    soak_loop: (request) =>
      toolResults(request) >= 3
        ? 'looped'
        : { toolCalls: [{ name: 'note', arguments: { text: `n${toolResults(request)}` } }] },
    soak_fanout: (request) =>
      toolResults(request) >= PARTS.length
        ? 'joined'
        : { toolCalls: PARTS.map((name) => ({ name, arguments: { task: `do ${name}` } })) },
    ...Object.fromEntries(PARTS.map((name) => [name, noteOnce])),
  });
  return {
    agents: [
      defineAgent({ name: 'soak_loop', tools: [note], limits }),
      defineAgent({ name: 'soak_fanout', subAgents: PARTS.map(part), limits }),
    ],
    model,
  };
}
