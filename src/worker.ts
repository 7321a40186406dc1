import type { PayloadCodec } from '@temporalio/common';
import type { WorkerOptions } from '@temporalio/worker';
import { NativeConnection, Worker } from '@temporalio/worker';
import { ArgumentError } from './errors.js';
import { CANCEL_INTERVAL_MS, HeartbeatPacer } from './activities/heartbeat.js';
import { createAgentCallActivities } from './activities/agent-call-activities.js';
import { createTurnActivities } from './activities/turn-activities.js';
import { checkMcpManifests, holdMcpSessions } from './agents/mcp.js';
import type { RuntimeOptions } from './engine/runtime.js';
import { Runtime } from './engine/runtime.js';
import type { ProviderMap } from './models/provider-registry.js';
import { registryModelFor } from './models/provider-registry.js';
import type { ModelQueueLimits } from './worker-models.js';
export type { ModelQueueLimits } from './worker-models.js';
import { createModelWorkers, modelQueues, queueRoutes, runTogether } from './worker-models.js';
import { temporalConnectConfig } from './temporal-config.js';
import { tracingWorkerOptions } from './worker-tracing.js';
import { turnFailureConverterPath, turnWorkflowBundle } from './worker-bundles.js';
import { cancelDelivery } from './worker-cancel-delivery.js';
import type { WorkerDeployment } from './worker-deployment.js';
import { deploymentWorkerOptions } from './worker-deployment.js';
import { resolveTaskQueue } from './store/store-identity.js';

export { DEFAULT_TASK_QUEUE } from './workflows/contract.js';
export {
  bundleTurnWorkflows,
  turnFailureConverterPath,
  turnWorkflowsPath,
  WORKFLOW_BUNDLE_FILES,
  writeTurnWorkflowBundles,
} from './worker-bundles.js';
export type { WorkerDeployment } from './worker-deployment.js';
export { conciseWorkerLogger } from './worker-logger.js';
export { TurnKitPlugin, withTurnKitWorkflows } from './plugin.js';
export type { TurnKitPluginOptions } from './plugin.js';
export { nexusCallWorkflowId, turnkitNexusHandler } from './nexus.js';
export type { TurnKitNexusOptions } from './nexus.js';

export interface TurnKitWorkerOptions extends RuntimeOptions {
  /** An existing connection; otherwise one is opened to `address`. */
  connection?: NativeConnection;
  /**
   * Temporal frontend; otherwise Temporal's env config (decision 44): TEMPORAL_ADDRESS, else the
   * profile's, else 127.0.0.1:7233. The profile's API key and TLS settings apply either way.
   */
  address?: string;
  /** Temporal namespace; otherwise TEMPORAL_NAMESPACE, else the profile's, else `default`. */
  namespace?: string;
  /** A profile of Temporal's config file (TEMPORAL_CONFIG_FILE); default TEMPORAL_PROFILE, else `default`. */
  profile?: string;
  taskQueue?: string;
  /**
   * AI SDK providers by prefix, for model ids `provider:model` (`TURNKIT_MODEL` too), through
   * the AI SDK's provider registry; a prefix not given loads the installed `@ai-sdk/<prefix>`.
   */
  providers?: ProviderMap;
  /**
   * A directory with prebuilt workflow bundles (WORKFLOW_BUNDLE_FILES), default
   * TURNKIT_WORKFLOW_BUNDLES or the package's own `dist/`; `false` bundles at boot from source.
   */
  workflowBundles?: string | false;
  /**
   * Opt in to Temporal's Worker Versioning (Worker Deployments): this worker serves build
   * `buildId` of deployment `name`. Turns are pinned to the build they started on, lanes move
   * to the current build (docs/operations.md has the roll-out procedure).
   */
  deployment?: WorkerDeployment;
  /**
   * Model calls of these providers (by `provider:` prefix) run on a task queue of their own,
   * `<taskQueue>-model-<provider>`, that this worker also polls (decision 43): `perSecond` is
   * the queue's rate limit, enforced by the Temporal server for every worker of the queue;
   * `concurrent` caps this process's calls in flight to the provider.
   */
  models?: Readonly<Record<string, ModelQueueLimits>>;
  /**
   * Temporal payload codecs for everything this worker's workflows and activities send through
   * Temporal, e.g. `[appCodec, new EncryptionCodec(keys)]` (decision 75, docs/data-lifecycle.md);
   * the clients need the same list. Not with `worker.dataConverter`.
   */
  payloadCodecs?: PayloadCodec[];
  /** Extra Worker options (concurrency limits, identity, …). */
  worker?: Partial<
    Omit<WorkerOptions, 'connection' | 'namespace' | 'taskQueue' | 'activities' | 'workflowBundle'>
  >;
}

export interface TurnKitWorker {
  worker: Worker;
  runtime: Runtime;
  /** How a cancel reaches this worker's activities in flight, and their heartbeat count. */
  heartbeats: HeartbeatPacer;
  /**
   * Runs until `shutdown()`, or until the promise passed settles. Once the worker has stopped,
   * the MCP sessions of its agents' tools that no other running worker uses are closed.
   */
  run(until?: Promise<unknown>): Promise<void>;
  shutdown(): void;
}

