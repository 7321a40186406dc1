/**
 * Service restart (issue 5): PostgreSQL is restarted while a turn runs on the PostgreSQL
 * store, and the run completes; afterwards the fault-suite invariants of test/helpers/fault.ts
 * hold. The worker runs in its own process (test/fixtures/fault-worker.ts) and the turn is
 * parked at a known step (the `gate` tool, or the worker pausing itself right after a tool
 * result committed) while PostgreSQL goes down for a few seconds: during a tool, as a tool
 * returns, before a local store step, between a model response and its tools, between two
 * tools. Model and tool activities wait for the store inside their attempt
 * (src/engine/step/store-outage.ts), so the outage uses up none of their few retries.
 *
 * The shared PostgreSQL on 127.0.0.1:5432 is never touched: every run starts a private
 * cluster (initdb into a temporary directory, trust auth, a free port, its socket inside the
 * directory) and removes it afterwards. initdb and postgres refuse to run as root, so as root
 * they run as the `postgres` OS user. Without the PostgreSQL server binaries the suite fails in
 * CI and is skipped loudly elsewhere.
 */
import { execFile } from 'node:child_process';
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunHandle } from '../../src/client/run-handle.js';
import { openStore } from '../../src/store/index.js';
import type { Store, TurnRecord } from '../../src/store/types.js';
import type { FaultPoint } from '../fixtures/fault-agents.js';
import type { FaultWorker, TreeSnapshot } from '../helpers/fault.js';
import {
  effectsByKey,
  expectInvariants,
  faultCaseSetup,
  logLines,
  sleep,
  spawnFaultWorker,
  waitUntil,
  withTimeout,
} from '../helpers/fault.js';
import { requireTemporal } from '../helpers/temporal.js';
import { freePort } from '../helpers/temporal-server.js';
import { temporalConnections } from '../helpers/turnkit.js';

const execFileAsync = promisify(execFile);

/** How long PostgreSQL stays down in each case. */
const DOWNTIME_MS = 5_000;

/** The newest /usr/lib/postgresql/<version>/bin that has initdb, pg_ctl and postgres. */
function postgresBin(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => ['initdb', 'pg_ctl', 'postgres'].every((b) => existsSync(join(root, v, 'bin', b))))
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  return versions[0] ? join(root, versions[0], 'bin') : null;
}

/** A throwaway PostgreSQL cluster of this test file, on a port of its own. */
class PrivateCluster {
  readonly data: string;
  readonly url: string;

  private constructor(
    readonly bin: string,
    readonly dir: string,
    readonly port: number,
  ) {
    this.data = join(dir, 'data');
    this.url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  }

