/**
 * `npm run bench` (side by side): the same agent — one model call that asks for the `lookup`
 * tool, the tool, a final answer — on TurnKit and on THE COMPARISON, Temporal's own AI SDK
 * plugin `@temporalio/ai-sdk` (bench/peer-ai-sdk/, its own package: the plugin pins
 * @temporalio/* 1.23.0). Both use the same model script in `MockLanguageModelV4`
 * (bench/peer-model.ts), the same Temporal server and the same worker settings; each side's
 * client and worker share one process (TurnKit's here, the peer's in peer-worker.ts), and the
 * measurements alternate between the sides so both see the same machine.
 *
 * Reports p50 (PEER_SEQUENTIAL runs each, one at a time), throughput at 32 (PEER_CONCURRENT
 * runs each) and history bytes for a 1 MB task, for both; merges into bench-results.json.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { defineTool } from '../src/agents/tool.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { AiSdkModel } from '../src/models/ai-sdk-model.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { lookup, peerAgentGenerate } from './peer-model.js';
import { spawnBenchWorker, stopBenchWorkers } from './processes.js';
import { mergeBenchResults, percentile, throughput, timed } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const sequential = Number(process.env['PEER_SEQUENTIAL'] ?? 40);
const concurrent = Number(process.env['PEER_CONCURRENT'] ?? 128);
const width = 32;
const TASK = 'What is the answer?';
const ONE_MB = 'x'.repeat(1024 * 1024);

const agent = defineAgent({
  name: 'peer_agent',
  model: 'mock',
  // The peer has no compaction; the mock's script would not summarize either.
  compaction: false,
  tools: [
    defineTool({
      name: 'lookup',
      description: 'Looks something up.',
      input: z.object({ query: z.string() }),
      execute: ({ query }) => lookup(query),
    }),
  ],
});
const mock = new MockLanguageModelV4({ doGenerate: peerAgentGenerate });
const dir = mkdtempSync(join(tmpdir(), 'turnkit-peer-bench-'));
const store = await openStore(join(dir, 'peer.sqlite'));
const agents = new AgentRegistry([agent]);
const taskQueue = `turnkit-peer-bench-${Date.now()}`;
const temporal = new Client({ connection: await Connection.connect({ address }) });
const turnkit = await createWorker({
  store,
  agents,
  // The plugin's model call is a generate call: TurnKit makes the same one (no stream) here.
  model: new AiSdkModel({ provider: () => mock, stream: false }),
  taskQueue,
  address,
});
const client = new TurnKitClient({ store, agents, temporal, taskQueue });

/** TurnKit's side: one turn on a fresh conversation; resolves with its workflow id. */
async function turn(task = TASK): Promise<string> {
  const run = await client.run(agent, task);
  const record = await run.result();
  if (record.status !== 'completed') throw new Error(`peer bench: turn ended ${record.status}`);
  return run.workflowId;
}

async function historyOf(workflowId: string) {
  const history = await temporal.workflow.getHandle(workflowId).fetchHistory();
  return {
    events: history.events?.length ?? 0,
    bytes: proto.temporal.api.history.v1.History.encode(history).finish().length,
  };
}

/** The peer's side: one command to peer-worker.ts and its answer. */
function ask<T>(peer: ChildProcess, command: object): Promise<T> {
  return new Promise((resolve, reject) => {
    peer.once('message', (answer: { ok: boolean; error?: string }) =>
      answer.ok ? resolve(answer as T) : reject(new Error(`peer: ${answer.error}`)),
    );
    peer.send(command);
  });
}

const peer = await spawnBenchWorker(
  fileURLToPath(new URL('./peer-ai-sdk/peer-worker.ts', import.meta.url)),
  { TEMPORAL_ADDRESS: address, PEER_TASK_QUEUE: `${taskQueue}-peer` },
  'peer-worker ready',
);
const peerTurn = (prompt = TASK) => ask<{ ms: number; workflowId: string }>(peer, { cmd: 'turn', prompt });

const results = await turnkit.worker.runUntil(async () => {
  for (let i = 0; i < 10; i++) {
    await turn();
    await peerTurn();
  }
  const ours: number[] = [];
  const theirs: number[] = [];
  for (let i = 0; i < sequential; i++) {
    ours.push(await timed(() => turn()));
    theirs.push((await peerTurn()).ms);
  }
  const ourThroughput = await throughput(concurrent, width, () => turn());
  const { perSecond: theirThroughput } = await ask<{ perSecond: number }>(peer, {
    cmd: 'throughput',
    total: concurrent,
    width,
  });
  const ourSmall = await historyOf(await turn());
  const ourLarge = await historyOf(await turn(ONE_MB));
  const theirSmall = await ask<{ events: number; bytes: number }>(peer, {
    cmd: 'history',
    workflowId: (await peerTurn()).workflowId,
  });
  const theirLarge = await ask<{ events: number; bytes: number }>(peer, {
    cmd: 'history',
    workflowId: (await peerTurn(ONE_MB)).workflowId,
  });
  return {
    turnkit_peer_agent_p50_ms: percentile(ours, 50),
    ai_sdk_p50_ms: percentile(theirs, 50),
    turn_vs_ai_sdk_p50: percentile(ours, 50) / percentile(theirs, 50),
    turnkit_peer_agent_throughput_32: ourThroughput,
    ai_sdk_throughput_32: theirThroughput,
    throughput_vs_ai_sdk_32: ourThroughput / theirThroughput,
    turnkit_peer_agent_history_events: ourSmall.events,
    ai_sdk_history_events: theirSmall.events,
    turnkit_peer_agent_history_bytes_empty: ourSmall.bytes,
    ai_sdk_history_bytes_empty: theirSmall.bytes,
    turnkit_peer_agent_history_bytes_1mb: ourLarge.bytes,
    ai_sdk_history_bytes_1mb: theirLarge.bytes,
    history_bytes_vs_ai_sdk_1mb: ourLarge.bytes / theirLarge.bytes,
  };
});

console.log(
  `\nTurnKit vs @temporalio/ai-sdk (sequential n=${sequential}, concurrent n=${concurrent} at ${width})\n`,
);
for (const [key, value] of Object.entries(results)) {
  const verdict = key === 'turn_vs_ai_sdk_p50' ? ` <= 1.0 ${value <= 1 ? 'ok' : 'MISSED'}` : '';
  console.log(key.padEnd(40), value.toFixed(Number.isInteger(value) ? 0 : 3).padStart(12), verdict);
}
mergeBenchResults({ peer_measuredAt: new Date().toISOString(), ...results });
await stopBenchWorkers([peer]);
await store.close();
await temporal.connection.close();
