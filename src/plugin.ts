/**
 * TurnKit as a Temporal plugin: an application's own `Worker.create({ plugins })` runs TurnKit's
 * workflows and activities beside its own, and its workflows call agents (`turnkit/workflow`).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, sep } from 'node:path';
import { SimplePlugin } from '@temporalio/plugin';
import type { ClientPlugin } from '@temporalio/client';
import type {
  BundleOptions,
  BundlerPlugin,
  NativeConnection,
  ReplayWorkerOptions,
  Worker,
  WorkerOptions,
  WorkerPlugin,
} from '@temporalio/worker';
import proto from '@temporalio/proto';
import { CANCEL_INTERVAL_MS, HeartbeatPacer } from './activities/heartbeat.js';
import { createAgentCallActivities } from './activities/agent-call-activities.js';
import { createTurnActivities } from './activities/turn-activities.js';
import { checkMcpManifests, holdMcpSessions } from './agents/mcp.js';
import type { RuntimeOptions } from './engine/runtime.js';
import { Runtime } from './engine/runtime.js';
import { ArgumentError } from './errors.js';
import type { ProviderMap } from './models/provider-registry.js';
import { registryModelFor } from './models/provider-registry.js';
import { turnWorkflowsPath } from './worker-bundles.js';
import type { TurnKitNexusOptions } from './nexus.js';
import { turnkitNexusHandler } from './nexus.js';
import { cancelDelivery } from './worker-cancel-delivery.js';
import type { ModelQueueLimits } from './worker-models.js';
import { createModelWorkers, modelQueues, queueRoutes, runTogether } from './worker-models.js';
import { OTEL_WORKFLOW_INTERCEPTORS, tracingWorkerOptions } from './worker-tracing.js';
import {
  TURNKIT_AGENT,
  TURNKIT_CONVERSATION_ID,
  TURNKIT_ROOT_TURN_ID,
  TURNKIT_SCHEDULE_ID,
  TURNKIT_STATUS,
} from './workflows/contract.js';

export interface TurnKitPluginOptions extends RuntimeOptions {
  /** AI SDK providers by prefix, for model ids `provider:model` (as `createWorker`'s). */
  providers?: ProviderMap;
  /**
   * Model calls of these providers run on a queue of their own, `<taskQueue>-model-<provider>`,
   * that the worker's process also polls (decision 43; as `createWorker`'s).
   */
  models?: Readonly<Record<string, ModelQueueLimits>>;
  /**
   * Registers TurnKit's search attributes (TurnKitAgent, …) in the worker's namespace when they
   * are missing (default true; the worker's connection must be allowed to).
   */
  searchAttributes?: boolean;
  /**
   * Serves TurnKit's Nexus service (`turnkit`, operation `runTurn`) on the worker's task queue,
   * for a Nexus endpoint that targets it (docs/temporal-apps.md).
   */
  nexus?: boolean | TurnKitNexusOptions;
}

/** What one worker of the plugin runs with: its task queue's runtime, activities and model queues. */
interface WorkerSetup {
  runtime: Runtime;
  connection: NativeConnection;
  namespace: string;
  queues: ReturnType<typeof modelQueues>;
  activities: object;
}

/** TurnKit's search attributes; every turn's workflow carries them. */
const SEARCH_ATTRIBUTES = [
  TURNKIT_AGENT,
  TURNKIT_CONVERSATION_ID,
  TURNKIT_ROOT_TURN_ID,
  TURNKIT_STATUS,
  TURNKIT_SCHEDULE_ID,
];

/** Registers the search attributes the namespace lacks. */
async function ensureSearchAttributes(connection: NativeConnection, namespace: string): Promise<void> {
  const listed = await connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set(Object.keys(listed.customAttributes ?? {}));
  const missing = SEARCH_ATTRIBUTES.filter((key) => !known.has(key.name));
  if (missing.length === 0) return;
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(
      missing.map((key) => [
        key.name,
        proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
      ]),
    ),
  });
}