/**
 * The data converter of the worker and its model workers: `payloadCodecs`, else the app's own,
 * with TurnKit's failure converter (the one its workflow bundle holds) unless the app names one.
 */
function dataConverterOf(options: TurnKitWorkerOptions): WorkerOptions['dataConverter'] {
  if (options.payloadCodecs && options.worker?.dataConverter)
    throw new ArgumentError('pass payloadCodecs or worker.dataConverter, not both');
  return {
    failureConverterPath: turnFailureConverterPath(),
    ...(options.payloadCodecs ? { payloadCodecs: options.payloadCodecs } : options.worker?.dataConverter),
  };
}

/**
 * A worker that runs TurnKit turns: the bundled workflows plus activities bound to this
 * process's store, agents and model clients. Add more of these to scale out.
 */
export async function createWorker(options: TurnKitWorkerOptions): Promise<TurnKitWorker> {
  if (options.deployment && options.worker?.workerDeploymentOptions)
    throw new ArgumentError('pass deployment or worker.workerDeploymentOptions, not both');
  const dataConverter = dataConverterOf(options);
  const deployment = options.deployment ? deploymentWorkerOptions(options.deployment) : {};
  // Temporal's env config, read first: a missing profile fails before anything opens.
  const config =
    options.connection && options.namespace !== undefined ? undefined : temporalConnectConfig(options);
  const taskQueue = resolveTaskQueue(options.store, options.taskQueue);
  const queues = modelQueues(taskQueue, options.models);
  const runtime = new Runtime({ ...options, model: await registryModelFor(options), ...queueRoutes(queues) });
  // Every worker of a store must list the same MCP tools: a different list is refused at boot.
  await checkMcpManifests(runtime.store, runtime.agents);
  const owned = options.connection ? undefined : await NativeConnection.connect(config!.connectionOptions);
  const connection = options.connection ?? owned!;
  // A worker that fails to build closes the connection it opened (a bad namespace, a bundle error).
  const closeOwned = async (error: unknown): Promise<never> => {
    await owned?.close().catch(() => undefined);
    throw error;
  };
  const namespace = options.namespace ?? config!.namespace;
  const heartbeats = new HeartbeatPacer(await cancelDelivery(connection, namespace));
  const worker = await Worker.create({
    connection,
    namespace,
    taskQueue,
    workflowBundle: await turnWorkflowBundle({
      traced: runtime.telemetry.enabled,
      dir: options.workflowBundles,
    }).catch(closeOwned),
    // An agent call's activities too (agentCallWorkflow, workflows of other apps on this queue).
    activities: { ...createTurnActivities(runtime, heartbeats), ...createAgentCallActivities(runtime) },
    // OpenTelemetry, only when a tracer provider was passed (options.tracing).
    ...(options.tracing && runtime.telemetry.enabled ? tracingWorkerOptions(runtime, options.tracing) : {}),
    // The SDK sends each heartbeat the pacer makes (it paces them at 100–500 ms itself).
    maxHeartbeatThrottleInterval: CANCEL_INTERVAL_MS,
    defaultHeartbeatThrottleInterval: CANCEL_INTERVAL_MS,
    // A workflow task sent to a worker that died waits this long on its sticky queue before
    // any worker may take it (Temporal's default is 10 s); a busy live worker that misses it
    // only costs a replay from history on another worker (docs/decisions/020-worker-loss.md).
    stickyQueueScheduleToStartTimeout: '3 seconds',
    // Workflow-task pollers scale with the server's backlog instead of a fixed 10: after a worker
    // dies, a fixed count drained the shared queue's replays too slowly (issue 27's chaos bench on
    // SQLite: 300/300 roots with autoscaling, 204–212 without; decision 51). An app that sets
    // either poller option keeps what it set (and the SDK's handling of it).
    ...(options.worker?.workflowTaskPollerBehavior || options.worker?.maxConcurrentWorkflowTaskPolls
      ? {}
      : { workflowTaskPollerBehavior: { type: 'autoscaling' as const } }),
    ...deployment,
    ...options.worker,
    ...(dataConverter ? { dataConverter } : {}),
  }).catch(closeOwned);
  const modelWorkers = await createModelWorkers(queues, {
    connection,
    namespace,
    activities: createTurnActivities(runtime, heartbeats),
    ...(dataConverter ? { dataConverter } : {}),
    ...(options.worker?.identity ? { identity: options.worker.identity } : {}),
  }).catch(closeOwned);
  return {
    worker,
    runtime,
    heartbeats,
    // What this worker opened (a connection, MCP sessions only it used) closes with it.
    run: async (until) => {
      const release = holdMcpSessions(runtime.agents, runtime.logger);
      try {
        await runTogether([worker, ...modelWorkers], until);
      } finally {
        await release();
        await owned?.close();
      }
    },
    shutdown: () => {
      worker.shutdown();
      for (const w of modelWorkers) if (w.getState() === 'RUNNING') w.shutdown();
    },
  };
}