  static async create(bin: string): Promise<PrivateCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'turnkit-pgrestart-'));
    const cluster = new PrivateCluster(bin, dir, await freePort());
    if (userInfo().uid === 0) {
      const ids = await execFileAsync('id', ['-u', 'postgres']).then(
        async ({ stdout }) =>
          [Number(stdout), Number((await execFileAsync('id', ['-g', 'postgres'])).stdout)] as const,
        () => {
          throw new Error(
            'running as root, but there is no `postgres` OS user to run initdb and postgres as',
          );
        },
      );
      chownSync(dir, ids[0], ids[1]);
    }
    try {
      await cluster.#exec('initdb', [
        '-D',
        cluster.data,
        '-U',
        'postgres',
        '--auth=trust',
        '--no-sync',
        '--encoding=UTF8',
        '--locale=C',
      ]);
      // fsync and full-page writes only guard against an OS crash. synchronous_commit stays
      // on: with it off an immediate shutdown loses commits the worker has already acted on.
      appendFileSync(
        join(cluster.data, 'postgresql.conf'),
        [
          "listen_addresses = '127.0.0.1'",
          `port = ${cluster.port}`,
          `unix_socket_directories = '${dir}'`,
          'fsync = off',
          'full_page_writes = off',
          '',
        ].join('\n'),
      );
      await cluster.start();
    } catch (error) {
      await cluster.destroy();
      throw error;
    }
    return cluster;
  }

  /** Runs a PostgreSQL binary, as the `postgres` OS user when this process is root. */
  async #exec(name: string, args: string[]): Promise<string> {
    const command = join(this.bin, name);
    const [file, argv] =
      userInfo().uid === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
    try {
      const { stdout } = await execFileAsync(file, argv, { timeout: 60_000 });
      return String(stdout);
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      throw new Error(`${name} ${args.join(' ')} failed: ${String(error)}\n${stdout ?? ''}${stderr ?? ''}`, {
        cause: error,
      });
    }
  }

  async start(): Promise<void> {
    await this.#exec('pg_ctl', [
      '-D',
      this.data,
      '-l',
      join(this.dir, 'postgres.log'),
      '-w',
      '-t',
      '60',
      'start',
    ]);
  }

  /** `fast` ends every session cleanly (57P01); `immediate` is a crash (recovery on start). */
  async stop(mode: 'fast' | 'immediate'): Promise<void> {
    await this.#exec('pg_ctl', ['-D', this.data, '-m', mode, '-w', '-t', '60', 'stop']);
  }

  async destroy(): Promise<void> {
    // Whatever state a failed case left it in: a pid file means a postmaster may be running.
    if (existsSync(join(this.data, 'postmaster.pid'))) await this.stop('immediate').catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const temporalUp = await requireTemporal();
const bin = postgresBin();

function describeWithPrivateCluster(name: string, fn: () => void): void {
  if (bin) {
    describe.skipIf(!temporalUp)(name, fn);
    return;
  }
  const message =
    'the PostgreSQL server binaries (/usr/lib/postgresql/<version>/bin/initdb, pg_ctl, postgres) are missing';
  if (process.env['CI']) {
    describe(name, () => {
      it('needs the PostgreSQL server binaries (CI never skips the service-restart suites)', () => {
        throw new Error(`${message}: install PostgreSQL (apt-get install postgresql)`);
      });
    });
    return;
  }
  console.warn(`\n!!! PostgreSQL restart suite SKIPPED: ${message}.\n!!! Install PostgreSQL to run it.\n`);
  describe.skip(name, fn);
}

interface CaseContext {
  run: RunHandle;
  log: string;
  gate: string;
  marker: string;
  worker: FaultWorker;
  /** Stops PostgreSQL (`pg:down` in the log), runs `whileDown`, waits out the downtime, starts it (`pg:up`). */
  restart(mode: 'fast' | 'immediate', whileDown?: () => Promise<void>): Promise<void>;
}

interface CaseResult {
  turn: TurnRecord;
  lines: string[];
  tree: TreeSnapshot;
}

const PENDING_STARTED = temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;

describeWithPrivateCluster('PostgreSQL restarted mid-run (private cluster, worker process)', () => {
  let cluster: PrivateCluster;
  let dir: string;
  let store: Store;
  const workers: FaultWorker[] = [];
  let counter = 0;

  beforeAll(async () => {
    cluster = await PrivateCluster.create(bin!);
    dir = mkdtempSync(join(tmpdir(), 'turnkit-pgrestart-log-'));
    store = await openStore(cluster.url);
  }, 120_000);
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await store?.close().catch(() => undefined);
    await cluster?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  /**
   * Starts a worker process (pausing itself at `faultAt`, if given) and a run of `agent`;
   * `outage` restarts PostgreSQL while the turn is parked; then the run must complete and the
   * invariants must hold.
   */
  async function restartCase(options: {
    agent: string;
    faultAt?: FaultPoint;
    outage: (ctx: CaseContext) => Promise<void>;
  }): Promise<CaseResult> {
    const name = `${options.agent}-${++counter}`;
    const { log, gate, marker, taskQueue, client } = faultCaseSetup({
      dir,
      name: `pgrestart-${name}`,
      store,
      temporal: (await temporalConnections()).client,
    });
    const worker = spawnFaultWorker({
      TURNKIT_TEST_DATABASE_URL: cluster.url,
      TURNKIT_TEST_LOG: log,
      TURNKIT_TEST_TASK_QUEUE: taskQueue,
      TURNKIT_TEST_FLAVOR: 'worker',
      TURNKIT_TEST_GATE: gate,
      ...(options.faultAt
        ? { TURNKIT_FAULT_AT: options.faultAt, TURNKIT_FAULT_MODE: 'stop', TURNKIT_FAULT_MARKER: marker }
        : {}),
    });
    workers.push(worker);
    await worker.ready;
    expect(worker.alive(), worker.output()).toBe(true);
    const run = await client.run(options.agent, `PostgreSQL restart case ${name}`);

    const restart = async (mode: 'fast' | 'immediate', whileDown?: () => Promise<void>) => {
      await cluster.stop(mode);
      const down = Date.now();
      appendFileSync(log, `pg:down:${mode}\n`);
      try {
        await whileDown?.();
        // The client's store fails meanwhile too.
        await expect(store.listTurns({ rootTurnId: run.rootTurnId })).rejects.toThrow(/unreachable/);
        await sleep(Math.max(0, DOWNTIME_MS - (Date.now() - down)));
      } finally {
        // Back up whatever happened, so that a failed case leaves the next ones a server.
        await cluster.start();
        appendFileSync(log, 'pg:up\n');
      }
    };
    await options.outage({ run, log, gate, marker, worker, restart });
    writeFileSync(gate, 'open');
    const turn = await withTimeout(run.result(), 90_000, () =>
      [`log:\n${logLines(log).join('\n')}`, `worker:\n${worker.output()}`].join('\n'),
    );
    await worker.stop();
    const lines = logLines(log);
    const tree = await expectInvariants(store, run.rootTurnId, log);
    return { turn, lines, tree };
  }

  const count = (lines: string[], prefix: string) => lines.filter((l) => l.startsWith(prefix)).length;
  /** Index of the first line matching `pattern` (the log is in the order things happened). */
  const at = (lines: string[], pattern: RegExp) => {
    const index = lines.findIndex((l) => pattern.test(l));
    expect(index, `a log line matching ${pattern}:\n${lines.join('\n')}`).toBeGreaterThanOrEqual(0);
    return index;
  };
  const logHas = (log: string, pattern: RegExp) => () => logLines(log).some((l) => pattern.test(l));
  /** Whether the turn's workflow has a `type` activity started on the worker now (and its attempt). */
  const startedActivity = async (run: RunHandle, type: string) => {
    const { raw } = await (await temporalConnections()).client.workflow.getHandle(run.workflowId).describe();
    return (raw.pendingActivities ?? []).find(
      (a) => a.activityType?.name === type && a.state === PENDING_STARTED,
    );
  };
  /**
   * The turn completed with the answer after its two model calls; each of `tools` ran in one
   * execution, started once, its effect made once under its key; and no model or tool
   * activity failed: the outage used up none of their attempts.
   */
  const expectCompletedOnce = ({ turn, lines, tree }: CaseResult, agent: string, tools: string[]) => {
    expect(turn.status, JSON.stringify(turn.error)).toBe('completed');
    expect(turn.outputText).toBe('worker done');
    expect(tree.executions.map((e) => [e.toolName, e.status])).toEqual(tools.map((t) => [t, 'completed']));
    for (const execution of tree.executions) {
      const key = `turnkit:tool:${execution.id}`;
      expect(count(lines, `attempt:${execution.toolName}:`)).toBe(1);
      expect(effectsByKey(lines, execution.toolName)).toEqual(new Map([[key, 1]]));
    }
    expect(count(lines, `model:${agent}:`)).toBe(2);
    expect(
      lines.filter((l) => /^activity:(toolCall|modelStep|claimStep):/.test(l) && !/:1:worker:ok$/.test(l)),
    ).toEqual([]);
  };

  it('FI postgres-restart: down (fast shutdown) while a tool runs, back before it returns; the turn completes, the tool ran once', async () => {
    const result = await restartCase({
      agent: 'waiter',
      outage: async ({ log, restart }) => {
        await waitUntil('the gate tool to run', logHas(log, /^attempt:gate:/));
        await restart('fast');
      },
    });
    expectCompletedOnce(result, 'waiter', ['gate']);
    const { lines } = result;
    expect(at(lines, /^pg:up$/)).toBeLessThan(at(lines, /^effect:gate:/));
  }, 120_000);

  it('FI postgres-restart: the tool returns while PostgreSQL is down (immediate shutdown); its result commits once it is back, the tool does not run again', async () => {
    const result = await restartCase({
      agent: 'waiter',
      outage: async ({ run, log, gate, restart }) => {
        await waitUntil('the gate tool to run', logHas(log, /^attempt:gate:/));
        await restart('immediate', async () => {
          writeFileSync(gate, 'open');
          await waitUntil('the gate tool to return', logHas(log, /^returned:gate:|^effect:gate:/));
          await sleep(1_500);
          // Still the first attempt, holding the result until it can commit.
          expect((await startedActivity(run, 'toolCall'))?.attempt).toBe(1);
        });
      },
    });
    expectCompletedOnce(result, 'waiter', ['gate']);
    const { lines } = result;
    expect(at(lines, /^effect:gate:/)).toBeLessThan(at(lines, /^pg:up$/));
  }, 120_000);

  it('FI postgres-restart: down (immediate shutdown) right after a tool result committed, which closed the tools phase in the same block (decision 89); the tool call reports without the store, and the next model step, in its first attempt, waits until it is back', async () => {
    const result = await restartCase({
      agent: 'waiter',
      faultAt: 'after-tool-commit',
      outage: async ({ run, log, gate, marker, worker, restart }) => {
        await waitUntil('the gate tool to run', logHas(log, /^attempt:gate:/));
        writeFileSync(gate, 'open');
        // The worker pauses itself once the gate's result committed; that block closed the
        // tools phase too (the response's last call), so nothing is left for the store in this
        // activity. PostgreSQL goes down before the workflow moves on to the next model call.
        await waitUntil('the worker to pause after the commit', () => existsSync(marker));
        await restart('immediate', async () => {
          worker.child.kill('SIGCONT');
          await waitUntil('the tool call to report', logHas(log, /^activity:toolCall:1:worker:ok$/));
          await waitUntil('the next model step to wait for the store', async () =>
            Boolean(await startedActivity(run, 'modelStep')),
          );
          expect((await startedActivity(run, 'modelStep'))?.attempt).toBe(1);
        });
      },
    });
    expectCompletedOnce(result, 'waiter', ['gate']);
    const { lines } = result;
    expect(lines.some((l) => l.startsWith('activity:finishTools:'))).toBe(false);
    expect(at(lines, /^activity:toolCall:1:worker:ok$/)).toBeLessThan(at(lines, /^pg:up$/));
    expect(at(lines, /^activity:modelStep:1:worker:ok$/)).toBeGreaterThan(at(lines, /^pg:up$/));
  }, 120_000);

  it('FI postgres-restart: down (immediate shutdown) between the model response and its tool calls; the response is kept, each tool runs once when it is back', async () => {
    const result = await restartCase({
      agent: 'ledger',
      faultAt: 'after-model-commit',
      outage: async ({ run, marker, worker, restart }) => {
        await waitUntil('the worker to pause after the response committed', () => existsSync(marker));
        await restart('immediate', async () => {
          worker.child.kill('SIGCONT');
          await waitUntil('the first tool activity to wait for the store', async () =>
            Boolean(await startedActivity(run, 'toolCall')),
          );
        });
      },
    });
    expectCompletedOnce(result, 'ledger', ['charge', 'upsert']);
    const { lines } = result;
    expect(at(lines, /^attempt:charge:/)).toBeGreaterThan(at(lines, /^pg:up$/));
  }, 120_000);

  it('FI postgres-restart: down (immediate shutdown) between two tool calls of one response; the unsafe one that ran is not re-run, the next one runs once when it is back', async () => {
    const result = await restartCase({
      agent: 'ledger',
      faultAt: 'after-tool-commit',
      outage: async ({ run, log, marker, worker, restart }) => {
        await waitUntil('the worker to pause after the charge committed', () => existsSync(marker));
        await restart('immediate', async () => {
          worker.child.kill('SIGCONT');
          await waitUntil('the charge activity to finish', logHas(log, /^activity:toolCall:1:worker:ok$/));
          await waitUntil('the next tool activity to wait for the store', async () =>
            Boolean(await startedActivity(run, 'toolCall')),
          );
        });
      },
    });
    expectCompletedOnce(result, 'ledger', ['charge', 'upsert']);
    const { lines } = result;
    expect(at(lines, /^effect:charge:/)).toBeLessThan(at(lines, /^pg:down:/));
    expect(at(lines, /^attempt:upsert:/)).toBeGreaterThan(at(lines, /^pg:up$/));
  }, 120_000);
});
