/**
 * Issue 48, the MCP door: the MCP SDK's own `Client` over streamable HTTP against
 * `createMcpHandler`, the real Temporal dev server and a SQLite store (only the model is
 * scripted). A task is its turn: it waits for an approval as `input_required`, and its result
 * is fetched after the client reconnected to a restarted server.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpError, Task } from '@modelcontextprotocol/sdk/types.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpHandler } from '../../src/protocols/mcp-server.js';
import type { ProtocolBench } from '../helpers/protocol-kit.js';
import { bearer, charges, decisions, startProtocolBench } from '../helpers/protocol-kit.js';
import { waitUntil } from '../helpers/wait.js';

let bench: Omit<ProtocolBench, 'base'>;
let base: string;
let stopServer: () => Promise<void>;

async function serveMcp() {
  const served = await bench.serve({
    '/mcp': createMcpHandler({ client: bench.client, authenticate: bearer, maxBodyBytes: 64 * 1024 }),
  });
  base = served.base;
  stopServer = served.stop;
}

async function connect(user: string | null = 'alice'): Promise<Client> {
  const client = new Client({ name: 'protocols-test', version: '1' });
  const headers: Record<string, string> = user ? { authorization: `Bearer ${user}` } : {};
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers } }),
  );
  return client;
}

async function startTask(client: Client, name: string, args: Record<string, unknown>): Promise<Task> {
  const created = await client.request(
    { method: 'tools/call', params: { name, arguments: args } },
    CreateTaskResultSchema,
    { task: { ttl: 60_000 } },
  );
  return created.task;
}

async function statusOf(client: Client, taskId: string, wanted: Task['status']): Promise<Task> {
  let task: Task | undefined;
  await waitUntil(async () => {
    task = await client.experimental.tasks.getTask(taskId);
    return task.status === wanted;
  }, 120_000);
  return task!;
}

/** A raw JSON-RPC POST, as a client that is not the SDK would send it. */
async function post(body: string, headers: Record<string, string> = { authorization: 'Bearer alice' }) {
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body,
  });
  const text = await response.text();
  const data = /^data: (.*)$/m.exec(text)?.[1] ?? text;
  return { status: response.status, body: JSON.parse(data) as { error?: { code: number; message: string } } };
}

beforeAll(async () => {
  bench = await startProtocolBench();
  await serveMcp();
});
afterAll(async () => {
  await bench?.stop();
});

