import { fileURLToPath } from 'node:url';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { connectClient, requireTemporal, uniqueTaskQueue, withWorker } from '../helpers/temporal.js';
import * as activities from './smoke-activities.js';

const { EventType } = proto.temporal.api.enums.v1;
const TurnKitAgent = defineSearchAttributeKey('TurnKitAgent', SearchAttributeType.KEYWORD);

describe.skipIf(!(await requireTemporal()))('temporal smoke: a real dev server', () => {
  it('runs a workflow with one activity on a worker and records the activity in its history', async () => {
    const client = await connectClient();
    const taskQueue = uniqueTaskQueue('smoke');
    const workflowId = `smoke-${taskQueue}`;

    const result = await withWorker(
      {
        taskQueue,
        workflowsPath: fileURLToPath(new URL('./smoke-workflows.ts', import.meta.url)),
        activities,
      },
      () =>
        client.workflow.execute('smokeWorkflow', {
          taskQueue,
          workflowId,
          args: ['temporal'],
          // Fails unless temporal-dev.sh registered TurnKit's search attributes.
          typedSearchAttributes: [{ key: TurnKitAgent, value: 'smoke' }],
        }),
    );

    expect(result).toBe('hello, temporal');
    const handle = client.workflow.getHandle(workflowId);
    const events = (await handle.fetchHistory()).events ?? [];
    expect(events.filter((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)).toHaveLength(
      1,
    );
    expect((await handle.describe()).typedSearchAttributes.get(TurnKitAgent)).toBe('smoke');
  });
});
