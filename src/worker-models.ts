/**
 * The providers' model queues (decision 43): `createWorker({ models })` names providers whose
 * model calls run on a task queue of their own, with the queue's rate limit (the Temporal
 * server enforces it for every worker of the queue) and this process's cap; the worker polls
 * each with an activity-only Temporal worker.
 */
import type { NativeConnection, WorkerOptions } from '@temporalio/worker';
import { Worker } from '@temporalio/worker';
import { ArgumentError } from './errors.js';
import { CANCEL_INTERVAL_MS } from './activities/heartbeat.js';

/** A provider's model queue: its rate limit, shared by every worker, and this process's cap. */
export interface ModelQueueLimits {
  /** Model calls per second on the queue, for all workers together (the server enforces it). */
  perSecond?: number;
  /** Model calls this process runs at once on the queue. */
  concurrent?: number;
}

const PROVIDER_PREFIX = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** The queues `createWorker({ models })` asks for, checked: a bad limit is an ArgumentError at boot. */
export function modelQueues(
  taskQueue: string,
  models: Readonly<Record<string, ModelQueueLimits>> | undefined,
) {
  if (models === undefined) return [];
  if (!models || typeof models !== 'object' || Array.isArray(models))
    throw new ArgumentError('models must map provider prefixes to { perSecond, concurrent }');
  return Object.entries(models).map(([provider, limits]) => {
    if (!PROVIDER_PREFIX.test(provider))
      throw new ArgumentError(`models: ${JSON.stringify(provider)} is not a provider prefix (a-z, 0-9, -)`);
    const { perSecond, concurrent } = limits ?? {};
    if (
      perSecond !== undefined &&
      !(typeof perSecond === 'number' && perSecond > 0 && Number.isFinite(perSecond))
    )
      throw new ArgumentError(`models.${provider}.perSecond must be a positive number`);
    if (concurrent !== undefined && !(Number.isInteger(concurrent) && concurrent > 0))
      throw new ArgumentError(`models.${provider}.concurrent must be a positive integer`);
    return { provider, taskQueue: `${taskQueue}-model-${provider}`, perSecond, concurrent };
  });
}

/** One activity-only Temporal worker per model queue. */
export function createModelWorkers(
  queues: ReturnType<typeof modelQueues>,
  options: {
    connection: NativeConnection;
    namespace: string;
    activities: object;
    identity?: string;
    dataConverter?: WorkerOptions['dataConverter'];
  },
): Promise<Worker[]> {
  return Promise.all(
    queues.map((queue) =>
      Worker.create({
        connection: options.connection,
        namespace: options.namespace,
        taskQueue: queue.taskQueue,
        activities: options.activities,
        maxHeartbeatThrottleInterval: CANCEL_INTERVAL_MS,
        defaultHeartbeatThrottleInterval: CANCEL_INTERVAL_MS,
        ...(queue.perSecond !== undefined ? { maxTaskQueueActivitiesPerSecond: queue.perSecond } : {}),
        ...(queue.concurrent !== undefined ? { maxConcurrentActivityTaskExecutions: queue.concurrent } : {}),
        ...(options.identity ? { identity: options.identity } : {}),
        ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
      }),
    ),
  );
}

/** The runtime's `modelQueues` (provider → queue), when there are any. */
export function queueRoutes(queues: ReturnType<typeof modelQueues>) {
  return queues.length > 0
    ? { modelQueues: Object.fromEntries(queues.map((q) => [q.provider, q.taskQueue])) }
    : {};
}

/** Runs the turn worker and its model workers; one stops, all stop (a queue nobody polls holds its calls for ever). */
export async function runTogether(workers: readonly Worker[], until?: Promise<unknown>): Promise<void> {
  const stopAll = () => workers.forEach((w) => w.getState() === 'RUNNING' && w.shutdown());
  await Promise.all(workers.map((w) => (until ? w.runUntil(until) : w.run()).finally(stopAll)));
}
