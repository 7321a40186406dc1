/**
 * Retention on a Temporal Schedule (decision 64): `client.scheduleRetention` creates a
 * schedule whose firing runs `retentionWorkflow`, and a TurnKit worker of the task queue runs
 * the pass against its store. Real dev server, real SQLite file.
 */
import type { ScheduleHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { ArgumentError, ConfigError } from '../../src/errors.js';
import type { PruneReport } from '../../src/store/retention/prune-pass.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

let kit: TestKit;
const handles: ScheduleHandle[] = [];
const uid = (name: string) => `${name}-${process.pid}-${Date.now().toString(36)}`;

beforeAll(async () => {
  kit = await startKit({ agents: [defineAgent({ name: 'idle' })] });
});

afterAll(async () => {
  for (const handle of handles) await handle.delete().catch(() => undefined);
  await kit?.stop();
});

describe('scale: retention on a Temporal Schedule', () => {
  it('scale: a scheduled pass removes the stream parts of ended runs and keeps the live ones', async () => {
    const { store } = kit;
    const conversation = await store.createConversation({ agentName: 'idle' });
    const ended = await store.createTurn({
      conversationId: conversation.id,
      agentName: 'idle',
      status: 'running',
    });
    const live = await store.createTurn({
      conversationId: conversation.id,
      agentName: 'idle',
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

    const handle = await kit.client.scheduleRetention({
      id: uid('retention'),
      every: '1 day',
      policy: { streamPartsGraceMs: 0, batchSize: 2 },
    });
    handles.push(handle);
    await handle.trigger();
    let workflowId = '';
    await waitUntil(async () => {
      workflowId = (await handle.describe()).info.recentActions[0]?.action.workflow.workflowId ?? '';
      return workflowId !== '';
    }, 30_000);
    const report = (await kit.client.temporal.workflow.getHandle(workflowId).result()) as PruneReport;

    expect(report).toMatchObject({ dryRun: false, batches: 2, largestBatch: 2 });
    expect(report.deleted.streamParts).toBe(3);
    expect(await store.listStreamParts(ended.id)).toEqual([]);
    expect(await store.listStreamParts(live.id)).toHaveLength(3);

    await expect(kit.client.scheduleRetention({ id: handle.scheduleId })).rejects.toBeInstanceOf(ConfigError);
  });

  it('scale: a bad schedule option is an ArgumentError and creates nothing', async () => {
    await expect(kit.client.scheduleRetention({ every: '10 ms' })).rejects.toBeInstanceOf(ArgumentError);
    await expect(kit.client.scheduleRetention({ policy: { batchSize: -1 } })).rejects.toBeInstanceOf(
      ArgumentError,
    );
    await expect(kit.client.scheduleRetention({ id: 'has space' })).rejects.toBeInstanceOf(ArgumentError);
  });
});
