/**
 * `turnkit fork`, `turnkit regenerate` and the forks `turnkit show` lists (decision 47), as a
 * person uses them against the real dev server: a worker started with `turnkit worker`, the
 * other commands as spawned processes, a real SQLite file.
 */
import { describe, expect, it } from 'vitest';
import type { CliResult } from '../helpers/cli.js';
import { cliSession } from '../helpers/cli.js';
import { waitUntil } from '../helpers/wait.js';

const cli = cliSession('cli-fork');
const { turnkit } = cli;

const turnIdOf = (result: CliResult) => (JSON.parse(result.stdout) as { turnId: string }).turnId;

describe('turnkit fork and regenerate', () => {
  it('fork: cli fork --at a message, regenerate a turn with another model, show lists the forks', async () => {
    const started = await turnkit(['--json', 'run', 'helper', 'Define durable']);
    expect(started.code, started.stderr).toBe(0);
    const turnId = turnIdOf(started);
    await waitUntil(async () => (await cli.store.loadTurn(turnId)).status === 'completed', 30_000);
    const conversationId = (await cli.store.loadTurn(turnId)).conversationId;
    const messages = await cli.store.listMessages(conversationId);
    const call = messages.find((m) => m.kind === 'tool_call')!;
    const result = messages.find((m) => m.kind === 'tool_result')!;

    // `show <conversation>` gives the message ids to fork at.
    const conversation = await turnkit(['show', conversationId]);
    expect(conversation.code).toBe(0);
    expect(conversation.stdout).toContain(`#${result.sequence} ${result.id} tool/tool_result`);

    const refused = await turnkit(['fork', conversationId, '--at', call.id]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/turnkit: ForkError: message msg_\w+ is inside a tool round/);
    expect(await cli.store.listForks(conversationId)).toEqual([]);
    const usage = await turnkit(['fork', conversationId]);
    expect(usage.code).toBe(2);

    const forked = await turnkit(['fork', conversationId, '--at', result.id]);
    expect(forked.code, forked.stderr).toBe(0);
    const forkId = forked.stdout.trim();
    expect(forkId).toMatch(/^conv_[0-9a-f]{24}$/);
    expect(forked.stderr).toContain(`forked from ${conversationId} at ${result.id}: 3 messages`);
    expect((await cli.store.listMessages(forkId)).map((m) => m.kind)).toEqual([
      'text',
      'tool_call',
      'tool_result',
    ]);

    const regenerated = await turnkit(['regenerate', turnId, '--model', 'other-model']);
    expect(regenerated.code, regenerated.stderr).toBe(0);
    const newTurnId = regenerated.stdout.trim();
    await waitUntil(async () => (await cli.store.loadTurn(newTurnId)).status === 'completed', 30_000);
    const newTurn = await cli.store.loadTurn(newTurnId);
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
