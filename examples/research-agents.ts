/**
 * The demo's agents: an orchestrator that looks things up, computes, and saves a report
 * with a terminal tool. With no API key it runs on a scripted model, fully offline.
 * Also an agents module for the command line (its `agents` and `model` exports):
 * `npm run turnkit -- --agents examples/research-agents.ts worker`, then `… run researcher "…"`.
 */
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { defineTool } from '../src/agents/tool.js';
import { ScriptedModel } from '../src/models/scripted-model.js';
import type { ModelRequest } from '../src/models/types.js';

const FACTS: Record<string, string> = {
  temporal: 'Temporal persists workflow progress as an event history and replays it to recover.',
  turnkit: 'TurnKit records every model call, tool execution and message in a store.',
  sqlite: 'SQLite in WAL mode lets readers proceed while one writer commits.',
};

export const lookupFact = defineTool({
  name: 'lookup_fact',
  description: 'Looks up a short fact about a topic (temporal, turnkit or sqlite).',
  input: z.object({ topic: z.string().describe('One of: temporal, turnkit, sqlite') }),
  recovery: 'replaySafe',
  execute: ({ topic }) => ({ topic, fact: FACTS[topic.toLowerCase()] ?? `no fact on file for ${topic}` }),
});

export const calculate = defineTool({
  name: 'calculate',
  description: 'Adds a list of numbers.',
  input: z.object({ numbers: z.array(z.number()) }),
  recovery: 'replaySafe',
  execute: ({ numbers }) => ({ sum: numbers.reduce((a, b) => a + b, 0) }),
});

export const saveReport = defineTool({
  name: 'save_report',
  description: 'Saves the final report and ends the run.',
  input: z.object({ title: z.string(), body: z.string() }),
  terminal: (result) => String((result as { report: string }).report),
  execute: ({ title, body }) => ({ report: `# ${title}\n\n${body}` }),
});

export const researcher = defineAgent({
  name: 'researcher',
  description: 'Researches a question with its tools and saves a report.',
  instructions:
    'Look up each topic you need, compute what is asked, then save a short report with save_report.',
  orchestrator: true,
  tools: [lookupFact, calculate, saveReport],
  limits: { maxIterations: 8, maxToolExecutions: 12, timeout: 120 },
});

function toolResults(request: ModelRequest) {
  return request.messages.filter((m) => m.role === 'tool');
}

/** A deterministic stand-in for a real model: it plans by counting the results it has seen. */
export const scriptedResearcher = new ScriptedModel({
  researcher: (request) => {
    const results = toolResults(request);
    if (results.length === 0) {
      return {
        text: 'I will look up both topics first.',
        toolCalls: [
          { name: 'lookup_fact', arguments: { topic: 'temporal' } },
          { name: 'lookup_fact', arguments: { topic: 'turnkit' } },
        ],
        usage: { inputTokens: 420, outputTokens: 60 },
      };
    }
    if (results.length === 2) {
      return {
        text: 'Now the arithmetic.',
        toolCalls: [{ name: 'calculate', arguments: { numbers: [3, 4, 35] } }],
        usage: { inputTokens: 610, outputTokens: 30 },
      };
    }
    const facts = results.slice(0, 2).map((r) => (JSON.parse(r.content) as { fact: string }).fact);
    const sum = (JSON.parse(results[2]!.content) as { sum: number }).sum;
    return {
      toolCalls: [
        {
          name: 'save_report',
          arguments: { title: 'Durable agents', body: `${facts.join(' ')}\n\nThe numbers add up to ${sum}.` },
        },
      ],
      usage: { inputTokens: 800, outputTokens: 120 },
    };
  },
});

/** What `turnkit worker --agents examples/research-agents.ts` runs: the researcher, offline. */
export default { agents: [researcher], model: scriptedResearcher };
