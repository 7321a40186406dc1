/**
 * Service restart (issue 5 item 5): the Temporal dev server is restarted mid-run on its
 * persistent database file, and the run completes. The test runs a private dev server
 * (test/helpers/temporal-server.ts: `temporal-dev.sh` on free ports, its own database), a fault
 * worker process connected to it and a client in this process. The `waiter` agent of
 * test/fixtures/fault-agents.ts parks the turn in its `gate` tool; the server is stopped (the
 * process gone, the port closed) and started again on the same port and database while the tool
 * runs; then the gate opens. The worker process is neither restarted nor told anything: its SDK
 * reconnects by itself. Afterwards the fault-suite invariants (test/helpers/fault.ts) hold.
 *
 * The outage lasts a few seconds (stop, 2 s, start), or 40 s in the last case. The worker's
 * polls are retried for as long as the server is away; a bare @temporalio/client wait gives up
 * with UNAVAILABLE after some 20 to 30 s without a server, so `RunHandle.result()` retries it.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { phaseOf } from '../../src/engine/step/turn-state.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import type { FaultWorker } from '../helpers/fault.js';
import {
  expectInvariants,
  faultCaseSetup,
  logLines,
  sleep,
  spawnFaultWorker,
  waitUntil,
  withTimeout,
} from '../helpers/fault.js';
import { PrivateTemporalServer, temporalCliProblem } from '../helpers/temporal-server.js';

function serverAvailable(): boolean {
  const problem = temporalCliProblem();
  if (problem === null) return true;
  const message = `cannot run a private Temporal dev server: ${problem}.`;
  const ci = process.env['CI'];
  if (ci && ci !== 'false' && ci !== '0') throw new Error(`${message} CI never skips the Temporal suites.`);
  console.warn(`\n!!! SKIPPING the Temporal restart suite: ${message}\n`);
  return false;
}

describe.skipIf(!serverAvailable())('FI temporal-restart: the Temporal server restarts mid-run', () => {
  let dir: string;
  let server: PrivateTemporalServer | undefined;
  let connection: Connection | undefined;
  let temporal: Client;
  let store: Store;
  const workers: FaultWorker[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'turnkit-temporal-restart-'));
    server = await PrivateTemporalServer.onFreePorts();
    await server.start();
    connection = await Connection.connect({ address: server.address });
    temporal = new Client({ connection, namespace: 'default' });
    store = await openStore(join(dir, 'turnkit.sqlite'));
  }, 240_000);
  afterAll(async () => {
    try {
      await Promise.all(workers.map((w) => w.stop()));
      await connection?.close();
      await store?.close();
    } finally {
      await server?.dispose();
    }
  }, 60_000);

  /**
   * Runs `waiter` on a fresh task queue, stops the server while its gate tool runs, waits,
   * starts the server again on the same port and database, and returns what the run left behind.
   * `openGate` says when the tool may finish: while the server is down (its completion must wait
   * for the restart) or after the restart.
   */
  async function restartCase(name: string, openGate: 'while-down' | 'after-restart', downMs = 2_000) {
    const srv = server!;
    const { log, gate, taskQueue, client } = faultCaseSetup({
      dir,
      name: `temporal-restart-${name}`,
      store,
      temporal,
    });
    const worker = spawnFaultWorker({
      TEMPORAL_ADDRESS: srv.address,
      TURNKIT_TEST_DATABASE_URL: join(dir, 'turnkit.sqlite'),
      TURNKIT_TEST_LOG: log,
      TURNKIT_TEST_TASK_QUEUE: taskQueue,
      TURNKIT_TEST_FLAVOR: 'worker',
      TURNKIT_TEST_GATE: gate,
    });
    workers.push(worker);
    await worker.ready;
    expect(worker.alive(), worker.output()).toBe(true);
    const timings: string[] = [];
    const details = () =>
      [
        `timings: ${timings.join(', ')}`,
        `log:\n${logLines(log).join('\n')}`,
        `worker:\n${worker.output()}`,
        `server log:\n${srv.logTail()}`,
      ].join('\n');

    const run = await client.run('waiter', `Wait for the gate across a Temporal restart (${name})`);
    // The client waits for the result across the restart, as an application would.
    const result = run.result();
    result.catch(() => undefined);
    await waitUntil('the gate tool to run', () => logLines(log).some((l) => l.startsWith('attempt:gate:')));
    const before = await run.turn();
    expect(before.status).toBe('running');
    expect(phaseOf(before)).toBe('tools');

    let t = Date.now();
    const lap = (what: string) => {
      timings.push(`${what} ${Date.now() - t} ms`);
      t = Date.now();
    };
    await srv.stop();
    lap('stop');
    if (openGate === 'while-down') {
      writeFileSync(gate, '');
      await waitUntil('the gate tool to finish while the server is down', () =>
        logLines(log).some((l) => l.startsWith('activity:toolCall:')),
      );
    }
    await sleep(downMs);
    const whileDown = await run.toolExecutions();
    expect(worker.alive(), `the worker outlives the server\n${details()}`).toBe(true);
    await srv.start();
    lap('down');
    if (openGate === 'after-restart') writeFileSync(gate, '');
    const turn = await withTimeout(result, 90_000, details);
    lap('completed after the restart in');
    expect(worker.alive(), `the worker survived the restart\n${details()}`).toBe(true);
    // The restarted server kept the run in its database and recorded its end.
    const description = await temporal.workflow.getHandle(run.workflowId).describe();
    expect(description.status.name).toBe('COMPLETED');
    await worker.stop();

    expect(turn.status, details()).toBe('completed');
    expect(turn.outputText).toBe('worker done');
    const tree = await expectInvariants(store, run.rootTurnId, log);
    expect(tree.turns).toHaveLength(1);
    expect(tree.executions.map((e) => [e.toolName, e.status])).toEqual([['gate', 'completed']]);
    const lines = logLines(log);
    const count = (prefix: string) => lines.filter((l) => l.startsWith(prefix)).length;
    expect(count('model:waiter:worker'), details()).toBe(2);
    expect(count('effect:gate:'), details()).toBe(1);
    return { whileDown, details };
  }

  it('FI temporal-restart: stopped and started again on its database while a tool runs, the turn completes; every effect once', async () => {
    const { whileDown } = await restartCase('tool-running', 'after-restart');
    expect(whileDown.map((e) => e.status)).toEqual(['running']);
  }, 120_000);

  it('FI temporal-restart: the tool finishes while the server is down; its result reaches the restarted server and the turn completes', async () => {
    const { whileDown, details } = await restartCase('tool-done-while-down', 'while-down');
    // The result was committed to the store while Temporal was away; the activity's completion
    // reached the server only after the restart.
    expect(
      whileDown.map((e) => e.status),
      details(),
    ).toEqual(['completed']);
  }, 120_000);

  it('FI temporal-restart: a 40 s outage, longer than the client’s own gRPC retries: run.result() waits it out and the turn completes', async () => {
    const { whileDown } = await restartCase('long-outage', 'after-restart', 40_000);
    expect(whileDown.map((e) => e.status)).toEqual(['running']);
  }, 180_000);
});
