/**
 * `npm run example -- examples/reviewers.ts` (or `npx tsx examples/reviewers.ts` on Node >= 22.14
 * with the dev server running): a coordinator fans out to two reviewer
 * sub-agents, which run in parallel as child workflows while the coordinator waits holding no
 * worker. Open the printed Temporal UI link to see the parent and both children.
 */
import { DefaultLogger, Runtime as TemporalRuntime } from '@temporalio/worker';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { ScriptedModel } from '../src/models/scripted-model.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';

TemporalRuntime.install({ logger: new DefaultLogger('WARN') });
const uiUrl = process.env['TEMPORAL_UI_URL'] ?? 'http://127.0.0.1:8233';

const evidence = defineAgent({ name: 'evidence_review', description: 'Checks the evidence behind a claim.' });
const risk = defineAgent({ name: 'risk_review', description: 'Lists the risks of a plan.' });
const coordinator = defineAgent({
  name: 'coordinator',
  description: 'Asks two reviewers in parallel and joins their reports.',
  orchestrator: true,
  subAgents: [evidence, risk],
});

const model = new ScriptedModel({
  coordinator: (request) => {
    const reports = request.messages.filter((m) => m.role === 'tool');
    if (reports.length === 0) {
      return {
        toolCalls: [
          {
            name: 'evidence_review',
            arguments: { task: 'Is "durable agents lose no work" backed by evidence?' },
          },
          { name: 'risk_review', arguments: { task: 'What are the risks of running agents on Temporal?' } },
        ],
      };
    }
    const joined = reports.map((r) => (JSON.parse(r.content) as { result: string }).result).join('\n- ');
    return `Joined review:\n- ${joined}`;
  },
  evidence_review: () => ({
    text: 'Evidence: crash tests kill workers mid-turn and find no lost messages.',
    delayMs: 3000,
  }),
  risk_review: () => ({
    text: 'Risk: a tool that is not replay-safe may need a human after a crash.',
    delayMs: 1500,
  }),
});

const store = await openStore(process.env['TURNKIT_DATABASE_URL'] ?? '.turnkit/reviewers.sqlite');
const agents = new AgentRegistry([coordinator]);
const taskQueue = 'turnkit-reviewers-demo';
const worker = await createWorker({ store, agents, model, taskQueue });
const client = await TurnKitClient.connect({ store, agents, taskQueue });

await worker.run(
  (async () => {
    const run = await client.run('coordinator', 'Review the claim and the plan, then join the reports.');
    console.log(`coordinator: ${uiUrl}/namespaces/default/workflows/${run.workflowId}`);
    for (;;) {
      const turns = await run.turns();
      const children = turns.filter((t) => t.parentTurnId === run.turnId);
      if (children.length === 2 && (await run.turn()).status === 'waiting') {
        console.log(
          `coordinator is ${(await run.turn()).status}; children: ${children.map((c) => `${c.agentName}=${c.status}`).join(', ')}`,
        );
        for (const child of children)
          console.log(`  child workflow: ${uiUrl}/namespaces/default/workflows/turnkit-turn-${child.id}`);
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    const turn = await run.result();
    console.log(`\n${turn.status}: ${turn.outputText}`);
  })(),
);
await store.close();
