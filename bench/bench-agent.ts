/**
 * The bench turn's agent and model, shared by bench/turn-bench.ts (timings) and
 * bench/turn-store-bench.ts (store statements): one model call asking for one terminal tool,
 * then output.
 */
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { defineTool } from '../src/agents/tool.js';
import { ScriptedModel } from '../src/models/scripted-model.js';

const finish = defineTool({
  name: 'finish',
  description: 'Ends the turn.',
  input: z.object({ answer: z.string() }),
  terminal: true,
  execute: ({ answer }) => ({ result: answer }),
});

export const benchAgent = defineAgent({ name: 'bench', tools: [finish] });

export const benchModel = new ScriptedModel({
  bench: () => ({ toolCalls: [{ name: 'finish', arguments: { answer: '42' } }] }),
});
