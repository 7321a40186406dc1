/**
 * `turnkit fork`, `turnkit regenerate` and the forks `turnkit show` lists (decision 47), as a
 * person uses them against the real dev server: a worker started with `turnkit worker`, the
 * other commands as spawned processes, a real SQLite file.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { waitUntil } from '../helpers/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'src/cli/bin.ts');
// The commands run in a scratch directory, so tsx is named by its resolved URL.
const tsx = import.meta.resolve('tsx');
const agentsModule = join(root, 'test/fixtures/cli-agents.ts');
const dir = mkdtempSync(join(tmpdir(), 'turnkit-cli-fork-'));
const env: Record<string, string> = {
  TURNKIT_DATABASE_URL: join(dir, 'cli.sqlite'),
  TURNKIT_TASK_QUEUE: `turnkit-cli-fork-${process.pid}-${Date.now()}`,
  TURNKIT_AGENTS: agentsModule,
  TEMPORAL_ADDRESS: process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233',
  NO_COLOR: '1',
};

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function turnkit(args: string[], extraEnv: Record<string, string> = {}): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', tsx, bin, ...args], {
      cwd: dir,
      env: { ...process.env, ...env, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const turnIdOf = (result: Result) => (JSON.parse(result.stdout) as { turnId: string }).turnId;

let worker: ChildProcess;
let store: Store;

beforeAll(async () => {
  worker = spawn(process.execPath, ['--import', tsx, bin, 'worker'], {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('turnkit worker: agents helper, slow')) resolve();
    };
    worker.stdout!.on('data', onData);
    worker.stderr!.on('data', onData);
    worker.on('exit', (code) => reject(new Error(`turnkit worker exited ${code}: ${output}`)));
  });
  store = await openStore(env['TURNKIT_DATABASE_URL']);
});

afterAll(async () => {
  await store?.close();
  if (worker && worker.exitCode === null) {
    const exited = new Promise((resolve) => worker.on('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('turnkit fork and regenerate', () => {
  it('fork: cli fork --at a message, regenerate a turn with another model, show lists the forks', async () => {
    const started = await turnkit(['--json', 'run', 'helper', 'Define durable']);
    expect(started.code, started.stderr).toBe(0);
    const turnId = turnIdOf(started);
    await waitUntil(async () => (await store.loadTurn(turnId)).status === 'completed', 30_000);
    const conversationId = (await store.loadTurn(turnId)).conversationId;
    const messages = await store.listMessages(conversationId);
    const call = messages.find((m) => m.kind === 'tool_call')!;
    const result = messages.find((m) => m.kind === 'tool_result')!;

    // `show <conversation>` gives the message ids to fork at.
    const conversation = await turnkit(['show', conversationId]);
    expect(conversation.code).toBe(0);
    expect(conversation.stdout).toContain(`#${result.sequence} ${result.id} tool/tool_result`);

    const refused = await turnkit(['fork', conversationId, '--at', call.id]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/turnkit: ForkError: message msg_\w+ is inside a tool round/);
    expect(await store.listForks(conversationId)).toEqual([]);
    const usage = await turnkit(['fork', conversationId]);
    expect(usage.code).toBe(2);

    const forked = await turnkit(['fork', conversationId, '--at', result.id]);
    expect(forked.code, forked.stderr).toBe(0);
    const forkId = forked.stdout.trim();
    expect(forkId).toMatch(/^conv_[0-9a-f]{24}$/);
    expect(forked.stderr).toContain(`forked from ${conversationId} at ${result.id}: 3 messages`);
    expect((await store.listMessages(forkId)).map((m) => m.kind)).toEqual([
      'text',
      'tool_call',
      'tool_result',
    ]);

    const regenerated = await turnkit(['regenerate', turnId, '--model', 'other-model']);
    expect(regenerated.code, regenerated.stderr).toBe(0);
    const newTurnId = regenerated.stdout.trim();
    await waitUntil(async () => (await store.loadTurn(newTurnId)).status === 'completed', 30_000);
    const newTurn = await store.loadTurn(newTurnId);
    expect(newTurn.model).toBe('other-model');
    expect(newTurn.outputText).toBe('Durable: lasting.');
    expect(newTurn.conversationId).not.toBe(conversationId);

    const shown = await turnkit(['show', turnId]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('forks');
    expect(shown.stdout).toContain(`${forkId} at ${result.id}`);
    expect(shown.stdout).toContain(`${newTurn.conversationId} at (empty)`);
    const json = JSON.parse((await turnkit(['--json', 'show', turnId])).stdout) as {
      forks: { conversation: string; at: string | null }[];
    };
    expect(json.forks).toEqual([
      expect.objectContaining({ conversation: forkId, at: result.id }),
      expect.objectContaining({ conversation: newTurn.conversationId, at: null }),
    ]);
    const fork = await turnkit(['show', forkId]);
    expect(fork.stdout).toContain(`forked from ${conversationId} at ${result.id}`);
  }, 120_000);
});
