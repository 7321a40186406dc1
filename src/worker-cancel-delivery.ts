import type { NativeConnection } from '@temporalio/worker';
import { Runtime as TemporalRuntime } from '@temporalio/worker';
import type { CancelDelivery } from './activities/heartbeat.js';

/**
 * Whether the server pushes activity cancellations to this worker (Temporal's worker commands,
 * a namespace capability; the SDK polls for them only while worker heartbeating is on), or
 * a cancel can only ride on an activity heartbeat's reply (docs/decisions/024-cancel-and-heartbeats.md).
 */
export async function cancelDelivery(
  connection: NativeConnection,
  namespace: string,
): Promise<CancelDelivery> {
  if (TemporalRuntime.instance().options.runtimeOptions.workerHeartbeatIntervalMillis == null)
    return 'heartbeat';
  try {
    const described = await connection.workflowService.describeNamespace({ namespace });
    return described.namespaceInfo?.capabilities?.workerCommands ? 'worker-command' : 'heartbeat';
  } catch {
    return 'heartbeat';
  }
}
