/**
 * Issue 48: a worker killed mid-turn under each protocol door. An MCP Task, an A2A task and an
 * AG-UI run are in flight on a worker in its own OS process that SIGKILLs itself once all three
 * turns have asked the model; a replacement worker finishes them. Each call ends in one
 * completed task, and the tool's external effect happened once per turn.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Message, Task } from '@a2a-js/sdk';
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { HttpAgent } from '@ag-ui/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { createA2AHandler } from '../../src/protocols/a2a-server.js';
import { createAgUiHandler } from '../../src/protocols/ag-ui-endpoint.js';
import { createMcpHandler } from '../../src/protocols/mcp-server.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { crashFixture } from '../fixtures/crash-agents.js';
import { temporalConnections } from '../helpers/turnkit.js';
import type { WorkerProcess } from '../helpers/worker-process.js';
import { spawnWorker } from '../helpers/worker-process.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const fixture = new URL('../fixtures/protocol-worker.ts', import.meta.url).pathname;
const workers: WorkerProcess[] = [];
let store: Store | undefined;
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await store?.close();
});

describe('protocols: a worker killed mid-turn', () => {
  it('protocols: under MCP, A2A and AG-UI, each call ends in one completed task with its effect once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'turnkit-protocols-kill-'));
    const database = join(dir, 'turnkit.sqlite');
    const log = join(dir, 'effects.log');
    store = await openStore(database);
    const taskQueue = `turnkit-protocols-kill-${Date.now()}`;
    const client = new TurnKitClient({
      store,
      agents: new AgentRegistry(crashFixture(log, 'client').agents),
      temporal: (await temporalConnections()).client,
      taskQueue,
      turnSettings: { model: { heartbeatTimeout: '3 seconds' }, tool: { heartbeatTimeout: '3 seconds' } },
    });
    const door = { client, agents: ['replayer'] };
    const routes = {
      mcp: createMcpHandler(door),
      a2a: createA2AHandler(door),
      agui: createAgUiHandler(door),
    };
    const server = createServer((request, response) => {
      const first = new URL(request.url ?? '/', 'http://x').pathname.split('/')[1] as keyof typeof routes;
      void routes[first](request, response);
    });
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const env = { TURNKIT_DATABASE_URL: database, TURNKIT_TEST_LOG: log, TURNKIT_TEST_TASK_QUEUE: taskQueue };
    const doomed = spawnWorker({ ...env, TURNKIT_TEST_KILL_AFTER_TURNS: '3' }, fixture);
    workers.push(doomed);
    await doomed.ready;

    const mcp = new Client({ name: 'kill-test', version: '1' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
    const { task } = await mcp.request(
      { method: 'tools/call', params: { name: 'replayer', arguments: { task: 'Upsert it (mcp).' } } },
      CreateTaskResultSchema,
      { task: { ttl: 600_000 } },
    );
    const a2a = await new ClientFactory({
      transports: [new JsonRpcTransportFactory({})],
      cardResolver: new DefaultAgentCardResolver({}),
    }).createFromUrl(`${base}/a2a/replayer/`);
    const message: Message = {
      messageId: 'kill-a2a',
      contextId: '',
      taskId: '',
      role: Role.ROLE_USER,
      parts: [
        {
          content: { $case: 'text', value: 'Upsert it (a2a).' },
          metadata: undefined,
          filename: '',
          mediaType: '',
        },
      ],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
    const a2aDone = a2a.sendMessage({ tenant: '', message, configuration: undefined, metadata: undefined });
    const agui = new HttpAgent({
      url: `${base}/agui/replayer`,
      threadId: 'kill-thread',
      initialMessages: [{ id: 'kill-agui', role: 'user', content: 'Upsert it (ag-ui).' }],
    });
    const aguiDone = agui.runAgent();

    const exit = await doomed.exited;
    expect(exit.signal, doomed.output()).toBe('SIGKILL');
    const replacement = spawnWorker({ ...env, TURNKIT_TEST_FLAVOR: 'replacement' }, fixture);
    workers.push(replacement);

    const mcpResult = await mcp.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, {
      timeout: 110_000,
    });
    expect(mcpResult.isError).toBeFalsy();
    const a2aTask = (await a2aDone) as Task;
    expect(a2aTask.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const aguiResult = (await aguiDone).result as { turnId: string };

    const turnIds = [task.taskId, a2aTask.id, aguiResult.turnId];
    for (const turnId of turnIds) {
      const turn = await store.loadTurn(turnId);
      expect(turn.status).toBe('completed');
      // One turn per call: the conversation has no second turn a retry would have made.
      expect(await store.listTurns({ conversationId: turn.conversationId })).toHaveLength(1);
    }
    const effects = readFileSync(log, 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('effect:upsert_record:'));
    expect(effects).toHaveLength(3);
    await mcp.close();
    server.closeAllConnections();
    server.close();
  }, 240_000);
});
