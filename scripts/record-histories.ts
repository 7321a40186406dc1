/**
 * Records the turn workflow's histories that CI replays (test/workflows/replay.test.ts).
 * Re-record only on purpose: a change that breaks replay of a released history needs
 * `patched()`. Run with the dev server up: `npx tsx scripts/record-histories.ts`.
 */
import { writeFileSync } from 'node:fs';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { defineTool } from '../src/agents/tool.js';
import { ScriptedModel } from '../src/models/scripted-model.js';
import { startKit } from '../test/helpers/turnkit.js';

const finish = defineTool({
  name: 'finish',
  description: 'Ends the turn.',
  input: z.object({ answer: z.string() }),
  terminal: true,
  execute: ({ answer }) => ({ result: answer }),
});
const echo = defineTool({
  name: 'echo',
  description: 'Echoes.',
  input: z.object({ text: z.string() }),
  execute: ({ text }) => ({ text }),
});
const reviewer = defineAgent({ name: 'reviewer' });
const model = new ScriptedModel({
  terminal: () => ({
    toolCalls: [
      { name: 'echo', arguments: { text: 'a' } },
      { name: 'finish', arguments: { answer: '42' } },
    ],
  }),
  looping: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'done'
      : { toolCalls: [{ name: 'echo', arguments: { text: 'x' } }] },
  fanout: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'joined'
      : {
          toolCalls: [
            { name: 'reviewer', arguments: { task: 'one' } },
            { name: 'reviewer', arguments: { task: 'two' } },
          ],
        },
  reviewer: () => 'reviewed',
  failing: [{ error: { status: 400, message: 'rejected' } }],
  cancelled: () => ({ text: 'never', delayMs: 60_000 }),
});
const kit = await startKit({
  agents: [
    defineAgent({ name: 'terminal', tools: [echo, finish] }),
    defineAgent({ name: 'looping', tools: [echo] }),
    defineAgent({ name: 'fanout', subAgents: [reviewer] }),
    defineAgent({ name: 'failing' }),
    defineAgent({ name: 'cancelled' }),
  ],
  model,
});
const save = async (name: string, workflowId: string) => {
  const history = await kit.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  writeFileSync(
    new URL(`../test/fixtures/histories/${name}.json`, import.meta.url),
    `${historyToJSON(history)}\n`,
  );
  console.log(`recorded ${name}: ${history.events?.length} events`);
};
for (const name of ['terminal', 'looping', 'fanout', 'failing']) {
  const run = await kit.client.run(name, `record ${name}`);
  await run.result();
  await save(name, run.workflowId);
}
const run = await kit.client.run('cancelled', 'record cancel');
while (!(await run.events()).some((e) => e.type === 'model.requested'))
  await new Promise((r) => setTimeout(r, 50));
await run.cancel({ descendants: 'cascade' });
await run.result();
await save('cancelled', run.workflowId);
await kit.stop();
