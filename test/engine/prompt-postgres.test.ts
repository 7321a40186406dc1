import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineSkill } from '../../src/agents/skill.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const stamp = defineTool({
  name: 'stamp',
  description: 'Stamps a document.',
  input: z.object({ doc: z.string() }),
  execute: ({ doc }) => ({ stamped: doc }),
});
const filing = defineSkill({
  key: 'filing',
  name: 'Filing',
  content: 'Stamp every document.',
  tools: [stamp],
});

const model = new ScriptedModel({
  clerk: (request) => {
    if (request.metadata.purpose === 'compaction') return { text: 'SUMMARY of the two documents.' };
    const results = request.messages.filter((m) => m.role === 'tool').length;
    if (results === 0) return { toolCalls: [{ name: 'load_skill', arguments: { key: 'filing' } }] };
    if (results === 1) return { toolCalls: [{ name: 'stamp', arguments: { doc: 'memo' } }] };
    return 'filed';
  },
});

describePostgres('prompt layer on PostgreSQL', () => {
  let kit: TestKit;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const pg = await openPgTestStore();
    drop = pg.drop;
    kit = await startKit({
      store: pg.store,
      model,
      agents: [
        defineAgent({
          name: 'clerk',
          availableSkills: [filing],
          compaction: { contextLimit: 600, reservedTokens: 0, tailMessages: 1, tailTokens: 100 },
        }),
      ],
    });
  });
  afterAll(async () => {
    await kit?.stop();
    await drop?.();
  });

  it('CORE-25 SC-02 on PostgreSQL: a turn compacts its history first, then loads a skill and calls its tool', async () => {
    const conversation = await kit.client.conversation('clerk', {
      subject: { type: 'Case', id: '9', prompt: 'Case nine' },
    });
    await conversation.say(`document one ${'d'.repeat(1500)}`);
    await conversation.say(`document two ${'d'.repeat(1500)}`);
    const run = await conversation.ask('File them');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('filed');
    const messages = await conversation.messages();
    const summary = messages.find((m) => m.kind === 'context_summary')!;
    expect(summary.turnId).toBe(turn.id);
    expect(messages.filter((m) => m.kind !== 'context_summary').length).toBe(messages.length - 1);
    const main = model.callsFor('clerk').filter((c) => c.request.metadata.purpose !== 'compaction');
    expect(main[0]!.request.messages[0]!.content).toBe('What did we do so far?');
    expect(main[0]!.request.dynamicInstructions).toContain('Case nine');
    expect(main[2]!.request.tools.map((t) => t.name)).toEqual(['stamp', 'load_skill']);
    expect((await run.toolExecutions()).map((e) => [e.toolName, e.status])).toEqual([
      ['load_skill', 'completed'],
      ['stamp', 'completed'],
    ]);
  });
});