/** Entry modules this process wrote: a bundler that is handed one again keeps it. */
const combinedEntries = new Set<string>();

/**
 * Where generated entries go: the `node_modules/.cache` of the application's own copy of
 * `@temporalio/workflow`, so that Temporal's bundler (which puts its entry beside this one)
 * resolves the application's copy, as it would from the application's workflows.
 */
function entriesDir(workflowsPath: string): string {
  const workflow = createRequire(workflowsPath).resolve('@temporalio/workflow');
  const at = workflow.lastIndexOf(`${sep}node_modules${sep}`);
  if (at < 0)
    throw new ArgumentError(`@temporalio/workflow resolves outside node_modules from ${workflowsPath}`);
  return join(workflow.slice(0, at), 'node_modules', '.cache', 'turnkit');
}

/**
 * The workflow entry a worker or bundler gets: the application's workflows and TurnKit's,
 * re-exported by one generated module (named by a hash of both, so a bundle is stable).
 */
export function withTurnKitWorkflows(workflowsPath: string | undefined): string {
  const turnkit = turnWorkflowsPath();
  if (workflowsPath === undefined) return turnkit;
  if (workflowsPath === turnkit || combinedEntries.has(workflowsPath)) return workflowsPath;
  const hash = createHash('sha256').update(`${workflowsPath}\n${turnkit}`).digest('hex').slice(0, 16);
  const dir = entriesDir(workflowsPath);
  mkdirSync(dir, { recursive: true });
  const entry = join(dir, `workflows-${hash}.js`);
  writeFileSync(
    entry,
    `// Generated by TurnKitPlugin: the application's workflows and TurnKit's.\n` +
      `export * from ${JSON.stringify(workflowsPath)};\nexport * from ${JSON.stringify(turnkit)};\n`,
  );
  combinedEntries.add(entry);
  return entry;
}

const unique = <T>(items: readonly T[] | undefined) => (items ? [...new Set(items)] : undefined);

/**
 * TurnKit in an application's own Temporal worker: `Worker.create({ ..., plugins: [new
 * TurnKitPlugin({ store, agents })] })`. It adds TurnKit's workflows to the worker's
 * `workflowsPath` (or to a bundle built with `bundleWorkflowCode({ plugins })`), its activities
 * (named as TurnKit's; an application activity of the same name is an ArgumentError), the
 * heartbeat pacing cancels ride on, its search attributes, OpenTelemetry when `tracing` is
 * given, and the providers' model queues, polled beside the worker while it runs. A Temporal
 * `Client` needs nothing of TurnKit's: the plugin passes its options through unchanged.
 * The worker plugin is asynchronous (it opens the runtime and asks the namespace), so it
 * implements Temporal's plugin interfaces and merges with `SimplePlugin`'s rules.
 */
export class TurnKitPlugin implements WorkerPlugin, BundlerPlugin, ClientPlugin {
  readonly name = 'turnkit';
  readonly #options: TurnKitPluginOptions;
  readonly #setups = new Map<string, WorkerSetup>();

  constructor(options: TurnKitPluginOptions) {
    if (!options?.store) throw new ArgumentError('TurnKitPlugin needs a store (openStore())');
    if (!options.agents) throw new ArgumentError('TurnKitPlugin needs an agent registry');
    this.#options = options;
  }

