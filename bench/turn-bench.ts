/**
 * `npm run bench`: a TurnKit turn (1 model call + 1 tool call + output, scripted model) against
 * a bare Temporal workflow with two no-op activities, on the same server and worker, in the
 * same run. Reports ratios against that floor; writes bench-results.json.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { createTurnActivities } from '../src/activities/turn-activities.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { Runtime } from '../src/engine/runtime.js';
import { openStore } from '../src/store/index.js';
import { benchAgent, benchModel } from './bench-agent.js';
import { cpuDuring, devServerPid, percentile, throughput, timed } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const sequential = Number(process.env['BENCH_SEQUENTIAL'] ?? 60);
const concurrent = Number(process.env['BENCH_CONCURRENT'] ?? 128);
const concurrency = 32;
const serverPid = devServerPid(address);

const dir = mkdtempSync(join(tmpdir(), 'turnkit-bench-'));
const store = await openStore(join(dir, 'bench.sqlite'));
const agents = new AgentRegistry([benchAgent]);
const runtime = new Runtime({ store, agents, model: benchModel, defaultModel: 'scripted' });
const taskQueue = `turnkit-bench-${Date.now()}`;
const connection = await NativeConnection.connect({ address });
const temporalClient = new Client({ connection: await Connection.connect({ address }) });
const worker = await Worker.create({
  connection,
  taskQueue,
  workflowBundle: await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error },
  }),
  activities: { ...createTurnActivities(runtime), noop: async () => undefined },
});
const client = new TurnKitClient({ store, agents, temporal: temporalClient, taskQueue });

let floorCounter = 0;
const floor = () =>
  temporalClient.workflow.execute('floorWorkflow', {
    taskQueue,
    workflowId: `bench-floor-${taskQueue}-${floorCounter++}`,
  });
const turn = async () => {
  const run = await client.run('bench', 'What is the answer?');
  const record = await run.result();
  if (record.status !== 'completed')
    throw new Error(`bench turn ended ${record.status}: ${record.error?.message}`);
  return run;
};

async function historyOf(workflowId: string) {
  const history = await temporalClient.workflow.getHandle(workflowId).fetchHistory();
  const EventType = proto.temporal.api.enums.v1.EventType;
  return {
    events: history.events?.length ?? 0,
    bytes: proto.temporal.api.history.v1.History.encode(history).finish().length,
    /** Each event's type, in order, for the printout below. */
    types: (history.events ?? []).map((event) =>
      String(EventType[event.eventType ?? 0]).replace(/^EVENT_TYPE_/, ''),
    ),
  };
}

