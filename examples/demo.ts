/**
 * `npm run demo`: a worker and a client in one process, on the local Temporal dev server and
 * an embedded SQLite store. Offline on the scripted model unless a provider key is set.
 */
import { Runtime as TemporalRuntime } from '@temporalio/worker';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { modelClientFromEnv } from '../src/models/providers.js';
import { DEFAULT_DATABASE_PATH, openStore } from '../src/store/index.js';
import { conciseWorkerLogger, createWorker } from '../src/worker.js';
import { researcher, scriptedResearcher } from './research-agents.js';

// Keep the SDK's own lifecycle logs out of the demo's output; a failed attempt is one line
// (TURNKIT_LOG_LEVEL=DEBUG adds its stack).
TemporalRuntime.install({
  logger: conciseWorkerLogger(process.env['TURNKIT_LOG_LEVEL'] === 'DEBUG' ? 'DEBUG' : 'WARN'),
});

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const uiUrl = process.env['TEMPORAL_UI_URL'] ?? 'http://127.0.0.1:8233';
const namespace = process.env['TEMPORAL_NAMESPACE'] ?? 'default';
// The store the `turnkit` command line reads by default, so its commands need no --store.
const databaseUrl = process.env['TURNKIT_DATABASE_URL'] || DEFAULT_DATABASE_PATH;

const provider = modelClientFromEnv();
const model = provider ?? scriptedResearcher;
const defaultModel = process.env['TURNKIT_MODEL'] ?? (provider ? 'gpt-4o-mini' : 'scripted');
// Example prices, so the demo shows how cost is counted; the scripted model itself costs nothing.
const EXAMPLE_RATES = { input: 3, output: 15 };

// `npm run turnkit -- …` against what this demo used: its server, UI and store.
const cli = [
  'npm run turnkit --',
  ...(address !== '127.0.0.1:7233' ? [`--address ${address}`] : []),
  ...(uiUrl !== 'http://127.0.0.1:8233' ? [`--ui ${uiUrl}`] : []),
  ...(databaseUrl !== DEFAULT_DATABASE_PATH ? [`--store ${databaseUrl}`] : []),
].join(' ');

const store = await openStore(databaseUrl);
const agents = new AgentRegistry([researcher]);
const worker = await createWorker({
  store,
  agents,
  model,
  defaultModel,
  cost: { costRates: { scripted: EXAMPLE_RATES } },
  onEvent: (event) => {
    // A message's text is printed as it streams (below): its event line would say nothing more.
    if (event.type === 'message.created') return;
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
const client = await TurnKitClient.connect({ store, agents, defaultModel });

console.log(
  `TurnKit demo — model: ${provider ? defaultModel : 'scripted (offline)'}, store: ${store.identity.location}, ` +
    `task queue: ${client.taskQueue}`,
);
console.log(`Temporal: ${serverLine()}`);
if (!provider)
  console.log(
    `Costs below use example rates for the scripted model ($${EXAMPLE_RATES.input} in / $${EXAMPLE_RATES.output} out per million tokens): nothing is charged.`,
  );
await worker.run(
  (async () => {
    const run = await client.run(
      'researcher',
      'Explain in two sentences why durable execution matters for agents, and add 3 + 4 + 35.',
      { principal: { user: 'demo' }, context: { audience: 'newcomers' } },
    );
    console.log(`Started turn ${run.turnId}`);
    console.log(`Watch it live: ${cli} watch ${run.turnId}`);
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
      `Tokens: ${usage.input_tokens} in / ${usage.output_tokens} out — cost $${(await run.cost()).toFixed(4)}` +
        (provider ? '' : ' (example rates: nothing was charged)'),
    );
    console.log(`Run in the Temporal UI: ${uiUrl}/namespaces/${namespace}/workflows/${run.workflowId}`);
    console.log(`On the command line: ${cli} show ${run.turnId}   (watch, ls, cancel: docs/cli.md)`);
    console.log(`Temporal: ${serverLine()}`);
    if (turn.status !== 'completed') process.exitCode = 1;
  })(),
);
await store.close();

/** Which Temporal server the demo used, whether it started it, and how to stop it (scripts/services.sh). */
function serverLine(): string {
  const where = `${address}, UI ${uiUrl}`;
  switch (process.env['TURNKIT_TEMPORAL_ORIGIN']) {
    case 'started':
      return `the dev server at ${where}, started by this demo; it keeps running (stop it: ./temporal-dev.sh stop)`;
    case 'checkout':
      return `the dev server at ${where}, started earlier by this checkout; it keeps running (stop it: ./temporal-dev.sh stop)`;
    case 'other':
      return `a server at ${where} that this checkout did not start, reused as it was (set TEMPORAL_PORT for a dev server of its own)`;
    default:
      return where;
  }
}
