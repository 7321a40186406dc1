/**
 * `startKit`'s shape without a Temporal server: the real client writes a run's rows, and the
 * workflow start it asks for drives the turn through the engine in process (engine-driver.ts).
 * For engine rules that only the store sees; see engine-driver.ts for what it cannot do.
 */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Agent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { RuntimeOptions } from '../../src/engine/runtime.js';
import { Runtime } from '../../src/engine/runtime.js';
import { registryModelFor } from '../../src/models/provider-registry.js';
import type { ModelClient } from '../../src/models/types.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { Store } from '../../src/store/types.js';
import type { TurnWorkflowInput, TurnSettings } from '../../src/workflows/contract.js';
import { turnWorkflowId } from '../../src/workflows/contract.js';
import type { DrivenTurn, DriverFaults } from './engine-driver.js';
import { TurnDriver } from './engine-driver.js';

export interface DriverKit {
  client: TurnKitClient;
  store: Store;
  agents: AgentRegistry;
  /** The worker's runtime: the one the activities run on. */
  runtime: Runtime;
  /** No task queue is polled; kept so a test's second client can be built as with `startKit`. */
  taskQueue: string;
  /** How the drive of a turn ended (the workflow's result), once it did. */
  driven(turnId: string): Promise<DrivenTurn>;
  stop(): Promise<void>;
}

/**
 * A Temporal client whose workflow starts drive the turn. Turns are driven one after
 * another, in start order, as one worker slot would: a turn's lane is free when the next
 * one claims, unless a turn before it suspended.
 */
function drivingTemporal(drive: (input: TurnWorkflowInput) => Promise<DrivenTurn>) {
  const runs = new Map<string, Promise<DrivenTurn>>();
  let queue: Promise<unknown> = Promise.resolve();
  const handle = (workflowId: string) => ({
    workflowId,
    async result() {
      const run = runs.get(workflowId);
      if (!run)
        throw new WorkflowNotFoundError('no such workflow in the engine driver', workflowId, undefined);
      return run;
    },
    async signal(): Promise<never> {
      throw new Error('the engine driver has no signals: this test needs the dev server');
    },
    async query(): Promise<never> {
      throw new Error('the engine driver has no queries: this test needs the dev server');
    },
  });
  const workflow = {
    async start(_type: string, options: { workflowId: string; args: [TurnWorkflowInput] }) {
      if (!runs.has(options.workflowId)) {
        const run = queue.then(() => drive(options.args[0]));
        queue = run.catch(() => undefined);
        runs.set(options.workflowId, run);
      }
      return handle(options.workflowId);
    },
    getHandle: handle,
  };
  const temporal = { workflow, connection: {}, options: { namespace: 'default' } };
  return {
    temporal: temporal as unknown as Client,
    driven: (turnId: string) => workflow.getHandle(turnWorkflowId(turnId)).result(),
  };
}

export async function startDriverKit(options: {
  agents: readonly Agent[];
  model?: ModelClient;
  store?: Store;
  runtime?: Partial<RuntimeOptions>;
  turnSettings?: TurnSettings;
  faults?: DriverFaults;
}): Promise<DriverKit> {
  const store = options.store ?? new MemoryStore();
  const agents = new AgentRegistry(options.agents);
  const workerOptions = { ...options.runtime, store, agents, model: options.model };
  const runtime = new Runtime({ ...workerOptions, model: await registryModelFor(workerOptions) });
  const { temporal, driven } = drivingTemporal((input) =>
    new TurnDriver(runtime, {
      ...(input.settings ? { settings: input.settings } : {}),
      ...(options.faults ? { faults: options.faults } : {}),
    }).drive(input.turnId),
  );
  const client = new TurnKitClient({
    store,
    agents,
    temporal,
    ...(options.turnSettings ? { turnSettings: options.turnSettings } : {}),
  });
  return {
    client,
    store,
    agents,
    runtime,
    taskQueue: 'engine-driver',
    driven,
    async stop() {
      if (!options.store) await store.close();
    },
  };
}
