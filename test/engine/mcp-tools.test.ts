/**
 * MCP tools against a real stdio MCP server (test/fixtures/mcp-server.ts, built with the
 * official SDK), on the real dev server with a SQLite store; only the model is scripted.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import type { McpServerOptions, McpToolSet } from '../../src/agents/mcp.js';
import { mcpTools } from '../../src/agents/mcp.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import { ArgumentError, ConfigError } from '../../src/errors.js';
import type { ModelRequest } from '../../src/models/types.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import { createWorker } from '../../src/worker.js';
import { connectNative, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit, tempSqliteUrl } from '../helpers/turnkit.js';
import { processAlive } from '../helpers/temporal-server.js';
import { waitUntil } from '../helpers/wait.js';
import { fixtureServer } from '../fixtures/mcp-server.js';

const root = resolve(import.meta.dirname, '../..');
const logFile = join(mkdtempSync(join(tmpdir(), 'turnkit-mcp-')), 'calls.jsonl');
writeFileSync(logFile, '');

const fixture = (env: Record<string, string> = {}, extra: Partial<McpServerOptions> = {}): McpServerOptions =>
  ({
    name: 'fixture',
    stdio: {
      command: process.execPath,
      args: ['--import', 'tsx', join(root, 'test/fixtures/mcp-server.ts')],
      cwd: root,
      env: { MCP_FIXTURE_LOG: logFile, ...env },
    },
    ...extra,
  }) as McpServerOptions;

const calls = () =>
  readFileSync(logFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { name: string; args?: unknown; pid?: number });

/** What the model read back: the tool messages of its last request. */
const toolMessages = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === 'tool').map((m) => (m as { content: string }).content);

const seen: Record<string, ModelRequest[]> = {};
/** A script: the first call makes the given tool calls, the second one answers what it read. */
const script =
  (agent: string, ...steps: { name: string; arguments: object }[][]) =>
  (request: ModelRequest, { call }: { call: number }) => {
    (seen[agent] ??= []).push(request);
    const step = steps[call];
    if (step) return { toolCalls: step };
    return { text: JSON.stringify(toolMessages(request)) };
  };