describe('protocols: the MCP server', { timeout: 180_000 }, () => {
  it('protocols: lists the agents as tools and calls one synchronously, with progress of its steps', async () => {
    const client = await connect();
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['pr_echo', 'pr_gate', 'pr_slow', 'pr_typed', 'turnkit_decide']);
    const typed = tools.find((t) => t.name === 'pr_typed')!;
    expect(typed.inputSchema.required).toEqual(['task', 'input']);
    expect(typed.execution?.taskSupport).toBe('optional');
    const progress: string[] = [];
    const result = await client.callTool(
      { name: 'pr_echo', arguments: { task: 'Why durable?' } },
      undefined,
      {
        onprogress: (p) => progress.push(p.message ?? ''),
      },
    );
    expect(result.isError).toBeFalsy();
    expect(result.content).toEqual([{ type: 'text', text: 'Durable execution keeps agents alive.' }]);
    expect(progress).toContain('calling lookup_fact');
    expect(progress).toContain('lookup_fact completed');
    const [turn] = (await bench.kit.store.listTurns({ agentName: 'pr_echo' })).slice(-1);
    expect(turn).toMatchObject({ status: 'completed', options: { principal: { user: 'alice' } } });
    await client.close();
  });

  it('protocols: a Task waits for an approval as input_required, is approved, and its result is fetched after a reconnect to a restarted server', async () => {
    let client = await connect();
    const task = await startTask(client, 'pr_gate', { task: 'Charge the card.' });
    expect(task.status).toBe('working');
    const turn = await bench.kit.store.loadTurn(task.taskId);
    expect(turn.agentName).toBe('pr_gate');
    const waiting = await statusOf(client, task.taskId, 'input_required');
    expect(waiting.statusMessage).toMatch(/awaiting approval: charge_card \(call .+\)/);

    const decided = await client.callTool({
      name: 'turnkit_decide',
      arguments: { taskId: task.taskId, decision: 'approve' },
    });
    expect(decided.isError).toBeFalsy();
    await client.close();

    // The server process is gone and comes back: the task is the turn, so nothing was lost.
    await stopServer();
    await serveMcp();
    client = await connect();
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, {
      timeout: 120_000,
    });
    expect(result.content).toEqual([{ type: 'text', text: 'The card was charged.' }]);
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe('completed');
    expect(charges).toContain(42);
    // The policy was asked as for the client's own reads and controls, with the caller's principal.
    const alice = { user: 'alice' };
    const turnId = task.taskId;
    expect(decisions).toContainEqual(expect.objectContaining({ action: 'read_messages', principal: alice }));
    expect(decisions).toContainEqual(
      expect.objectContaining({ action: 'approve', principal: alice, turn: turnId }),
    );
    await client.close();
  });

  it('protocols: tasks/cancel cancels the turn', async () => {
    const client = await connect();
    // A turn awaiting approval: it runs until decided, so the cancel never races its end.
    const task = await startTask(client, 'pr_gate', { task: 'Charge the card.' });
    await statusOf(client, task.taskId, 'input_required');
    const cancelled = await client.experimental.tasks.cancelTask(task.taskId, { timeout: 120_000 });
    expect(cancelled.status).toBe('cancelled');
    expect((await bench.kit.store.loadTurn(task.taskId)).status).toBe('cancelled');
    expect(decisions).toContainEqual(
      expect.objectContaining({ action: 'cancel', principal: { user: 'alice' } }),
    );
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, {
      timeout: 120_000,
    });
    expect(result.isError).toBe(true);
    await client.close();
  });

  it("protocols: a request without credentials is refused, and another principal's task is not found", async () => {
    await expect(connect(null)).rejects.toThrow(/401|not authenticated/);
    const alice = await connect();
    const task = await startTask(alice, 'pr_gate', { task: 'Charge the card.' });
    const bob = await connect('bob');
    const refusal = (id: string) =>
      bob.experimental.tasks.getTask(id).then(
        () => 'found',
        (e: McpError) => e.message,
      );
    const unknown = await refusal('turn_doesnotexist');
    const foreign = await refusal(task.taskId);
    expect(foreign).toBe(unknown.replace('turn_doesnotexist', task.taskId));
    expect(foreign).toMatch(/Task not found/);
    await expect(bob.experimental.tasks.cancelTask(task.taskId)).rejects.toThrow(/Task not found/);
    await expect(
      bob.callTool({ name: 'turnkit_decide', arguments: { taskId: task.taskId, decision: 'approve' } }),
    ).rejects.toThrow(/not found/);
    expect(await bench.kit.store.loadTurn(task.taskId)).toMatchObject({
      status: expect.not.stringMatching('cancelled'),
    });
    // Authenticated, but the policy refuses her reads: the same not-found.
    const mallory = await connect('mallory');
    await expect(mallory.experimental.tasks.getTask(task.taskId)).rejects.toThrow(/Task not found/);
    await alice.experimental.tasks.cancelTask(task.taskId);
    await Promise.all([alice.close(), bob.close(), mallory.close()]);
  });

  it('protocols: bad inputs get the JSON-RPC error and write nothing', async () => {
    const before = await bench.turnCount();
    const client = await connect();
    await expect(client.callTool({ name: 'pr_nobody', arguments: { task: 'x' } })).rejects.toThrow(
      /Tool pr_nobody not found/,
    );
    await expect(client.callTool({ name: 'pr_echo', arguments: {} })).rejects.toThrow(/needs a task/);
    await expect(
      client.callTool({ name: 'pr_typed', arguments: { task: 'x', input: { city: 3 } } }),
    ).rejects.toThrow(/input for pr_typed is invalid/);
    await expect(
      client.callTool({ name: 'pr_echo', arguments: { task: 'x', input: { city: 'Oslo' } } }),
    ).rejects.toThrow(/takes no input/);
    await expect(client.experimental.tasks.getTaskResult('turn_nope', CallToolResultSchema)).rejects.toThrow(
      /Task not found/,
    );
    await client.close();

    const malformed = await post('{"jsonrpc": "2.0", "method": ');
    expect(malformed).toMatchObject({ status: 400, body: { error: { code: -32700 } } });
    const notRpc = await post('{"hello": "world"}');
    expect(notRpc.status).toBe(400);
    expect(notRpc.body.error?.code).toBeLessThan(-32000);
    const huge = await post(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'pr_echo', arguments: { task: 'x'.repeat(70_000) } },
      }),
    );
    expect(huge).toMatchObject({ status: 413, body: { error: { code: -32600 } } });
    expect(await bench.turnCount()).toBe(before);
  });
});
