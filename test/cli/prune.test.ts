/**
 * `turnkit prune [--dry-run]` as an operator runs it: a spawned CLI against a real SQLite file
 * (it opens only the store: no worker, no Temporal needed).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { runCli } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'turnkit-prune-'));
const file = join(dir, 'prune.sqlite');
const env = { ...process.env, TURNKIT_DATABASE_URL: file, TURNKIT_AGENTS: '' };

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('turnkit prune', () => {
  it('scale: prune --dry-run counts and writes nothing; prune removes the ended runs’ stream parts and keeps the live ones', async () => {
    const store = await SqliteStore.open(file);
    const conversation = await store.createConversation({ agentName: 'agent' });
    const ended = await store.createTurn({
      conversationId: conversation.id,
      agentName: 'agent',
      status: 'running',
    });
    const live = await store.createTurn({
      conversationId: conversation.id,
      agentName: 'agent',
      status: 'running',
    });
    for (const turn of [ended, live])
      await store.appendStreamParts(
        [0, 1, 2].map((i) => ({
          rootTurnId: turn.id,
          turnId: turn.id,
          type: 'status' as const,
          payload: { i },
        })),
      );
    await store.updateTurn(ended.id, { status: 'completed', completedAt: new Date().toISOString() });
    await store.close();

    const dry = await runCli(['prune', '--dry-run', '--stream-grace', '0'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toBe('prune would remove 3 stream parts\n');
    const usage = await runCli(['prune', '--events-age', 'soon'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--events-age must be a duration');

    const reopened = await SqliteStore.open(file);
    expect(await reopened.listStreamParts(ended.id)).toHaveLength(3);
    const real = await runCli(['--json', 'prune', '--stream-grace', '0', '--batch-size', '2'], env);
    expect(real.code, real.stderr).toBe(0);
    expect(JSON.parse(real.stdout)).toMatchObject({
      dryRun: false,
      deleted: { streamParts: 3, events: 0, conversations: 0 },
      batches: 2,
      largestBatch: 2,
    });
    expect(await reopened.listStreamParts(ended.id)).toEqual([]);
    expect(await reopened.listStreamParts(live.id)).toHaveLength(3);
    await reopened.close();
  });
});