describe.skipIf(!(await requireTemporal()))('mcp', () => {
  let tools: McpToolSet;
  let kit: TestKit;

  beforeAll(async () => {
    tools = await mcpTools(fixture());
    const agent = (name: string) => defineAgent({ name, instructions: 'Use the tools.', tools: [...tools] });
    kit = await startKit({
      agents: [agent('user'), agent('crasher'), agent('broken'), agent('waiter')],
      model: new ScriptedModel({
        user: script('user', [
          { name: 'echo', arguments: { text: 'hi' } },
          { name: 'add', arguments: { a: 2, b: 3 } },
        ]),
        crasher: script(
          'crasher',
          [{ name: 'crash', arguments: {} }],
          [{ name: 'echo', arguments: { text: 'again' } }],
        ),
        broken: script('broken', [
          { name: 'garbage', arguments: {} },
          { name: 'refuse', arguments: {} },
          { name: 'echo', arguments: { wrong: 1 } },
        ]),
        waiter: script('waiter', [{ name: 'slow', arguments: { ms: 30_000 } }]),
      }),
    });
  }, 60_000);

  afterAll(async () => {
    await kit?.stop();
    await tools?.close();
  });

  it('mcp: the server’s tools are listed at boot with their JSON Schemas, recovery unknown unless marked replay-safe', async () => {
    expect(tools.server).toBe('fixture');
    expect(tools.map((tool) => tool.name)).toEqual(['echo', 'add', 'crash', 'garbage', 'refuse', 'slow']);
    const echo = tools.find((tool) => tool.name === 'echo')!;
    expect(echo.description).toBe('Echoes a text back.');
    expect(echo.jsonSchema).toEqual({
      type: 'object',
      properties: { text: { type: 'string', description: 'what to echo' } },
      required: ['text'],
    });
    expect(tools.every((tool) => tool.recovery === 'unknown')).toBe(true);
    const safe = await mcpTools(fixture({}, { replaySafe: true, prefix: 'fx', name: 'fixture-safe' }));
    try {
      expect(safe.map((tool) => tool.name)).toContain('fx_echo');
      expect(safe.every((tool) => tool.recovery === 'replaySafe')).toBe(true);
    } finally {
      await safe.close();
    }
  });

  it('mcp: a turn calls MCP tools as tool activities and the model reads their results (text and structured)', async () => {
    const run = await kit.client.run('user', 'Echo and add.');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(JSON.parse(turn.outputText!)).toEqual([
      JSON.stringify({ result: 'echo: hi' }),
      JSON.stringify({ sum: 5 }),
    ]);
    const executions = await run.toolExecutions();
    expect(executions.map((e) => [e.toolName, e.status])).toEqual([
      ['echo', 'completed'],
      ['add', 'completed'],
    ]);
    // The model was offered the server's schemas.
    const offered = seen['user']![0]!.tools.find((tool) => tool.name === 'add');
    expect(offered?.inputSchema).toMatchObject({ required: ['a', 'b'] });
    expect(calls().filter((c) => c.name === 'echo' || c.name === 'add')).toHaveLength(2);
  });

  it('mcp: a server that exits mid-call is a failed result with an unknown outcome; the next call restarts it', async () => {
    const run = await kit.client.run('crasher', 'Crash, then echo.');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const executions = await run.toolExecutions();
    expect(executions.map((e) => [e.toolName, e.status])).toEqual([
      ['crash', 'failed'],
      ['echo', 'completed'],
    ]);
    expect(executions[0]!.error?.message).toMatch(/MCP call crash on fixture failed \(outcome unknown\)/);
    // Each call ran once (never re-run), and the echo ran in a new server process.
    const crash = calls().filter((c) => c.name === 'crash');
    const again = calls().filter((c) => c.name === 'echo' && (c.args as { text?: string }).text === 'again');
    expect(crash).toHaveLength(1);
    expect(again).toHaveLength(1);
    expect(again[0]!.pid).not.toBe(crash[0]!.pid);
    expect(turn.outputText).toContain('echo: again');
  });

  it('mcp: an invalid result, a tool error and invalid arguments are failed results the model reads', async () => {
    const run = await kit.client.run('broken', 'Misbehave.');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const executions = await run.toolExecutions();
    expect(executions.map((e) => [e.toolName, e.status])).toEqual([
      ['garbage', 'failed'],
      ['refuse', 'failed'],
      ['echo', 'failed'],
    ]);
    expect(executions[0]!.error?.message).toContain('invalid result for garbage');
    expect(executions[1]!.error?.message).toBe('refused: not allowed today');
    expect(executions[2]!.error?.message).toContain('unknown argument(s): wrong');
    const read = JSON.parse(turn.outputText!) as string[];
    expect(read).toHaveLength(3);
    expect(read[1]).toContain('refused: not allowed today');
  });

  it('mcp: cancelling the turn cancels the MCP request in flight and closes its call with one result', async () => {
    const run = await kit.client.run('waiter', 'Wait.');
    await waitUntil(async () => calls().some((c) => c.name === 'slow'), 20_000);
    await run.cancel();
    const turn = await run.result();
    expect(turn.status).toBe('cancelled');
    await waitUntil(async () => calls().some((c) => c.name === 'slow:cancelled'), 10_000);
    const executions = await run.toolExecutions();
    expect(executions).toHaveLength(1);
    expect(executions[0]!.status).not.toBe('running');
  });

  it('mcp: a streamable-HTTP server by url serves the same tools, and a turn calls them', async () => {
    // Stateless: one MCP server and transport per HTTP request, as the SDK's example does.
    const http = createServer((req, res) => {
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      const server = fixtureServer();
      res.on('close', () => void transport.close().then(() => server.close()));
      void server.connect(transport).then(() => transport.handleRequest(req, res));
    });
    await new Promise<void>((done) => http.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    const remote = await mcpTools({ name: 'remote', url, prefix: 'remote' });
    try {
      expect(remote.map((tool) => tool.name)).toContain('remote_add');
      const agent = defineAgent({ name: 'remote-user', tools: [...remote] });
      const kit = await startKit({
        agents: [agent],
        model: new ScriptedModel({
          'remote-user': script('remote-user', [{ name: 'remote_add', arguments: { a: 40, b: 2 } }]),
        }),
      });
      try {
        const turn = await (await kit.client.run('remote-user', 'Add.')).result();
        expect(turn.status).toBe('completed');
        expect(JSON.parse(turn.outputText!)).toEqual([JSON.stringify({ sum: 42 })]);
      } finally {
        await kit.stop();
      }
    } finally {
      await remote.close();
      http.closeAllConnections();
      await new Promise((done) => http.close(done));
    }
  });

  it('mcp: a worker that shuts down closes the MCP sessions no running worker still uses: the stdio server sees its input end and exits', async () => {
    const set = await mcpTools(fixture({}, { name: 'fixture-shutdown' }));
    const closer = defineAgent({ name: 'closer', tools: [...set] });
    const model = () =>
      new ScriptedModel({ closer: script('closer', [{ name: 'echo', arguments: { text: 'bye' } }]) });
    const closed = (pid: number) => calls().some((c) => c.name === 'session:closed' && c.pid === pid);
    const echoPids = () =>
      calls()
        .filter((c) => c.name === 'echo' && (c.args as { text?: string }).text === 'bye')
        .map((c) => c.pid!);
    try {
      // Two workers of one process use the set; the first one stopping leaves the session open.
      const first = await startKit({ agents: [closer], model: model() });
      const second = await startKit({ agents: [closer], model: model() });
      expect((await (await first.client.run('closer', 'Say bye.')).result()).status).toBe('completed');
      const [pid] = echoPids();
      await first.stop();
      expect(closed(pid!)).toBe(false);
      expect(processAlive(pid!)).toBe(true);
      expect((await (await second.client.run('closer', 'Say bye again.')).result()).status).toBe('completed');
      expect(echoPids()).toEqual([pid, pid]);
      // The last one stopping closes it: the server read the end of its input and exited.
      await second.stop();
      expect(closed(pid!)).toBe(true);
      expect(processAlive(pid!)).toBe(false);
      // The set is still usable: a worker started later opens a new session on its first call.
      const third = await startKit({ agents: [closer], model: model() });
      try {
        expect((await (await third.client.run('closer', 'Bye once more.')).result()).status).toBe(
          'completed',
        );
      } finally {
        await third.stop();
      }
      const pids = echoPids();
      expect(pids).toHaveLength(3);
      expect(pids[2]).not.toBe(pid);
      expect(closed(pids[2]!)).toBe(true);
    } finally {
      await set.close();
    }
  });

  it('mcp: a server that does not start is a ConfigError at boot', async () => {
    const error = await mcpTools({ name: 'missing', stdio: { command: '/nonexistent/mcp-server' } }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain('MCP server missing did not start');
    const exits = await mcpTools({
      name: 'exits',
      stdio: { command: process.execPath, args: ['-e', 'console.error("no config"); process.exit(2)'] },
    }).catch((e: unknown) => e);
    expect(exits).toBeInstanceOf(ConfigError);
    expect((exits as Error).message).toContain('no config');
  });

  it('mcp: a tool whose name collides with one of the agent’s tools is a clear error', async () => {
    const colliding = await mcpTools(fixture({ MCP_FIXTURE_COLLIDE: '1' }, { name: 'fixture-collide' }));
    try {
      const lookup = defineTool({
        name: 'lookup',
        description: 'Ours.',
        input: z.object({}),
        execute: () => ({}),
      });
      expect(() => defineAgent({ name: 'clash', tools: [lookup, ...colliding] })).toThrow(ArgumentError);
      expect(() => defineAgent({ name: 'clash', tools: [lookup, ...colliding] })).toThrow(
        'duplicate tool name lookup',
      );
    } finally {
      await colliding.close();
    }
  });

  it('mcp: workers of one store listing different tools for a server is a boot-time ConfigError', async () => {
    const store = await openStore(tempSqliteUrl('mcp-manifest'));
    const first = await mcpTools(fixture({}, { name: 'shared' }));
    const second = await mcpTools(fixture({ MCP_FIXTURE_EXTRA: '1' }, { name: 'shared' }));
    try {
      const boot = async (set: McpToolSet) =>
        createWorker({
          store,
          agents: new AgentRegistry([defineAgent({ name: 'a', tools: [...set] })]),
          model: new ScriptedModel({}),
          connection: await connectNative(),
          taskQueue: uniqueTaskQueue('mcp-manifest'),
        });
      // The first worker records the list; the same list boots again; a different one does not.
      await boot(first);
      await boot(first);
      const error = await boot(second).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toContain('MCP server shared');
      expect((error as Error).message).toContain('+extra');
    } finally {
      await first.close();
      await second.close();
      await store.close();
    }
  });
});
