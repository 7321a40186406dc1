/**
 * An in-process TurnKit on the real Temporal dev server: a store, an agent registry, a
 * worker on its own task queue and a client. Only the model is scripted.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { Agent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { RuntimeOptions } from '../../src/engine/runtime.js';
import type { ModelClient } from '../../src/models/types.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import { connectClient, connectNative } from './temporal.js';
import type { TurnKitWorker, TurnKitWorkerOptions } from '../../src/worker.js';
import type { TurnSettings } from '../../src/workflows/contract.js';

/** The shared client and worker connections of test/helpers/temporal.ts. */
export async function temporalConnections(): Promise<{ native: NativeConnection; client: Client }> {
  return { native: await connectNative(), client: await connectClient() };
}

export function tempSqliteUrl(name = 'turnkit'): string {
  return join(mkdtempSync(join(tmpdir(), 'turnkit-test-')), `${name}.sqlite`);
}

export interface TestKit {
  client: TurnKitClient;
  worker: TurnKitWorker;
  store: Store;
  agents: AgentRegistry;
  taskQueue: string;
  stop(): Promise<void>;
}

let queueCounter = 0;

export async function startKit(options: {
  agents: readonly Agent[];
  model?: ModelClient;
  store?: Store;
  runtime?: Partial<RuntimeOptions>;
  /** Worker-only options (`models`: providers' model queues). */
  worker?: Pick<TurnKitWorkerOptions, 'models'>;
  turnSettings?: TurnSettings;
}): Promise<TestKit> {
  const { native, client: temporal } = await temporalConnections();
  const store = options.store ?? (await openStore(tempSqliteUrl()));
  const agents = new AgentRegistry(options.agents);
  const taskQueue = `turnkit-test-${process.pid}-${Date.now()}-${queueCounter++}`;
  const worker = await createWorker({
    ...options.runtime,
    ...options.worker,
    store,
    agents,
    model: options.model,
    connection: native,
    taskQueue,
  });
  const running = worker.run();
  const client = new TurnKitClient({
    store,
    agents,
    temporal,
    taskQueue,
    ...(options.turnSettings ? { turnSettings: options.turnSettings } : {}),
  });
  return {
    client,
    worker,
    store,
    agents,
    taskQueue,
    async stop() {
      worker.shutdown();
      await running;
      if (!options.store) await store.close();
    },
  };
}
