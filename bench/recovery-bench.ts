/**
 * `npm run bench` (third part): recovery after a worker is killed. Two worker processes
 * (bench/recovery-worker.ts) poll one task queue; per run, a turn's model call starts on one
 * of them, which is SIGKILLed a random 100–600 ms into the call; the figure is the time from
 * the kill until the same model step starts again on another worker (Temporal noticed the
 * lost attempt through its heartbeat timeout and retried it). A replacement process is
 * started after each kill. Merges its keys into bench-results.json.
 *
 * BENCH_RECOVERY_RUNS (default 10); BENCH_RECOVERY_HEARTBEAT overrides the model's heartbeat
 * timeout (default: DEFAULT_TURN_SETTINGS), to compare settings.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { openStore } from '../src/store/index.js';
import { DEFAULT_TURN_SETTINGS } from '../src/workflows/contract.js';
import { spawnBenchWorker, stopBenchWorkers } from './processes.js';
import { mergeBenchResults, percentile } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const runs = Number(process.env['BENCH_RECOVERY_RUNS'] ?? 10);
const heartbeatTimeout =
  process.env['BENCH_RECOVERY_HEARTBEAT'] ?? DEFAULT_TURN_SETTINGS.model.heartbeatTimeout;
const TARGET_P50_MS = 5_000;
const perStepTimeoutMs = 60_000;

interface ModelStart {
  turnId: string;
  pid: number;
  at: number;
}

const dir = mkdtempSync(join(tmpdir(), 'turnkit-recovery-bench-'));
const databaseUrl = join(dir, 'recovery-bench.sqlite');
const store = await openStore(databaseUrl);
const taskQueue = `turnkit-recovery-bench-${Date.now()}`;
const script = fileURLToPath(new URL('./recovery-worker.ts', import.meta.url));

const starts: ModelStart[] = [];
const listeners = new Set<() => void>();
const workers = new Map<number, ChildProcess>();

/** A worker process; resolves once it polls. */
async function spawnWorker(): Promise<ChildProcess> {
  const child = await spawnBenchWorker(
    script,
    { TURNKIT_BENCH_DATABASE_URL: databaseUrl, TURNKIT_BENCH_TASK_QUEUE: taskQueue, TURNKIT_BENCH_DIR: dir },
    'recovery-worker ready',
    (message) => {
      starts.push(message as ModelStart);
      for (const listener of listeners) listener();
    },
  );
  workers.set(child.pid!, child);
  child.on('exit', () => workers.delete(child.pid!));
  return child;
}

/** The next model-call start of `turnId` after `index` starts were seen. */
function modelStart(turnId: string, after: number): Promise<ModelStart> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      listeners.delete(check);
      reject(new Error(`recovery bench: no model call of ${turnId} within ${perStepTimeoutMs} ms`));
    }, perStepTimeoutMs);
    const check = () => {
      const found = starts.slice(after).find((start) => start.turnId === turnId);
      if (!found) return;
      clearTimeout(timer);
      listeners.delete(check);
      resolve(found);
    };
    listeners.add(check);
    check();
  });
}

const temporal = new Client({ connection: await Connection.connect({ address }) });
const agents = new AgentRegistry([defineAgent({ name: 'recover', model: 'bench-model' })]);
const client = new TurnKitClient({
  store,
  agents,
  temporal,
  taskQueue,
  turnSettings: { model: { heartbeatTimeout } },
});

await Promise.all([spawnWorker(), spawnWorker()]);
const recoveries: number[] = [];
const started = Date.now();
for (let i = 0; i < runs; i++) {
  const seen = starts.length;
  const run = await client.run('recover', `Killed mid-call #${i}`);
  const first = await modelStart(run.turnId, seen);
  await new Promise((r) => setTimeout(r, 100 + Math.random() * 500));
  const victim = workers.get(first.pid);
  if (!victim) throw new Error(`recovery bench: worker ${first.pid} is gone`);
  const replacement = spawnWorker();
  const killedAt = Date.now();
  victim.kill('SIGKILL');
  const again = await modelStart(run.turnId, starts.indexOf(first) + 1);
  if (again.pid === first.pid) throw new Error('recovery bench: the killed worker ran the step again');
  recoveries.push(again.at - killedAt);
  const turn = await run.result();
  if (turn.status !== 'completed') throw new Error(`recovery bench: turn ended ${turn.status}`);
  console.log(`kill ${i + 1}/${runs}: step running again after ${again.at - killedAt} ms`);
  await replacement;
}

const results = {
  recovery_runs: runs,
  recovery_heartbeat_timeout: String(heartbeatTimeout),
  recovery_after_kill_p50_ms: percentile(recoveries, 50),
  recovery_after_kill_p99_ms: percentile(recoveries, 99),
  recovery_after_kill_max_ms: Math.max(...recoveries),
  recovery_after_kill_min_ms: Math.min(...recoveries),
};
const verdict = results.recovery_after_kill_p50_ms <= TARGET_P50_MS ? 'met' : 'missed';
console.log(`\nTurnKit recovery benchmark (n=${runs}, ${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
for (const [key, value] of Object.entries(results)) console.log(key.padEnd(30), String(value).padStart(12));
console.log(`target p50 <= ${TARGET_P50_MS} ms: ${verdict.toUpperCase()}`);

mergeBenchResults({
  recovery_measuredAt: new Date().toISOString(),
  ...results,
  recovery_after_kill_p50_ms_target: `<= ${TARGET_P50_MS} ms: ${verdict}`,
});

await stopBenchWorkers(workers.values());
await store.close();
await temporal.connection.close();