const results = await worker.runUntil(async () => {
  for (let i = 0; i < 10; i++) {
    await floor();
    await turn();
  }
  const floorTimes: number[] = [];
  const turnTimes: number[] = [];
  for (let i = 0; i < sequential; i++) {
    floorTimes.push(await timed(floor));
    turnTimes.push(await timed(turn));
  }
  // CPU per workflow at 32 concurrent, this process (client and worker) and the server apart:
  // whether the run was bound by CPU, and whose (docs/decisions/031-throughput-bounds.md).
  const floorLoad = await cpuDuring(serverPid, () => throughput(concurrent, concurrency, floor));
  const turnLoad = await cpuDuring(serverPid, () => throughput(concurrent, concurrency, turn));
  const floorThroughput = floorLoad.value;
  const turnThroughput = turnLoad.value;
  // Busy share of the machine's cores (this process and the server), when the server is local.
  const utilization = (load: typeof floorLoad, serverMs: number) =>
    (load.ownMs + serverMs) / load.wallMs / availableParallelism();
  const serverCpu =
    floorLoad.serverMs === null || turnLoad.serverMs === null
      ? {}
      : {
          floor_server_cpu_ms_32: floorLoad.serverMs / concurrent,
          turn_server_cpu_ms_32: turnLoad.serverMs / concurrent,
          turn_vs_floor_server_cpu_32: turnLoad.serverMs / floorLoad.serverMs,
          floor_cpu_utilization_32: utilization(floorLoad, floorLoad.serverMs),
          turn_cpu_utilization_32: utilization(turnLoad, turnLoad.serverMs),
        };
  // The same CPU by thread (Linux): which part of the worker a turn's extra cost is in.
  const floorThreads = floorLoad.byThread;
  const turnThreads = turnLoad.byThread;
  const byThread =
    floorThreads && turnThreads
      ? Object.fromEntries(
          (['main', 'workflow', 'core', 'v8'] as const).flatMap((kind) => [
            [`floor_${kind}_thread_cpu_ms_32`, floorThreads[kind] / concurrent],
            [`turn_${kind}_thread_cpu_ms_32`, turnThreads[kind] / concurrent],
          ]),
        )
      : {};
  const floorThroughput1 = (1000 * sequential) / floorTimes.reduce((a, b) => a + b, 0);
  const turnThroughput1 = (1000 * sequential) / turnTimes.reduce((a, b) => a + b, 0);

  const sample = await turn();
  const turnHistory = await historyOf(sample.workflowId);
  const floorHistory = await historyOf(`bench-floor-${taskQueue}-0`);

  const small = await (await client.conversation('bench')).ask('x');
  await small.result();
  const large = await (await client.conversation('bench')).ask('x'.repeat(1024 * 1024));
  await large.result();
  console.log(
    `\nthe bench turn's history (${turnHistory.events} events):\n  ${turnHistory.types.join('\n  ')}`,
  );
  console.log(`the floor's history (${floorHistory.events} events):\n  ${floorHistory.types.join('\n  ')}`);
  const smallHistory = await historyOf(small.workflowId);
  const largeHistory = await historyOf(large.workflowId);

  return {
    floor_p50_ms: percentile(floorTimes, 50),
    floor_p99_ms: percentile(floorTimes, 99),
    turn_p50_ms: percentile(turnTimes, 50),
    turn_p99_ms: percentile(turnTimes, 99),
    turn_vs_floor_p50: percentile(turnTimes, 50) / percentile(floorTimes, 50),
    turn_vs_floor_p99: percentile(turnTimes, 99) / percentile(floorTimes, 99),
    floor_throughput_1: floorThroughput1,
    turn_throughput_1: turnThroughput1,
    throughput_vs_floor_1: turnThroughput1 / floorThroughput1,
    floor_throughput_32: floorThroughput,
    turn_throughput_32: turnThroughput,
    throughput_vs_floor_32: turnThroughput / floorThroughput,
    floor_worker_cpu_ms_32: floorLoad.ownMs / concurrent,
    turn_worker_cpu_ms_32: turnLoad.ownMs / concurrent,
    turn_vs_floor_worker_cpu_32: turnLoad.ownMs / floorLoad.ownMs,
    ...byThread,
    ...serverCpu,
    turn_history_events: turnHistory.events,
    turn_history_bytes: turnHistory.bytes,
    floor_history_events: floorHistory.events,
    turn_history_events_vs_floor: turnHistory.events - floorHistory.events,
    floor_history_bytes: floorHistory.bytes,
    history_bytes_empty: smallHistory.bytes,
    history_bytes_1mb: largeHistory.bytes,
    history_bytes_1mb_vs_empty: largeHistory.bytes / smallHistory.bytes,
  };
});

const targets: Record<string, [string, number]> = {
  turn_vs_floor_p50: ['<=', 1.1],
  throughput_vs_floor_32: ['>=', 0.95],
  turn_history_events_vs_floor: ['<=', 3],
  history_bytes_1mb_vs_empty: ['<=', 1.1],
};
console.log(
  `\nTurnKit benchmark (sequential n=${sequential}, concurrent n=${concurrent} at ${concurrency})\n`,
);
console.log('metric'.padEnd(30), 'value'.padStart(12), '  target');
for (const [key, value] of Object.entries(results)) {
  const target = targets[key];
  const verdict = target
    ? `${target[0]} ${target[1]} ${(target[0] === '<=' ? value <= target[1] : value >= target[1]) ? 'ok' : 'MISSED'}`
    : '';
  console.log(
    key.padEnd(30),
    value.toFixed(key.includes('events') || key.includes('bytes_') ? 0 : 3).padStart(12),
    ` ${verdict}`,
  );
}
writeFileSync(
  'bench-results.json',
  `${JSON.stringify({ measuredAt: new Date().toISOString(), ...results }, null, 2)}\n`,
);
console.log('\nwrote bench-results.json');
await store.close();
await connection.close();
