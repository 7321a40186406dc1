/**
 * `npm run bench` (prompt caching, issue 43 #9, decision 54): BENCH_CACHE_TURNS turns, each a
 * 20-call tool loop over a growing transcript, on the real dev server with a real worker,
 * through the AI SDK's Anthropic provider to a local server that models Anthropic's prompt
 * cache by the breakpoints it receives (`test/helpers/anthropic-cache.ts`: a prefix ending at
 * a breakpoint is read from the cache when an earlier request marked that exact prefix;
 * tokens are characters / 4). `prompt_cache_share`: the share of the input tokens of calls
 * 2–20 of each turn that were in a cached prefix.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAnthropic } from '@ai-sdk/anthropic';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { defineTool } from '../src/agents/tool.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { ProviderRegistryModel } from '../src/models/provider-registry.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { anthropicCacheServer, toolLoopAnswer } from '../test/helpers/anthropic-cache.js';
import { mergeBenchResults } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const TURNS = Number(process.env['BENCH_CACHE_TURNS'] ?? 3);
const LOOP_CALLS = 20;

const readPage = defineTool({
  name: 'read_page',
  description: 'Reads one page of the report.',
  input: z.object({ page: z.number() }),
  readOnly: true,
  execute: ({ page }) => `Page ${page}: ${'the durable record of what was decided. '.repeat(30)}`,
});
const reader = defineAgent({
  name: 'reader',
  instructions: 'Read the report page by page, then summarize it.',
  tools: [readPage],
  model: 'claude:claude-local',
  limits: { maxIterations: LOOP_CALLS + 5 },
});
const agents = new AgentRegistry([reader]);
const provider = anthropicCacheServer(toolLoopAnswer('read_page', LOOP_CALLS));
const baseURL = await provider.listen();
const store = await openStore(join(mkdtempSync(join(tmpdir(), 'turnkit-cache-bench-')), 'turnkit.sqlite'));
const taskQueue = `turnkit-cache-bench-${Date.now()}`;
const worker = await createWorker({
  store,
  agents,
  connection: await NativeConnection.connect({ address }),
  taskQueue,
  model: new ProviderRegistryModel({
    providers: { claude: createAnthropic({ baseURL, apiKey: 'sk-ant-local' }) },
  }),
});
const running = worker.run();
const connection = await Connection.connect({ address });
const client = new TurnKitClient({ store, agents, temporal: new Client({ connection }), taskQueue });

const later = [];
let completed = 0;
for (let turn = 0; turn < TURNS; turn += 1) {
  const from = provider.calls.length;
  const run = await client.run('reader', 'Summarize the report.');
  if ((await run.result()).status === 'completed') completed += 1;
  later.push(...provider.calls.slice(from + 1));
}
const figures = {
  prompt_cache_turns: TURNS,
  prompt_cache_turns_completed: completed,
  prompt_cache_calls_per_turn: LOOP_CALLS,
  prompt_cache_share: Number(provider.cachedShare(later).toFixed(3)),
};
console.log(figures);
worker.shutdown();
await running;
await connection.close();
await store.close();
await provider.close();
mergeBenchResults(figures);
