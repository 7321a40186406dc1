/**
 * `npm run bench`: the MCP door's cost. On the real Temporal server with a real TurnKit worker
 * in this process, the same one-step turn, run by run:
 *   baseline: `client.run()` then `run.result()`;
 *   mcp task: the MCP SDK's client calling the agent's tool as a Task over streamable HTTP
 *     (`createMcpHandler` on loopback), then `tasks/result` until the turn's output.
 * mcp_task_overhead_p50_ms is the difference of the medians; `tasks/result` polls the store at
 * the task's poll interval (500 ms by default), which bounds it.
 */
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { defineAgent } from '../src/agents/agent.js';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { ScriptedModel } from '../src/models/scripted-model.js';
import { createMcpHandler } from '../src/protocols/mcp-server.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';
import { mergeBenchResults, percentile, timed } from './results.js';

const address = process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233';
const runs = Number(process.env['BENCH_MCP_RUNS'] ?? 20);
const warmup = 2;

const dir = mkdtempSync(join(tmpdir(), 'turnkit-mcp-bench-'));
const store = await openStore(join(dir, 'mcp-bench.sqlite'));
const agents = new AgentRegistry([defineAgent({ name: 'mcp_bench', description: 'Answers at once.' })]);
const model = new ScriptedModel({ mcp_bench: () => ({ text: 'done' }) });
const taskQueue = `turnkit-mcp-bench-${Date.now()}`;
const connection = await NativeConnection.connect({ address });
const temporal = new Client({ connection: await Connection.connect({ address }) });
const worker = await createWorker({ store, agents, model, connection, taskQueue });
const client = new TurnKitClient({ store, agents, temporal, taskQueue });

const handler = createMcpHandler({ client });
const server = createServer((request, response) => void handler(request, response));
await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
const mcp = new McpClient({ name: 'mcp-bench', version: '1' });
await mcp.connect(new StreamableHTTPClientTransport(url));

async function direct(i: number): Promise<number> {
  return timed(async () => {
    const run = await client.run('mcp_bench', `direct #${i}`);
    await run.result();
  });
}

async function asTask(i: number): Promise<number> {
  return timed(async () => {
    const { task } = await mcp.request(
      { method: 'tools/call', params: { name: 'mcp_bench', arguments: { task: `task #${i}` } } },
      CreateTaskResultSchema,
      { task: { ttl: 60_000 } },
    );
    const result = await mcp.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    if (result.isError) throw new Error(`the bench task failed: ${JSON.stringify(result.content)}`);
  });
}

const results = await worker.worker.runUntil(async () => {
  for (let i = 0; i < warmup; i++) {
    await direct(-1 - i);
    await asTask(-1 - i);
  }
  const baseline: number[] = [];
  const tasks: number[] = [];
  for (let i = 0; i < runs; i++) {
    baseline.push(await direct(i));
    tasks.push(await asTask(i));
  }
  const base = percentile(baseline, 50);
  const task = percentile(tasks, 50);
  return {
    mcp_task_runs: runs,
    mcp_task_p50_ms: task,
    mcp_task_baseline_run_p50_ms: base,
    mcp_task_overhead_p50_ms: task - base,
    mcp_task_vs_run_p50: task / base,
  };
});

console.log(`\nTurnKit MCP task benchmark (n=${runs}, after ${warmup} warm-up runs)\n`);
for (const [key, value] of Object.entries(results))
  console.log(key.padEnd(44), (Number.isInteger(value) ? String(value) : value.toFixed(2)).padStart(10));
mergeBenchResults({ mcp_task_measuredAt: new Date().toISOString(), ...results });
await mcp.close();
server.closeAllConnections();
server.close();
await store.close();
await connection.close();
await temporal.connection.close();
