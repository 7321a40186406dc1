/**
 * `npm run bench`: the cost of payload encryption (decision 75). Two workers in this process,
 * same store, same agent, one on a task queue with TurnKit's EncryptionCodec on the worker and
 * client, one without; turns alternate between them. Per turn: `client.run` until its result.
 *   codec_turn_overhead_p50: the codec turn's median over the plain turn's median (≤ 1.05).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import { NativeConnection } from '@temporalio/worker';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { EncryptionCodec } from '../src/codec/encryption-codec.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { benchAgent, benchModel } from './bench-agent.js';
import { mergeBenchResults, percentile, timed } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const runs = Number(process.env['BENCH_CODEC_RUNS'] ?? 40);
const warmup = 3;

const store = await openStore(
  join(mkdtempSync(join(tmpdir(), 'turnkit-codec-bench-')), 'codec-bench.sqlite'),
);
const agents = new AgentRegistry([benchAgent]);
const native = await NativeConnection.connect({ address });
const connection = await Connection.connect({ address });
const codecs: PayloadCodec[] = [new EncryptionCodec([{ id: 'bench', key: randomBytes(32) }])];

async function side(payloadCodecs?: PayloadCodec[]) {
  const taskQueue = `turnkit-codec-bench-${payloadCodecs ? 'on' : 'off'}-${Date.now()}`;
  const worker = await createWorker({
    store,
    agents,
    model: benchModel,
    connection: native,
    taskQueue,
    ...(payloadCodecs ? { payloadCodecs } : {}),
  });
  const temporal = new Client({ connection, ...(payloadCodecs ? { dataConverter: { payloadCodecs } } : {}) });
  const client = new TurnKitClient({ store, agents, temporal, taskQueue });
  return {
    worker,
    turn: (i: number) => timed(async () => (await client.run('bench', `turn #${i}`)).result()),
  };
}

const plain = await side();
const sealed = await side(codecs);
const running = [plain.worker.run(), sealed.worker.run()];
const plainMs: number[] = [];
const sealedMs: number[] = [];
for (let i = 0; i < warmup; i++) {
  await plain.turn(-1 - i);
  await sealed.turn(-1 - i);
}
for (let i = 0; i < runs; i++) {
  // Alternating, so drift in the shared server's load falls on both sides alike.
  plainMs.push(await plain.turn(i));
  sealedMs.push(await sealed.turn(i));
}
plain.worker.shutdown();
sealed.worker.shutdown();
await Promise.all(running);

const results = {
  codec_runs: runs,
  codec_turn_p50_ms: percentile(sealedMs, 50),
  codec_plain_turn_p50_ms: percentile(plainMs, 50),
  codec_turn_overhead_p50: percentile(sealedMs, 50) / percentile(plainMs, 50),
};
console.log(`\nTurnKit codec benchmark (n=${runs}, after ${warmup} warm-up runs each)\n`);
for (const [key, value] of Object.entries(results))
  console.log(key.padEnd(44), (Number.isInteger(value) ? String(value) : value.toFixed(3)).padStart(10));
mergeBenchResults({ codec_measuredAt: new Date().toISOString(), ...results });
await store.close();
await native.close();
await connection.close();