  async #setup(options: WorkerOptions): Promise<WorkerSetup> {
    const namespace = options.namespace ?? 'default';
    const key = `${namespace}/${options.taskQueue}`;
    const known = this.#setups.get(key);
    if (known) return known;
    if (!options.connection)
      throw new ArgumentError('TurnKitPlugin needs the worker to be given its connection (NativeConnection)');
    const queues = modelQueues(options.taskQueue, this.#options.models);
    const runtime = new Runtime({
      ...this.#options,
      model: await registryModelFor(this.#options),
      ...queueRoutes(queues),
    });
    // Every worker of a store must list the same MCP tools: a different list is refused at boot.
    await checkMcpManifests(runtime.store, runtime.agents);
    if (this.#options.searchAttributes !== false) await ensureSearchAttributes(options.connection, namespace);
    const heartbeats = new HeartbeatPacer(await cancelDelivery(options.connection, namespace));
    const activities = {
      ...createTurnActivities(runtime, heartbeats),
      ...createAgentCallActivities(runtime),
    };
    const setup = { runtime, connection: options.connection, namespace, queues, activities };
    this.#setups.set(key, setup);
    return setup;
  }

  async configureWorker(options: WorkerOptions): Promise<WorkerOptions> {
    const setup = await this.#setup(options);
    const clash = Object.keys(options.activities ?? {}).filter((name) => name in setup.activities);
    if (clash.length > 0)
      throw new ArgumentError(`the worker's activities ${clash.join(', ')} have the names of TurnKit's`);
    const tracing =
      this.#options.tracing && setup.runtime.telemetry.enabled
        ? tracingWorkerOptions(setup.runtime, this.#options.tracing)
        : undefined;
    const configured = new SimplePlugin({
      name: 'turnkit',
      activities: setup.activities,
      ...(this.#options.nexus
        ? { nexusServices: [turnkitNexusHandler(this.#options.nexus === true ? {} : this.#options.nexus)] }
        : {}),
      // A prebuilt bundle must have been built with this plugin (`bundleWorkflowCode({ plugins })`).
      ...(options.workflowBundle ? {} : { workflowsPath: withTurnKitWorkflows }),
      ...(tracing?.interceptors ? { workerInterceptors: tracing.interceptors } : {}),
    }).configureWorker(options);
    return {
      ...configured,
      interceptors: {
        ...configured.interceptors,
        workflowModules: unique(configured.interceptors?.workflowModules),
      },
      ...(tracing?.sinks ? { sinks: { ...configured.sinks, ...tracing.sinks } } : {}),
      // TurnKit's cancels reach an activity on a heartbeat's reply: sent at its pacer's period.
      maxHeartbeatThrottleInterval: options.maxHeartbeatThrottleInterval ?? CANCEL_INTERVAL_MS,
      defaultHeartbeatThrottleInterval: options.defaultHeartbeatThrottleInterval ?? CANCEL_INTERVAL_MS,
    };
  }

  configureReplayWorker(options: ReplayWorkerOptions): ReplayWorkerOptions {
    return {
      ...options,
      ...(options.workflowBundle ? {} : { workflowsPath: withTurnKitWorkflows(options.workflowsPath) }),
    };
  }

  configureBundler(options: BundleOptions): BundleOptions {
    return {
      ...options,
      workflowsPath: withTurnKitWorkflows(options.workflowsPath),
      workflowInterceptorModules: unique([
        ...(options.workflowInterceptorModules ?? []),
        ...(this.#options.tracing ? [OTEL_WORKFLOW_INTERCEPTORS] : []),
      ]),
    };
  }

  /**
   * Runs the worker with its model queues' workers (one stops, all stop); the MCP sessions of
   * the agents' tools are held while it runs and closed after.
   */
  async runWorker(worker: Worker, next: (w: Worker) => Promise<void>): Promise<void> {
    const setup = this.#setups.get(`${worker.options.namespace}/${worker.options.taskQueue}`);
    if (!setup) return next(worker);
    const release = holdMcpSessions(setup.runtime.agents, setup.runtime.logger);
    try {
      const modelWorkers = await createModelWorkers(setup.queues, {
        connection: setup.connection,
        namespace: setup.namespace,
        activities: setup.activities,
        ...(worker.options.identity ? { identity: worker.options.identity } : {}),
      });
      if (modelWorkers.length === 0) return await next(worker);
      const main = next(worker);
      await Promise.all([
        main.finally(() => modelWorkers.forEach((w) => w.getState() === 'RUNNING' && w.shutdown())),
        runTogether(modelWorkers).finally(() => worker.getState() === 'RUNNING' && worker.shutdown()),
      ]);
    } finally {
      await release();
    }
  }
}
