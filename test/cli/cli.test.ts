/**
 * The `turnkit` command as a person uses it, against the real dev server: a worker started
 * with `turnkit worker`, the other commands as spawned processes (stdout, stderr, exit code),
 * and `watch` in a real terminal (tmux, read back with capture-pane).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { CliResult } from '../helpers/cli.js';
import { cliSession, spawnCliWorker } from '../helpers/cli.js';
import { processAlive } from '../helpers/temporal-server.js';
import { waitUntil } from '../helpers/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'src/cli/bin.ts');
// The commands run in a scratch directory, so tsx is named by its resolved URL.
const tsx = import.meta.resolve('tsx');
const cli = cliSession('cli');
const { dir, env, turnkit } = cli;

type Result = CliResult;

const turnIdOf = (result: Result) => (JSON.parse(result.stdout) as { turnId: string }).turnId;

describe('turnkit command line', () => {
  it('cli: run --follow prints progress and the output, exits 0, and the store says completed', async () => {
    const result = await turnkit(['run', 'helper', 'Define durable', '--follow']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Durable: lasting.');
    expect(result.stdout).toMatch(/helper turn_\w+ · completed · iteration 2\/5 · 40 tokens/);
    expect(result.stdout).not.toContain('\u001b['); // not a TTY: plain
    const turnId = /turn_[0-9a-f]{24}/.exec(result.stderr)![0];
    expect((await cli.store.loadTurn(turnId)).status).toBe('completed');
  });

  it('cli: show gives the transcript, tool executions, usage, cost and the UI link; --json parses', async () => {
    const started = await turnkit(['--json', 'run', 'helper', 'Define durable again']);
    expect(started.code).toBe(0);
    const turnId = turnIdOf(started);
    await waitUntil(async () => (await cli.store.loadTurn(turnId)).status === 'completed', 30_000);

    const shown = await turnkit(['show', turnId]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`helper ${turnId} completed`);
    expect(shown.stdout).toContain('#1 user: Task: Define durable again');
    expect(shown.stdout).toContain('→ lookup({"word":"durable"})');
    expect(shown.stdout).toMatch(/lookup completed \{"word":"durable","meaning":"lasting"\}/);
    expect(shown.stdout).toContain('40 tokens (32 in, 8 out)');
    expect(shown.stdout).toContain(`/workflows/turnkit-turn-${turnId}`);

    const json = await turnkit(['--json', 'show', turnId]);
    const parsed = JSON.parse(json.stdout) as { turn: { status: string }; executions: unknown[] };
    expect(parsed.turn.status).toBe('completed');
    expect(parsed.executions).toHaveLength(1);
  });

  it('cli: ls finds turns through Temporal visibility by agent and status', async () => {
    const started = await turnkit(['--json', 'run', 'helper', 'Listed']);
    const turnId = turnIdOf(started);
    await waitUntil(async () => (await cli.store.loadTurn(turnId)).status === 'completed', 30_000);
    let listed: { turnId: string; agent: string; status: string }[] = [];
    await waitUntil(async () => {
      const result = await turnkit([
        '--json',
        'ls',
        '--agent',
        'helper',
        '--status',
        'completed',
        '--limit',
        '50',
      ]);
      listed = JSON.parse(result.stdout) as typeof listed;
      return listed.some((row) => row.turnId === turnId);
    }, 30_000);
    expect(listed.every((row) => row.agent === 'helper' && row.status === 'completed')).toBe(true);
    const none = await turnkit(['ls', '--agent', 'nobody-has-this-agent']);
    expect(none.code).toBe(0);
    expect(none.stdout).toBe('');
    expect(none.stderr).toContain('no turns match');
  });

  it('cli: cancel stops a running turn (watch exits 4), and cancelling it again is a no-op', async () => {
    const turnId = turnIdOf(
      await turnkit(['--json', 'run', 'slow', 'Ponder 60000', '--principal', '{"user":"ada"}']),
    );
    await waitUntil(
      async () => (await cli.store.listToolExecutions({ turnId })).some((e) => e.status === 'running'),
      30_000,
    );
    const watching = turnkit(['watch', turnId]);
    const cancelled = await turnkit(['cancel', turnId]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stderr).toContain(`cancel sent to ${turnId}`);
    const watched = await watching;
    expect(watched.code).toBe(4);
    expect(watched.stdout).toContain('· cancelled ·');
    expect((await cli.store.loadTurn(turnId)).status).toBe('cancelled');
    const again = await turnkit(['cancel', turnId]);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain('already cancelled');
  });

  it('cli: pending lists held calls; approve and reject decide them; pause and resume answer; a refusal is one line', async () => {
    const turnId = turnIdOf(await turnkit(['--json', 'run', 'careful', 'Wire twice']));
    const held = async () =>
      (await cli.store.listToolExecutions({ turnId })).filter((e) => e.status === 'awaiting_approval');
    await waitUntil(async () => (await held()).length === 2, 30_000);
    const pending = await turnkit(['pending', turnId]);
    expect(pending.code).toBe(0);
    const [first, second] = pending.stdout
      .trim()
      .split('\n')
      .map((line) => line.split(' ')[0]!);
    expect(pending.stdout).toContain('wire {"amount":1}');
    const paused = await turnkit(['--json', 'pause', turnId, '--principal', '"ada"']);
    expect(JSON.parse(paused.stdout)).toMatchObject({ pauseRequested: true });
    const resumed = await turnkit(['--json', 'resume', turnId]);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ pauseRequested: false });
    const refused = await turnkit(['approve', turnId, 'call_nope']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toContain('ControlError');
    const approved = await turnkit(['--json', 'approve', turnId, first!, '--note', 'ok']);
    expect(JSON.parse(approved.stdout)).toMatchObject({ toolCallId: first, decision: 'approved' });
    const rejected = await turnkit(['--json', 'reject', turnId, second!, '--reason', 'once is enough']);
    expect(JSON.parse(rejected.stdout)).toMatchObject({ decision: 'rejected' });
    await waitUntil(async () => (await cli.store.loadTurn(turnId)).status === 'completed', 30_000);
    const rows = await cli.store.listToolExecutions({ turnId });
    expect(rows.map((row) => row.status)).toEqual(['completed', 'failed']);
    expect(rows[1]!.error?.message).toBe('rejected by an unnamed person: once is enough');
  });

  it("cli: pending on the root lists a sub-agent's held calls with their turn; approve and reject through the root reach the child", async () => {
    const rootId = turnIdOf(await turnkit(['--json', 'run', 'supervisor', 'Delegate the wires']));
    let childId = '';
    await waitUntil(async () => {
      const child = (await cli.store.listTurns({ rootTurnId: rootId })).find((t) => t.id !== rootId);
      if (!child) return false;
      childId = child.id;
      const rows = await cli.store.listToolExecutions({ turnId: child.id });
      return rows.filter((e) => e.status === 'awaiting_approval').length === 2;
    }, 30_000);
    const pending = await turnkit(['pending', rootId]);
    expect(pending.code).toBe(0);
    const lines = pending.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).toContain(`in turn ${childId} (careful_child)`);
    const [first, second] = lines.map((line) => line.split(' ')[0]!);
    const approved = await turnkit(['--json', 'approve', rootId, first!]);
    expect(JSON.parse(approved.stdout)).toMatchObject({
      toolCallId: first,
      decision: 'approved',
      turnId: childId,
    });
    const rejected = await turnkit([
      '--json',
      'reject',
      rootId,
      second!,
      '--turn',
      childId,
      '--reason',
      'one is enough',
    ]);
    expect(JSON.parse(rejected.stdout)).toMatchObject({ decision: 'rejected', turnId: childId });
    await waitUntil(async () => (await cli.store.loadTurn(rootId)).status === 'completed', 30_000);
    const rows = await cli.store.listToolExecutions({ turnId: childId });
    expect(rows.map((row) => row.status)).toEqual(['completed', 'failed']);
  });

  it('cli: send delivers a durable message once per key, and the idle conversation runs a turn', async () => {
    const turnId = turnIdOf(await turnkit(['--json', 'run', 'helper', 'First']));
    await waitUntil(async () => (await cli.store.loadTurn(turnId)).status === 'completed', 30_000);
    const { conversationId } = await cli.store.loadTurn(turnId);
    const first = await turnkit(['send', conversationId, 'Define durable once more', '--key', 'cli-send-1']);
    const second = await turnkit(['send', conversationId, 'Define durable once more', '--key', 'cli-send-1']);
    expect(first.code).toBe(0);
    expect(second.code).toBe(0);
    expect(first.stdout.split(' ')[0]).toBe(second.stdout.split(' ')[0]);
    await waitUntil(async () => {
      const turns = await cli.store.listTurns({ conversationId });
      return turns.length === 2 && turns.every((turn) => turn.status === 'completed');
    }, 30_000);
    const texts = (await cli.store.listMessages(conversationId)).flatMap((m) =>
      m.content.flatMap((part) => (part.type === 'text' ? [part.text] : [])),
    );
    expect(texts.filter((text) => text.includes('Define durable once more'))).toHaveLength(1);
  });

  it('cli: post prints the receipt: an idle conversation starts a turn, and the same --request-id returns the same receipt', async () => {
    const turnId = turnIdOf(await turnkit(['--json', 'run', 'helper', 'First']));
    await waitUntil(async () => (await cli.store.loadTurn(turnId)).status === 'completed', 30_000);
    const { conversationId } = await cli.store.loadTurn(turnId);
    const args = [
      'post',
      conversationId,
      'Define durable again',
      '--request-id',
      'cli-post-1',
      '--policy',
      'queue',
    ];
    const first = await turnkit(['--json', ...args]);
    expect(first.code).toBe(0);
    const receipt = JSON.parse(first.stdout) as { disposition: string; turnId: string; messageId: string };
    expect(receipt).toMatchObject({ requestId: 'cli-post-1', disposition: 'started' });
    const again = await turnkit(args);
    expect(again.stdout).toBe(`started cli-post-1 message ${receipt.messageId} turn ${receipt.turnId}\n`);
    await waitUntil(async () => (await cli.store.loadTurn(receipt.turnId)).status === 'completed', 30_000);
    const bad = await turnkit(['post', conversationId, 'x', '--policy', 'later']);
    expect(bad.code).not.toBe(0);
  });

  it('cli: watch in a terminal shows the running tool with a spinner, the answer as it streams, then the final status', async () => {
    const turnId = turnIdOf(
      await turnkit(['--json', 'run', 'slow', 'Ponder 6000 in a terminal, answer slowly']),
    );
    const session = `turnkit-cli-${process.pid}`;
    const exports = Object.entries({ ...env, NO_COLOR: '' })
      .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
      .join(' ');
    const command = `env ${exports} ${process.execPath} --import ${tsx} ${bin} watch ${turnId}; echo "exit=$?"; sleep 30`;
    execFileSync('tmux', ['new-session', '-d', '-s', session, '-x', '160', '-y', '20', '-c', dir, command]);
    const screen = () => execFileSync('tmux', ['capture-pane', '-p', '-t', session]).toString();
    try {
      await waitUntil(
        async () => /slow turn_\w+ · running · [⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] tool ponder/.test(screen()),
        30_000,
      );
      // Part of the answer is on the screen while the turn is still running.
      await waitUntil(async () => {
        const now = screen();
        return /Done/.test(now) && !now.includes('Done pondering.') && now.includes('· running ·');
      }, 30_000);
      await waitUntil(async () => screen().includes('exit=0'), 30_000);
      const final = screen();
      // Streamed once, not printed again at the end.
      expect(final.split('Done pondering.')).toHaveLength(2);
      expect(final).toMatch(/slow turn_\w+ · completed · iteration 2\/4/);
      expect(final).toContain('Done pondering.');
    } finally {
      execFileSync('tmux', ['kill-session', '-t', session]);
    }
  });

  it('cli: a worker whose agents use an MCP server exits on SIGTERM, and closes the server; so does a command that loaded the module', async () => {
    const log = join(dir, 'mcp-calls.jsonl');
    writeFileSync(log, '');
    const mcpEnv = {
      TURNKIT_AGENTS: join(root, 'test/fixtures/cli-mcp-agents.ts'),
      TURNKIT_TASK_QUEUE: `${env['TURNKIT_TASK_QUEUE']}-mcp`,
      MCP_FIXTURE_LOG: log,
    };
    const entries = () =>
      readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { name: string; pid: number });
    const spawned = spawnCliWorker({ ...process.env, ...env, ...mcpEnv }, dir);
    const { child: mcpWorker, exited } = spawned;
    try {
      await spawned.ready('turnkit worker: agents echoer');
      // `run --follow` loads the module too (a server of its own), and still exits when done.
      const run = await turnkit(['run', 'echoer', 'Echo something', '--follow'], mcpEnv);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('Echoed.');
      const echo = entries().find((entry) => entry.name === 'echo')!;
      expect(echo).toBeDefined();
      mcpWorker.kill('SIGTERM');
      expect(await exited).toBe(0);
      // Every server the two processes started saw its session end, and is gone.
      const closed = entries().filter((entry) => entry.name === 'session:closed');
      expect(closed.map((entry) => entry.pid)).toContain(echo.pid);
      expect(closed).toHaveLength(2);
      for (const entry of closed) expect(processAlive(entry.pid)).toBe(false);
    } finally {
      if (mcpWorker.exitCode === null) mcpWorker.kill('SIGKILL');
    }
  });

  it('cli: bad input gets one line on stderr and a non-zero exit, never a stack trace', async () => {
    const unknownTurn = await turnkit(['show', 'turn_000000000000000000000000']);
    expect(unknownTurn).toMatchObject({
      code: 1,
      stderr: `turnkit: no turn turn_000000000000000000000000 in the store ${cli.env['TURNKIT_DATABASE_URL']} (another store? pass --store or set TURNKIT_DATABASE_URL)\n`,
    });

    const unknownAgent = await turnkit(['run', 'nobody', 'Hi']);
    expect(unknownAgent.code).toBe(1);
    expect(unknownAgent.stderr).toBe(
      'turnkit: unknown agent nobody: the module has helper, slow, careful, supervisor, careful_child\n',
    );

    const missing = await turnkit(['run', 'helper', 'Hi'], { TURNKIT_AGENTS: join(dir, 'missing.ts') });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^turnkit: agents module .*missing\.ts does not exist\n$/);

    writeFileSync(join(dir, 'empty.mjs'), 'export const nothing = 1;\n');
    const empty = await turnkit(['run', 'helper', 'Hi'], { TURNKIT_AGENTS: join(dir, 'empty.mjs') });
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain('exports no agents');

    writeFileSync(join(dir, 'broken.mjs'), 'export const agents = ;\n');
    const broken = await turnkit(['worker'], { TURNKIT_AGENTS: join(dir, 'broken.mjs') });
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/^turnkit: agents module .*broken\.mjs does not load: /);
    expect(broken.stderr.trim().split('\n')).toHaveLength(1);

    const noServer = await turnkit(['--address', '127.0.0.1:1', 'run', 'helper', 'Hi']);
    expect(noServer.code).toBe(1);
    expect(noServer.stderr).toMatch(/^turnkit: the Temporal server at 127\.0\.0\.1:1 does not answer/);
    expect(noServer.stderr.trim().split('\n')).toHaveLength(1);

    const usage = await turnkit(['run', 'helper']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("missing required argument 'task'");

    const debug = await turnkit(['--debug', 'show', 'turn_000000000000000000000000']);
    expect(debug.code).toBe(1);
    expect(debug.stderr).toMatch(/CliError: no turn .*\n\s+at /);
    // Nine CLI processes one after another: each loads the agents module, slow on a loaded machine.
  }, 180_000);
});
