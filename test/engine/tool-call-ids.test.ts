/**
 * A model's tool-call ids key the turn's executions and pair results with calls. Some
 * OpenAI-compatible servers number them per response (`call_0` every time) or send none;
 * the engine gives such calls fresh ids so every call still runs once with its own result.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { uniqueToolCallIds } from '../../src/engine/model/tool-call-ids.js';
import { toolCallParts } from '../../src/engine/step/turn-state.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ContentPart } from '../../src/store/types.js';
import { requireTemporal } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const call = (id: string, word: string): ContentPart => ({
  type: 'tool_call',
  id,
  name: 'lookup',
  arguments: { word },
});

describe('uniqueToolCallIds', () => {
  it('keeps unique ids and renames empty, repeated and already used ones, recording the original', () => {
    const { parts, renamed } = uniqueToolCallIds(
      [{ type: 'text', text: 'x' }, call('a', '1'), call('a', '2'), call('', '3'), call('used', '4')],
      new Set(['used']),
    );
    const ids = toolCallParts(parts).map((p) => p.id);
    expect(ids[0]).toBe('a');
    expect(new Set(ids).size).toBe(4);
    expect(ids.slice(1).every((id) => /^call_[0-9a-f]{16}$/.test(id))).toBe(true);
    expect(renamed).toEqual({ [ids[1]!]: 'a', [ids[2]!]: '', [ids[3]!]: 'used' });
    expect(parts[0]).toEqual({ type: 'text', text: 'x' });
  });
});

const temporalUp = await requireTemporal();

describe.skipIf(!temporalUp)('tool-call ids a model repeats (dev server)', () => {
  const looked: string[] = [];
  let kit: TestKit;
  beforeAll(async () => {
    const lookup = defineTool({
      name: 'lookup',
      description: 'Looks a word up.',
      input: z.object({ word: z.string() }),
      execute: ({ word }) => {
        looked.push(word);
        return { meaning: `meaning of ${word}` };
      },
    });
    kit = await startKit({
      agents: [defineAgent({ name: 'numbered', tools: [lookup] })],
      // Every response calls its tool `call_0`, like a server that numbers calls per response.
      model: new ScriptedModel({
        numbered: [
          { toolCalls: [{ id: 'call_0', name: 'lookup', arguments: { word: 'first' } }] },
          { toolCalls: [{ id: 'call_0', name: 'lookup', arguments: { word: 'second' } }] },
          'done',
        ],
      }),
    });
  });
  afterAll(async () => kit?.stop());

  it('a call id repeated in a later response of the same turn still runs its own tool and gets its own result', async () => {
    const run = await kit.client.run('numbered', 'Look two words up');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('done');
    expect(looked).toEqual(['first', 'second']);
    const executions = await run.toolExecutions();
    expect(executions.map((e) => [e.arguments['word'], e.status])).toEqual([
      ['first', 'completed'],
      ['second', 'completed'],
    ]);
    expect(executions[0]!.toolCallId).toBe('call_0');
    expect(executions[1]!.toolCallId).not.toBe('call_0');
    const messages = await run.transcript();
    const calls = messages.filter((m) => m.kind === 'tool_call');
    expect(calls[1]!.metadata['renamed_tool_call_ids']).toEqual({ [executions[1]!.toolCallId]: 'call_0' });
    const results = messages.filter((m) => m.kind === 'tool_result');
    expect(results.map((m) => JSON.stringify(m.content))).toEqual([
      expect.stringContaining('meaning of first'),
      expect.stringContaining('meaning of second'),
    ]);
  });
});
