/**
 * Issue 49: failure messages are payloads too (decision 81). A turn fails on a provider error
 * whose text holds a planted secret; with the codec on, neither the activity's failure nor the
 * workflow's holds it in plain bytes (TurnKit's failure converter moves a failure's message and
 * stack into `encodedAttributes`, which the codec seals), and the codec opens it again. Without
 * the codec (the control) the secret is in the history in plain bytes. The turn's current details
 * (a query's answer) are sealed by the worker's codec too.
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { EncryptionCodec } from '../../src/codec/encryption-codec.js';
import { ModelError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import { turnWorkflowId } from '../../src/workflows/contract.js';
import { connectClient, connectNative, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const SECRET = `failure-secret-${randomBytes(6).toString('hex')}`;
const codec = new EncryptionCodec([{ id: 'f-2026', key: randomBytes(32) }]);
const agent = defineAgent({ name: 'failing_agent', limits: { maxIterations: 2 } });
const model = new ScriptedModel({
  failing_agent: () => ({ error: new ModelError(`the provider refused the prompt about ${SECRET}`) }),
});

let store: Store;
let temporal: Client;

/** Runs one failing turn with (or without) the codec; returns its history's serialized bytes and the history. */
async function failingTurn(payloadCodecs?: PayloadCodec[]) {
  const taskQueue = uniqueTaskQueue('privacy-failures');
  const agents = new AgentRegistry([agent]);
  const worker = await createWorker({
    store,
    agents,
    model,
    connection: await connectNative(),
    taskQueue,
    ...(payloadCodecs ? { payloadCodecs } : {}),
  });
  const done = worker.run();
  try {
    const client = new TurnKitClient({
      store,
      agents,
      taskQueue,
      temporal: new Client({
        connection: temporal.connection,
        namespace: temporal.options.namespace,
        ...(payloadCodecs ? { dataConverter: { payloadCodecs } } : {}),
      }),
    });
    const run = await client.run('failing_agent', 'Say hello');
    const ended = await run.result().catch(async () => run.turn());
    expect(ended.status).toBe('failed');
    expect(ended.error?.message).toContain(SECRET);
    const history = await temporal.workflow.getHandle(turnWorkflowId(run.turnId)).fetchHistory();
    // The turn's current details (the Web UI's "current details"), as the worker answers them.
    const { queryResult } = await temporal.workflowService.queryWorkflow({
      namespace: temporal.options.namespace,
      execution: { workflowId: turnWorkflowId(run.turnId) },
      query: { queryType: '__temporal_workflow_metadata' },
    });
    const details = queryResult!.payloads![0]!;
    return {
      history,
      details,
      bytes: Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish()),
    };
  } finally {
    worker.shutdown();
    await done;
  }
}

describe.skipIf(!(await requireTemporal()))('privacy: failure messages through the codec (issue 49)', () => {
  beforeAll(async () => {
    store = await openStore(tempSqliteUrl('privacy-failures'));
    temporal = await connectClient();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('privacy: without the codec, a failed turn history holds the provider error text in plain bytes (the control)', async () => {
    const { bytes, details } = await failingTurn();
    expect(bytes.includes(SECRET)).toBe(true);
    expect(Buffer.from(details.data!).toString('utf8')).toContain('currentDetails');
  });

  it('privacy: with the codec on, no failure of a failed turn history holds the secret in plain bytes, and its current details are sealed; the codec opens both', async () => {
    const { history, bytes, details } = await failingTurn([codec]);
    expect(bytes.includes(SECRET)).toBe(false);
    // Current details are a query's answer: sealed by the worker's codec like any payload.
    expect(Buffer.from(details.metadata!['encoding']!).toString()).toBe('binary/encrypted');
    expect(Buffer.from(details.data!).toString('latin1')).not.toContain('currentDetails');
    const [openedDetails] = await codec.decode([details]);
    expect(Buffer.from(openedDetails!.data!).toString('utf8')).toContain('currentDetails');
    const failures = history.events!.flatMap((event) => {
      const failure =
        event.activityTaskFailedEventAttributes?.failure ??
        event.workflowExecutionFailedEventAttributes?.failure;
      return failure ? [failure] : [];
    });
    expect(failures.length).toBeGreaterThan(0);
    // Every failure TurnKit raised carries its message encoded; the codec opens one with the secret.
    expect(
      failures.every((failure) => failure.message === 'Encoded failure' && failure.encodedAttributes),
    ).toBe(true);
    const opened = await codec.decode(failures.map((failure) => failure.encodedAttributes!));
    expect(
      opened.some((payload) =>
        Buffer.from(payload.data ?? [])
          .toString('utf8')
          .includes(SECRET),
      ),
    ).toBe(true);
  });
});
