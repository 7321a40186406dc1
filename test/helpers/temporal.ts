/**
 * Shared helpers for integration tests against a real Temporal server (the dev server from
 * `./temporal-dev.sh start`, or whatever TEMPORAL_ADDRESS names). Connections and workflow
 * bundles are cached per test process.
 */
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import type { WorkerOptions, WorkflowBundleWithSourceMap } from '@temporalio/worker';

export function temporalAddress(): string {
  return process.env['TEMPORAL_ADDRESS'] || '127.0.0.1:7233';
}

export function temporalNamespace(): string {
  return process.env['TEMPORAL_NAMESPACE'] || 'default';
}

let client: Promise<Client> | undefined;
let native: Promise<NativeConnection> | undefined;

/** A `@temporalio/client` Client on temporalAddress()/temporalNamespace(), one per process. */
export function connectClient(): Promise<Client> {
  client ??= Connection.connect({ address: temporalAddress() }).then(
    (connection) => new Client({ connection, namespace: temporalNamespace() }),
  );
  // A failed connect must not stick in the cache: the next caller tries again.
  client.catch(() => (client = undefined));
  return client;
}

/** The NativeConnection workers use, one per process. */
export function connectNative(): Promise<NativeConnection> {
  native ??= NativeConnection.connect({ address: temporalAddress() });
  native.catch(() => (native = undefined));
  return native;
}

/** Closes the cached connections (for an afterAll in suites that want a clean exit). */
export async function closeTemporalConnections(): Promise<void> {
  const [c, n] = [client, native];
  client = native = undefined;
  await Promise.allSettled([c?.then((x) => x.connection.close()), n?.then((x) => x.close())]);
}

let probe: Promise<string | undefined> | undefined;

/**
 * Whether the Temporal server answers. In CI a missing server is an error (CI never skips);
 * elsewhere it returns false after a loud message, for `describe.skipIf(!(await requireTemporal()))`.
 */
export async function requireTemporal(): Promise<boolean> {
  probe ??= Connection.connect({ address: temporalAddress(), connectTimeout: '3s' }).then(
    async (connection) => {
      await connection.close();
      return undefined;
    },
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
  const failure = await probe;
  if (failure === undefined) return true;
  const message =
    `Temporal does not answer on ${temporalAddress()} (${failure}). ` +
    'Start the dev server with `./temporal-dev.sh start` (or run `npm test`, which starts it).';
  const ci = process.env['CI'];
  if (ci && ci !== 'false' && ci !== '0') throw new Error(`${message} CI never skips the Temporal suites.`);
  console.warn(`\n!!! SKIPPING Temporal suites: ${message}\n`);
  return false;
}

let queueCounter = 0;

/** A task queue no other test (in this or a parallel process) uses. */
export function uniqueTaskQueue(prefix: string): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${queueCounter++}`;
}

const bundles = new Map<string, Promise<WorkflowBundleWithSourceMap>>();

/** bundleWorkflowCode, once per path per process: bundling takes seconds. */
export function bundleOnce(workflowsPath: string): Promise<WorkflowBundleWithSourceMap> {
  let bundle = bundles.get(workflowsPath);
  if (!bundle) {
    bundle = bundleWorkflowCode({ workflowsPath, logger: new DefaultLogger('WARN') });
    bundle.catch(() => bundles.delete(workflowsPath));
    bundles.set(workflowsPath, bundle);
  }
  return bundle;
}

export type WithWorkerOptions = Omit<WorkerOptions, 'connection' | 'namespace' | 'taskQueue'> & {
  taskQueue: string;
};

/**
 * Runs fn while a worker polls the task queue, then shuts the worker down (also when fn throws).
 * Pass `workflowsPath` (bundled on creation) or `workflowBundle` (e.g. from bundleOnce).
 */
export async function withWorker<T>(
  options: WithWorkerOptions,
  fn: (worker: Worker) => Promise<T>,
): Promise<T> {
  const worker = await Worker.create({
    ...options,
    connection: await connectNative(),
    namespace: temporalNamespace(),
  });
  return worker.runUntil(fn(worker));
}
