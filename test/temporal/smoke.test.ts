import { fileURLToPath } from 'node:url';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { temporalConnections } from '../helpers/turnkit.js';

describe('temporal smoke: a real dev server runs a workflow with one activity', () => {
  it('runs the workflow on a worker and records the activity in its history', async () => {
    const { native, client } = await temporalConnections();
    const taskQueue = `smoke-${process.pid}-${Date.now()}`;
    const worker = await Worker.create({
      connection: native,
      taskQueue,
      workflowsPath: fileURLToPath(new URL('./smoke-workflows.ts', import.meta.url)),
      activities: { greet: async (name: string) => `hello, ${name}` },
    });
    const workflowId = `smoke-${taskQueue}`;
    const result = await worker.runUntil(
      client.workflow.execute('smokeWorkflow', { taskQueue, workflowId, args: ['temporal'] }),
    );
    expect(result).toBe('hello, temporal');
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    const completed = temporal.api.enums.v1.EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED;
    expect((history.events ?? []).filter((event) => event.eventType === completed)).toHaveLength(1);
  });
});
