/**
 * `npm run bench` (worker start): how long a worker process takes from its spawn until it
 * polls, on the compiled package with its prebuilt workflow bundle (`worker_start_ms`), on
 * the compiled package bundling the workflow code at boot (`worker_start_boot_ms`), and from
 * source through tsx (`worker_start_source_ms`, how the tests start theirs); medians of
 * BENCH_WORKER_STARTS (default 5) sequential starts, with the worker's own phases. Needs
 * `npm run build` (scripts/bench.sh runs it). Merges its keys into bench-results.json.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openStore } from '../src/store/index.js';
import { mergeBenchResults, percentile } from './results.js';

const starts = Number(process.env['BENCH_WORKER_STARTS'] ?? 5);
const root = fileURLToPath(new URL('..', import.meta.url));
const script = join(root, 'bench/worker-start.ts');
if (!existsSync(join(root, 'dist/workflow-bundle.js')))
  throw new Error('worker-start-bench: run `npm run build` first (dist/workflow-bundle.js is missing)');

const dir = mkdtempSync(join(tmpdir(), 'turnkit-worker-start-'));
const databaseUrl = join(dir, 'worker-start.sqlite');
// Migrated once here, so every start below opens a current database.
await (await openStore(databaseUrl)).close();

interface Start {
  wallMs: number;
  phases: Record<string, number>;
}

function startOnce(mode: 'prebuilt' | 'boot' | 'source'): Promise<Start> {
  const spawnedAt = performance.now();
  const source = mode === 'source';
  const child = spawn(process.execPath, [...(source ? ['--import', 'tsx'] : []), script], {
    env: {
      ...process.env,
      TURNKIT_BENCH_MODULES: join(root, source ? 'src' : 'dist'),
      TURNKIT_BENCH_DATABASE_URL: databaseUrl,
      TURNKIT_BENCH_TASK_QUEUE: `turnkit-worker-start-${Date.now()}`,
      TURNKIT_BENCH_BUNDLES: mode === 'prebuilt' ? 'prebuilt' : 'boot',
      NODE_NO_WARNINGS: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const line = /worker-start (\{.*\})/.exec(output);
      if (!line) return;
      const wallMs = performance.now() - spawnedAt;
      child.once('exit', () => resolve({ wallMs, phases: JSON.parse(line[1]!) as Record<string, number> }));
      child.kill('SIGTERM');
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      if (!/worker-start \{/.test(output))
        reject(new Error(`worker-start (${mode}) exited ${code}:\n${output}`));
    });
  });
}

const results: Record<string, number> = {};
const load = loadavg()[0]!;
for (const mode of ['prebuilt', 'boot', 'source'] as const) {
  const runs: Start[] = [];
  for (let i = 0; i < starts; i++) runs.push(await startOnce(mode));
  const wall = percentile(
    runs.map((r) => r.wallMs),
    50,
  );
  const key = mode === 'prebuilt' ? 'worker_start_ms' : `worker_start_${mode}_ms`;
  results[key] = Math.round(wall);
  const phase = (name: string) =>
    percentile(
      runs.map((r) => r.phases[name]!),
      50,
    );
  console.log(
    `worker start (${mode}): spawn → polling p50 ${Math.round(wall)} ms; in the process: imports ${phase('imported')} ms, store ${phase('storeOpen')} ms, worker created ${phase('created')} ms, polling ${phase('polling')} ms`,
  );
}
console.log(`worker start: load average ${load.toFixed(2)} at the start (a shared machine inflates these)`);
mergeBenchResults(results);
