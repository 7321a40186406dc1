/**
 * Issue 45, the first hour, on the command line as a person runs it (a spawned `turnkit`, a
 * real SQLite store, the dev server): read-only commands never create a store, a missing turn
 * names the store it was looked for in, `ls` marks turns of another store, and the small
 * faults of the report (raw JSON, `null`, an unexplained "waiting", a bare `--principal` error,
 * a raw Rust error without a server) read as a person needs them.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import type { CliResult } from '../helpers/cli.js';
import { cliSession, spawnCliWorker, stopCliWorker } from '../helpers/cli.js';
import { waitUntil } from '../helpers/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const cli = cliSession('firsthour');
const { dir, turnkit } = cli;

const turnIdOf = (result: CliResult) => (JSON.parse(result.stdout) as { turnId: string }).turnId;

/** `turnkit <args>` as a child process whose output can be awaited before it exits. */
function spawnCli(args: string[]) {
  const child = spawn(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), join(root, 'src/cli/bin.ts'), ...args],
    {
      cwd: dir,
      env: { ...process.env, ...cli.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, exited, stdout: () => stdout };
}

describe('first hour: the command line and its stores', () => {
  it('first hour: a mistyped store path is a clear error for show, ls, watch and pending, and no file or folder is created', async () => {
    const typo = join(dir, 'cli.sqlit');
    const missingDir = join(dir, 'no', 'such', 'dir', 'x.sqlite');
    const attempts: [string, string[]][] = [
      [typo, ['show', 'turn_000000000000000000000000']],
      [typo, ['ls']],
      [typo, ['watch', 'turn_000000000000000000000000']],
      [typo, ['pending', 'turn_000000000000000000000000']],
      [missingDir, ['show', 'turn_000000000000000000000000']],
    ];
    for (const [store, args] of attempts) {
      const result = await turnkit(['--store', store, ...args]);
      expect(result.code, args.join(' ')).toBe(1);
      expect(result.stderr).toBe(
        `turnkit: cannot open the store: there is no SQLite database at ${store} (the file does not exist; nothing was created): ` +
          'check --store or TURNKIT_DATABASE_URL (`turnkit worker` and `turnkit run` create a store)\n',
      );
    }
    expect(existsSync(typo)).toBe(false);
    expect(existsSync(join(dir, 'no'))).toBe(false);
    expect(
      readdirSync(dir).filter((name) => name.startsWith('cli.sqlit') && !name.startsWith('cli.sqlite')),
    ).toEqual([]);
  }, 300_000);

  it('first hour: run names its store and queue; ls marks the turns another store holds; show of such a turn names the file it read', async () => {
    const started = await turnkit(['--json', 'run', 'helper', 'Define durable']);
    expect(started.code).toBe(0);
    const turnId = turnIdOf(started);
    const ran = await turnkit(['run', 'helper', 'Define durable again']);
    expect(ran.stderr).toMatch(
      new RegExp(
        `^turnkit run: store ${cli.env['TURNKIT_DATABASE_URL']} \\(store_[0-9a-f]{20}\\), task queue ${cli.env['TURNKIT_TASK_QUEUE']}\\n`,
      ),
    );
    await waitUntil(async () => (await cli.store.loadTurn(turnId)).status === 'completed', 30_000);
    const other = join(dir, 'other.sqlite');
    await (await openStore(other)).close();
    let listed: CliResult | undefined;
    await waitUntil(async () => {
      listed = await turnkit(['--store', other, 'ls', '--agent', 'helper', '--limit', '100']);
      return listed.stdout.includes(turnId);
    }, 30_000);
    expect(listed!.stdout).toMatch(
      new RegExp(`${turnId} .* started \\S+ closed \\S+  \\(not in this store\\)`),
    );
    expect(listed!.stderr).toMatch(new RegExp(`not in the store ${other}: another store holds them`));
    const own = await turnkit(['--json', 'ls', '--agent', 'helper', '--limit', '100']);
    const row = (JSON.parse(own.stdout) as { turnId: string; inStore: boolean }[]).find(
      (r) => r.turnId === turnId,
    );
    expect(row?.inStore).toBe(true);
    const shown = await turnkit(['--store', other, 'show', turnId]);
    expect(shown.stderr).toBe(
      `turnkit: no turn ${turnId} in the store ${other} (another store? pass --store or set TURNKIT_DATABASE_URL)\n`,
    );
  }, 300_000);

  it('first hour: a call awaiting approval reads as such in show and watch (which points to pending); approve and reject print a line, --json their JSON', async () => {
    const turnId = turnIdOf(await turnkit(['--json', 'run', 'careful', 'Wire twice']));
    const held = async () =>
      (await cli.store.listToolExecutions({ turnId })).filter((e) => e.status === 'awaiting_approval');
    await waitUntil(async () => (await held()).length === 2, 30_000);
    const shown = await turnkit(['show', turnId]);
    expect(shown.stdout).toContain('  wire awaiting approval\n');
    expect(shown.stdout).not.toContain('null');
    const watching = spawnCli(['watch', turnId]);
    await waitUntil(async () => watching.stdout().includes('waiting'), 30_000);
    expect(watching.stdout()).toContain(`· waiting · for approval of wire (turnkit pending ${turnId}) ·`);
    const [first, second] = (await held()).map((execution) => execution.toolCallId);
    const approved = await turnkit(['approve', turnId, first!, '--principal', '"ada"']);
    expect(approved.stdout).toBe(`approved ${first} in turn ${turnId} (signed principal: no)\n`);
    const rejected = await turnkit(['--json', 'reject', turnId, second!]);
    expect(JSON.parse(rejected.stdout)).toMatchObject({ toolCallId: second, decision: 'rejected' });
    expect(await watching.exited).toBe(0);
  }, 300_000);

  it('first hour: --principal that is not JSON shows the form it expects', async () => {
    const result = await turnkit(['run', 'helper', 'Hi', '--principal', 'ada']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      `turnkit: --principal is not JSON: ada (a JSON value: --principal '{"user":"ada"}' or --principal '"ada"')\n`,
    );
  });

  it('first hour: a worker with no Temporal server says to start one, in one line', async () => {
    const result = await turnkit(['worker'], { TEMPORAL_ADDRESS: '127.0.0.1:1' });
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(
      /^turnkit: the worker cannot start against 127\.0\.0\.1:1: no Temporal server answers there \(.*\)\. Start one \(in a checkout: \.\/temporal-dev\.sh start\), or point --address or TEMPORAL_ADDRESS at yours\n$/,
    );
  }, 60_000);

  it('first hour: the examples ship an agents module that turnkit worker accepts, and the worker names its store', async () => {
    const worker = spawnCliWorker(
      { ...process.env, ...cli.env, TURNKIT_AGENTS: join(root, 'examples/research-agents.ts') },
      dir,
    );
    try {
      await worker.ready('turnkit worker: agents researcher on task queue');
      expect(worker.output()).toContain(`store ${cli.env['TURNKIT_DATABASE_URL']} (store_`);
    } finally {
      await stopCliWorker(worker.child);
    }
  }, 300_000);
});
