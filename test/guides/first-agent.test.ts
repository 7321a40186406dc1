/**
 * Issue 45, the first-agent guide (docs/first-agent.md): examples/first-agent.ts, run as a user
 * runs it (its own process, TURNKIT_MODEL=openai:… and OPENAI_API_KEY), against a local server
 * speaking OpenAI's Responses API, on the real dev server and a SQLite file.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { blocksNotFromSources, codeBlocks } from '../helpers/doc-snippets.js';
import { providerServer, sendReply } from '../helpers/openai-sse.js';
import { requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const example = resolve(import.meta.dirname, '../../examples/first-agent.ts');
const tsx = import.meta.resolve('tsx');

type Request = { path: string; auth: string; body: Record<string, unknown> };
const received: Request[] = [];

const response = (output: unknown[]) => ({
  id: `resp_${received.length}`,
  object: 'response',
  created_at: 1_700_000_000,
  status: 'completed',
  model: 'gpt-first-hour',
  output,
  usage: { input_tokens: 40, output_tokens: 12, total_tokens: 52 },
});

/** The model: asks for the order first; answers from the tool's result once it has one. */
const server: Server = providerServer((body, res, req) => {
  received.push({ path: req.url ?? '', auth: String(req.headers['authorization'] ?? ''), body });
  const input = (body['input'] ?? []) as { type?: string; output?: string }[];
  const result = input.find((item) => item.type === 'function_call_output');
  const reply = result
    ? response([
        {
          type: 'message',
          id: 'msg_1',
          status: 'completed',
          role: 'assistant',
          content: [
            { type: 'output_text', text: `Your order ${answerFrom(result.output)}.`, annotations: [] },
          ],
        },
      ])
    : response([
        {
          type: 'function_call',
          id: 'fc_1',
          call_id: 'call_order',
          name: 'order_status',
          arguments: JSON.stringify({ orderId: 'A-1001' }),
        },
      ]);
  sendReply(res, body, 200, reply);
});

/** What the tool returned, read back from the request the way a model would read it. */
function answerFrom(output: string | undefined): string {
  const order = JSON.parse(output ?? '{}') as { orderId?: string; carrier?: string; eta?: string };
  return `${order.orderId} shipped with ${order.carrier}, arriving ${order.eta}`;
}

function runExample(env: Record<string, string | undefined>, args: string[] = []) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
    const child = spawn(process.execPath, ['--import', tsx, example, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

describe.skipIf(!(await requireTemporal()))('first hour: a first agent on a real provider', () => {
  let baseUrl = '';
  beforeAll(async () => {
    await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  afterAll(() => new Promise<void>((closed) => server.close(() => closed())));

  it('first hour: examples/first-agent.ts runs as written on TURNKIT_MODEL=openai:… and OPENAI_API_KEY, its tool result reaches the model, and the store holds the turn', async () => {
    const database = tempSqliteUrl('first-agent');
    const result = await runExample(
      {
        TURNKIT_MODEL: 'openai:gpt-first-hour',
        OPENAI_API_KEY: 'sk-first-hour',
        OPENAI_BASE_URL: baseUrl,
        TURNKIT_DATABASE_URL: database,
        TURNKIT_TASK_QUEUE: uniqueTaskQueue('first-agent'),
        ANTHROPIC_API_KEY: undefined,
        TURNKIT_OPENAI_COMPATIBLE_BASE_URL: undefined,
      },
      ['Where is my order A-1001?'],
    );
    expect(result.stderr).not.toContain('first-agent:');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Your order A-1001 shipped with DHL, arriving 2026-12-09.');
    expect(result.stdout).toContain('completed; tools: order_status completed');

    // The provider saw the key, the model id, the tool's schema, then the tool's real result.
    expect(received.map((r) => [r.path, r.auth, r.body['model']])).toEqual([
      ['/v1/responses', 'Bearer sk-first-hour', 'gpt-first-hour'],
      ['/v1/responses', 'Bearer sk-first-hour', 'gpt-first-hour'],
    ]);
    const tools = received[0]!.body['tools'] as { name: string }[];
    expect(tools.map((t) => t.name)).toEqual(['order_status']);

    const store = await openStore(database);
    try {
      const [turn] = await store.listTurns({ limit: 10 });
      expect(turn).toMatchObject({ agentName: 'support', status: 'completed' });
      const requested = (await store.listEvents(turn!.id)).filter((e) => e.type === 'model.requested');
      expect(requested.map((e) => e.payload['model'])).toEqual([
        'openai:gpt-first-hour',
        'openai:gpt-first-hour',
      ]);
      expect(turn!.outputText).toBe('Your order A-1001 shipped with DHL, arriving 2026-12-09.');
      const executions = await store.listToolExecutions({ turnId: turn!.id });
      expect(executions.map((e) => [e.toolName, e.status, e.result])).toEqual([
        [
          'order_status',
          'completed',
          { orderId: 'A-1001', status: 'shipped', carrier: 'DHL', eta: '2026-12-09' },
        ],
      ]);
    } finally {
      await store.close();
    }
  }, 120_000);

  it('first hour: without TURNKIT_MODEL the first agent says in one line what to set, exits 2, and writes nothing', async () => {
    const database = join(resolve(tempSqliteUrl('unused'), '..'), 'never.sqlite');
    const result = await runExample({ TURNKIT_MODEL: undefined, TURNKIT_DATABASE_URL: database });
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([
      "first-agent: set TURNKIT_MODEL to provider:model (e.g. openai:gpt-4o-mini) and that provider's key (e.g. OPENAI_API_KEY); see docs/first-agent.md",
    ]);
    expect(existsSync(database)).toBe(false);
  });
});

describe('first hour: the first-agent guide', () => {
  it('first hour: every TypeScript block of docs/first-agent.md is a piece of examples/first-agent.ts as it stands', () => {
    expect(codeBlocks('docs/first-agent.md').length).toBeGreaterThanOrEqual(5);
    expect(blocksNotFromSources('docs/first-agent.md', ['examples/first-agent.ts'])).toEqual([]);
  });
});
