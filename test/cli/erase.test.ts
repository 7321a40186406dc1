/**
 * `turnkit erase` as an operator runs it: a spawned CLI against a real SQLite file, with a
 * `turnkit worker` on the task queue running the erasure workflow (the shared dev server).
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { cliSession, spawnCliWorker, stopCliWorker } from '../helpers/cli.js';
import { requireTemporal } from '../helpers/temporal.js';
import { waitUntil } from '../helpers/wait.js';

describe.skipIf(!(await requireTemporal()))('turnkit erase', () => {
  const session = cliSession('erase');

  /** A conversation of `principal` with two messages and a finished turn, written to the store. */
  async function plant(principal: unknown) {
    const conversation = await session.store.createConversation({
      agentName: 'helper',
      metadata: { principal: principal as never },
    });
    await session.store.appendMessage({
      conversationId: conversation.id,
      role: 'user',
      content: 'my address is …',
    });
    await session.store.appendMessage({
      conversationId: conversation.id,
      role: 'assistant',
      content: 'noted',
    });
    const turn = await session.store.createTurn({
      conversationId: conversation.id,
      agentName: 'helper',
      status: 'running',
    });
    await session.store.updateTurn(turn.id, { status: 'completed', completedAt: new Date().toISOString() });
    return conversation.id;
  }

  it('privacy: turnkit erase --dry-run prints what would go and removes nothing; erase removes it; a second erase finds nothing; bad flags are usage errors', async () => {
    const carol = await plant({ user: 'carol' });
    const dave = await plant({ user: 'dave' });

    const dry = await session.turnkit(['erase', '--principal', '{"user":"carol"}', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toBe(
      'erase would remove 1 conversation, 2 messages, 1 turn, 1 budget ledger row, 0 workflows, 0 schedules\n',
    );
    expect((await session.store.loadConversation(carol)).id).toBe(carol);

    const real = await session.turnkit([
      '--json',
      'erase',
      '--principal',
      '{"user":"carol"}',
      '--batch-size',
      '1',
    ]);
    expect(real.code, real.stderr).toBe(0);
    expect(JSON.parse(real.stdout)).toMatchObject({
      dryRun: false,
      subject: 'principal',
      rows: { conversations: 1, messages: 2, turns: 1, budgetLedger: 1 },
      workflows: 0,
      schedules: 0,
    });
    await expect(session.store.loadConversation(carol)).rejects.toThrow(/not found/);
    expect(await session.store.listMessages(dave)).toHaveLength(2);

    const again = await session.turnkit(['erase', '--conversation', carol]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^erase removed nothing \(erasure erasure_[0-9a-f]+\)\n$/);

    const neither = await session.turnkit(['erase', '--dry-run']);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toContain('erase needs exactly one of --principal <json> and --conversation <id>');
    const both = await session.turnkit(['erase', '--principal', '"carol"', '--conversation', dave]);
    expect(both.code).toBe(2);
    const notJson = await session.turnkit(['erase', '--principal', 'carol']);
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toContain('--principal is not JSON');
    expect(await session.store.listMessages(dave)).toHaveLength(2);
  }, 180_000);

  it('privacy: an erasure whose worker is killed halfway (SIGKILL) completes on a new worker with the report its dry run gave', async () => {
    const erin = { user: 'erin' };
    for (let i = 0; i < 8; i++) await plant(erin);
    const dry = await session.turnkit(['--json', 'erase', '--principal', '{"user":"erin"}', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    const predicted = JSON.parse(dry.stdout) as { rows: Record<string, number> };
    expect(predicted.rows).toMatchObject({ conversations: 8, messages: 16, turns: 8 });

    // One row per delete: the erasure takes dozens of steps, and the worker dies among them.
    const erasing = session.turnkit([
      '--json',
      'erase',
      '--principal',
      '{"user":"erin"}',
      '--batch-size',
      '1',
    ]);
    const ledger = new Database(session.env['TURNKIT_DATABASE_URL']!, {
      readonly: true,
      fileMustExist: true,
    });
    const stands = () =>
      ledger
        .prepare('SELECT state, completed_at FROM turnkit_erasures ORDER BY created_at DESC LIMIT 1')
        .get() as { state: string; completed_at: string | null } | undefined;
    let replacement: ReturnType<typeof spawnCliWorker> | undefined;
    try {
      await waitUntil(async () => {
        const row = stands();
        return row !== undefined && (JSON.parse(row.state) as { phase: string }).phase === 'rows';
      }, 60_000);
      session.worker.kill('SIGKILL');
      await new Promise((resolve) => session.worker.once('exit', resolve));
      expect(stands()?.completed_at).toBeNull();
      // Killed halfway: some of erin's conversations are still there (dave's one is never erased).
      const left = ledger.prepare('SELECT count(*) AS n FROM turnkit_conversations').get() as { n: number };
      expect(left.n).toBeGreaterThan(1);

      replacement = spawnCliWorker({ ...process.env, ...session.env }, session.dir);
      await replacement.ready('turnkit worker: agents helper, slow');
      const real = await erasing;
      expect(real.code, real.stderr).toBe(0);
      const report = JSON.parse(real.stdout) as { rows: Record<string, number>; dryRun: boolean };
      expect(report.dryRun).toBe(false);
      expect(report.rows).toEqual(predicted.rows);
      expect(stands()?.completed_at).not.toBeNull();
      const again = await session.turnkit(['erase', '--principal', '{"user":"erin"}']);
      expect(again.stdout).toMatch(/^erase removed nothing/);
    } finally {
      ledger.close();
      if (replacement) await stopCliWorker(replacement.child);
    }
  }, 240_000);
});
