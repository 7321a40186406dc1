/**
 * Issue 46 (decision 82), release 0.6's turn shape behind the patch `turnkit-0.6`: a turn
 * started by a worker of the previous release (the patch refused by the worker's
 * `patchActivationCallback`, as a worker without it would) finishes on the upgraded worker in
 * the shape it started with; a turn started after the upgrade has the new shape: its first
 * model step claims it, and the terminal tool's activity writes the output.
 */
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { createWorker } from '../../src/worker.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { openPgTestStore, pgTestUrl, postgresAvailable } from '../helpers/postgres.js';
import { requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { temporalConnections, tempSqliteUrl } from '../helpers/turnkit.js';
import { wireTool } from '../helpers/tools.js';
import { waitUntil } from '../helpers/wait.js';

const temporalUp = await requireTemporal();

/** Every run of the `wire` tool, by either worker: it runs once, after the upgrade. */
const ran: string[] = [];
const finish = defineTool({
  name: 'finish',
  description: 'Ends the turn.',
  input: z.object({ answer: z.string() }),
  terminal: true,
  execute: ({ answer }) => ({ result: answer }),
});
const agents = new AgentRegistry([defineAgent({ name: 'payer', tools: [wireTool(ran), finish] })]);
const model = new ScriptedModel({
  payer: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? { toolCalls: [{ name: 'finish', arguments: { answer: 'paid' } }] }
      : { toolCalls: [{ name: 'wire', arguments: { amount: 5 } }] },
});

/** What the shape of a turn's history shows: patches, local activities, scheduled activities. */
async function shapeOf(temporal: Client, workflowId: string) {
  const history = await temporal.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const markers = events.flatMap((event) => event.markerRecordedEventAttributes?.markerName ?? []);
  const patches = events.flatMap((event) => {
    const attributes = event.markerRecordedEventAttributes;
    if (attributes?.markerName !== 'core_patch') return [];
    const data = attributes.details?.['patch-data']?.payloads?.[0]?.data;
    return data ? [(JSON.parse(Buffer.from(data).toString('utf8')) as { id: string }).id] : [];
  });
  const activities = events.flatMap(
    (event) => event.activityTaskScheduledEventAttributes?.activityType?.name ?? [],
  );
  return { patches, localActivities: markers.filter((m) => m === 'core_local_activity').length, activities };
}

for (const backend of ['sqlite', 'postgres'] as const) {
  describe.skipIf(!temporalUp || (backend === 'postgres' && !postgresAvailable))(
    `release 0.6's turn shape on ${backend}`,
    () => {
      let native: NativeConnection;
      let temporal: Client;
      let store: Store;
      let closeStore: () => Promise<void>;
      /** Each worker opens the store itself (a worker that shuts down closes its store). */
      let openAgain: () => Promise<Store>;
      let client: TurnKitClient;
      const taskQueue = uniqueTaskQueue('turnkit-floor-roll-out');
      const startWorker = async (previousRelease: boolean) => {
        const worker = await createWorker({
          store: await openAgain(),
          agents,
          model,
          connection: native,
          taskQueue,
          // The previous release had no `turnkit-0.6`: its runs never recorded the marker.
          ...(previousRelease
            ? { worker: { patchActivationCallback: ({ patchId }) => patchId !== 'turnkit-0.6' } }
            : {}),
        });
        return { worker, done: worker.run() };
      };
      const stop = async (running: { worker: TurnKitWorker; done: Promise<void> }) => {
        running.worker.shutdown();
        await running.done;
      };

      beforeAll(async () => {
        ({ native, client: temporal } = await temporalConnections());
        if (backend === 'postgres') {
          const pg = await openPgTestStore();
          store = pg.store;
          closeStore = pg.drop;
          openAgain = () => PostgresStore.open(pgTestUrl(), { schema: pg.schema });
        } else {
          const url = tempSqliteUrl('floor-roll-out');
          store = await openStore(url);
          closeStore = () => store.close();
          openAgain = () => openStore(url);
        }
        client = new TurnKitClient({ store, agents, temporal, taskQueue });
      });
      afterAll(async () => {
        await closeStore?.();
      });

      it('roll-out: a turn started on the previous release (its claim and output local activities) finishes on the upgraded worker in that shape; a new turn runs at the floor shape', async () => {
        ran.length = 0;
        const previous = await startWorker(true);
        const before = await client.run('payer', 'pay the bill');
        // It waits for a person's approval, holding no worker: the upgrade happens now.
        await waitUntil(async () => (await before.pendingApprovals()).length === 1);
        await stop(previous);
        const upgraded = await startWorker(false);
        try {
          const [pending] = await before.pendingApprovals();
          await before.approve(pending!.toolCallId, { principal: 'ops' });
          const turn = await before.result();
          expect(turn.status).toBe('completed');
          expect(turn.outputText).toContain('paid');
          expect(ran).toEqual(['wire 5']);
          const old = await shapeOf(temporal, before.workflowId);
          expect(old.patches).toEqual(['turnkit-0.5']);
          expect(old.activities).not.toContain('claimStep');
          // The claim and the output step, each a local activity, as the previous release ran them.
          expect(old.localActivities).toBeGreaterThanOrEqual(2);

          const after = await client.run('payer', 'pay again');
          await waitUntil(async () => (await after.pendingApprovals()).length === 1);
          const [next] = await after.pendingApprovals();
          await after.approve(next!.toolCallId, { principal: 'ops' });
          expect((await after.result()).status).toBe('completed');
          const floor = await shapeOf(temporal, after.workflowId);
          expect(floor.patches).toEqual(['turnkit-0.6']);
          expect(floor.activities[0]).toBe('claimStep');
          expect(floor.activities).not.toContain('claimTurn');
          // No local activity but the suspend and resume around the approval.
          expect(floor.localActivities).toBe(2);
          expect((await store.loadTurn(after.turnId)).outputText).toContain('paid');
        } finally {
          await stop(upgraded);
        }
      });
    },
  );
}
