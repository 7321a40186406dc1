/**
 * `npm run demo`: a worker and a client in one process, on the local Temporal dev server and
 * an embedded SQLite store. Offline on the scripted model unless a provider key is set.
 */
import { mkdirSync } from 'node:fs';
import { DefaultLogger, Runtime as TemporalRuntime } from '@temporalio/worker';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { modelClientFromEnv } from '../src/models/providers.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { researcher, scriptedResearcher } from './research-agents.js';

// Keep the SDK's own lifecycle logs out of the demo's output.
TemporalRuntime.install({ logger: new DefaultLogger('WARN') });

const uiUrl = process.env['TEMPORAL_UI_URL'] ?? 'http://127.0.0.1:8233';
const namespace = process.env['TEMPORAL_NAMESPACE'] ?? 'default';
const databaseUrl = process.env['TURNKIT_DATABASE_URL'] ?? '.turnkit/demo.sqlite';
if (!databaseUrl.includes('://')) mkdirSync('.turnkit', { recursive: true });

const provider = modelClientFromEnv();
const model = provider ?? scriptedResearcher;
const defaultModel = process.env['TURNKIT_MODEL'] ?? (provider ? 'gpt-4o-mini' : 'scripted');

const store = await openStore(databaseUrl);
const agents = new AgentRegistry([researcher]);
const taskQueue = 'turnkit-demo';
const worker = await createWorker({
  store,
  agents,
  model,
  defaultModel,
  taskQueue,
  cost: { costRates: { scripted: { input: 3, output: 15 } } },
  onEvent: (event) => {
    const p = event.payload;
    const detail =
      event.type === 'tool_call.created' || event.type === 'tool_call.completed'
        ? ` ${p['name']}`
        : event.type === 'model.completed'
          ? ` ${p['tool_call_count']} tool call(s), $${Number(p['cost'] ?? 0).toFixed(4)}`
          : '';
    console.log(`  · ${event.type}${detail}`);
  },
});
const client = await TurnKitClient.connect({ store, agents, taskQueue, defaultModel });

console.log(`TurnKit demo — model: ${provider ? defaultModel : 'scripted (offline)'}, store: ${databaseUrl}`);
await worker.run(
  (async () => {
    const run = await client.run(
      'researcher',
      'Explain in two sentences why durable execution matters for agents, and add 3 + 4 + 35.',
      { principal: { user: 'demo' }, context: { audience: 'newcomers' } },
    );
    console.log(`Started turn ${run.turnId}`);
    console.log(`Watch it live: npm run turnkit -- --store ${databaseUrl} watch ${run.turnId}`);
    console.log(`Temporal UI: ${uiUrl}/namespaces/${namespace}/workflows/${run.workflowId}`);
    // The answer as it streams (deltas from the store, never from Temporal history).
    let streaming = false;
    for await (const part of run.stream()) {
      if (part.turnId !== run.turnId) continue;
      if (part.type === 'text.delta') {
        if (!streaming) process.stdout.write('  » ');
        streaming = true;
        process.stdout.write(part.text.replace(/\n/g, '\n    '));
      } else if (part.type === 'step.finished' && streaming) {
        process.stdout.write('\n');
        streaming = false;
      }
    }
    const turn = await run.result();
    const executions = await run.toolExecutions();
    console.log(
      `\nStatus: ${turn.status}${turn.error ? ` (${turn.error.class}: ${turn.error.message})` : ''}`,
    );
    console.log(`Tool executions: ${executions.map((e) => `${e.toolName}=${e.status}`).join(', ')}`);
    console.log(`\n${turn.outputText ?? ''}\n`);
    const usage = await run.usage();
    console.log(
      `Tokens: ${usage.input_tokens} in / ${usage.output_tokens} out — cost $${(await run.cost()).toFixed(4)}`,
    );
    console.log(`Run in the Temporal UI: ${uiUrl}/namespaces/${namespace}/workflows/${run.workflowId}`);
    console.log(
      `On the command line: npm run turnkit -- --store ${databaseUrl} show ${run.turnId}   (watch, ls, cancel: docs/cli.md)`,
    );
    if (turn.status !== 'completed') process.exitCode = 1;
  })(),
);
await store.close();
