import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';

const EventType = proto.temporal.api.enums.v1.EventType;

/**
 * Resets a workflow's open run at its first or last completed workflow task (the two points
 * the Temporal UI offers), as an operator would; returns the superseded and the new run id.
 */
export async function resetWorkflow(
  client: Client,
  workflowId: string,
  point: 'first' | 'last',
): Promise<{ oldRunId: string; newRunId: string }> {
  const handle = client.workflow.getHandle(workflowId);
  const oldRunId = (await handle.describe()).runId;
  const completedTasks = ((await handle.fetchHistory()).events ?? []).filter(
    (e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
  );
  const target = point === 'first' ? completedTasks[0] : completedTasks[completedTasks.length - 1];
  if (!target) throw new Error(`workflow ${workflowId} has no completed workflow task to reset to`);
  const { runId } = await client.workflowService.resetWorkflowExecution({
    namespace: client.options.namespace,
    workflowExecution: { workflowId, runId: oldRunId },
    workflowTaskFinishEventId: target.eventId,
    reason: `reset to the ${point} workflow task`,
    requestId: randomUUID(),
  });
  if (!runId || runId === oldRunId) throw new Error(`reset of ${workflowId} returned no new run`);
  return { oldRunId, newRunId: runId };
}
