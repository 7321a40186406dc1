import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';

/** Event count and encoded protobuf size of a workflow's history, as the server stores it. */
export async function historySize(
  client: Client,
  workflowId: string,
): Promise<{ events: number; bytes: number }> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const bytes = proto.temporal.api.history.v1.History.encode(history).finish().length;
  return { events: history.events?.length ?? 0, bytes };
}
