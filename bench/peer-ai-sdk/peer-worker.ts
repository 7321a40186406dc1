/**
 * THE COMPARISON (not TurnKit): a process hosting the bench agent on `@temporalio/ai-sdk`
 * (workflows.ts) — its worker, with the plugin and the same `MockLanguageModelV4` script as
 * TurnKit's side (../peer-model.ts), and its client. bench/peer-bench.ts drives it over IPC,
 * alternating with TurnKit's side, so both see the same machine:
 *
 * - `{ cmd: 'turn', prompt }`          → `{ ms, workflowId }` (one run, start to result)
 * - `{ cmd: 'throughput', total, width }` → `{ perSecond }`
 * - `{ cmd: 'history', workflowId }`   → `{ events, bytes }`
 *
 * Worker settings: what TurnKit's createWorker sets (src/worker.ts), so only the runtime differs.
 * Environment: TEMPORAL_ADDRESS, PEER_TASK_QUEUE.
 */
import { fileURLToPath } from 'node:url';
import { AiSdkPlugin } from '@temporalio/ai-sdk';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { NativeConnection, Worker } from '@temporalio/worker';
import { customProvider } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { peerAgentGenerate } from '../peer-model.js';
import { throughput, timed } from '../results.js';
import * as activities from './activities.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const taskQueue = process.env['PEER_TASK_QUEUE'] ?? `peer-ai-sdk-${Date.now()}`;

const model = new MockLanguageModelV4({ doGenerate: peerAgentGenerate });
const worker = await Worker.create({
  connection: await NativeConnection.connect({ address }),
  taskQueue,
  workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
  activities,
  plugins: [new AiSdkPlugin({ modelProvider: customProvider({ languageModels: { mock: model } }) })],
  maxHeartbeatThrottleInterval: '500 milliseconds',
  defaultHeartbeatThrottleInterval: '500 milliseconds',
  stickyQueueScheduleToStartTimeout: '3 seconds',
  shutdownGraceTime: '1 second',
});
const client = new Client({ connection: await Connection.connect({ address }) });

let runs = 0;
const run = async (prompt: string) => {
  const workflowId = `${taskQueue}-${runs++}`;
  await client.workflow.execute('peerAgentWorkflow', { taskQueue, workflowId, args: [prompt] });
  return workflowId;
};

type Command =
  | { cmd: 'turn'; prompt: string }
  | { cmd: 'throughput'; total: number; width: number }
  | { cmd: 'history'; workflowId: string };

async function answer(command: Command): Promise<object> {
  switch (command.cmd) {
    case 'turn': {
      let workflowId = '';
      const ms = await timed(async () => (workflowId = await run(command.prompt)));
      return { ms, workflowId };
    }
    case 'throughput':
      return { perSecond: await throughput(command.total, command.width, () => run('What is the answer?')) };
    case 'history': {
      const history = await client.workflow.getHandle(command.workflowId).fetchHistory();
      return {
        events: history.events?.length ?? 0,
        bytes: proto.temporal.api.history.v1.History.encode(history).finish().length,
      };
    }
  }
}

process.on('message', (command: Command) => {
  answer(command).then(
    (result) => process.send?.({ ok: true, ...result }),
    (error: unknown) => process.send?.({ ok: false, error: String(error) }),
  );
});
process.on('SIGTERM', () => worker.shutdown());
const running = worker.run();
console.log('peer-worker ready');
await running;
await client.connection.close();
process.disconnect?.();
