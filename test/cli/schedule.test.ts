/**
 * `turnkit schedule ls|create|pause|unpause|trigger|delete` (issue 31), run in this process
 * against the real dev server, with a worker on the agents module the CLI tests use.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentRegistry } from '../../src/agents/registry.js';
import { main } from '../../src/cli/main.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import type { TurnKitWorker } from '../../src/worker.js';
import { agents, model } from '../fixtures/cli-agents.js';
import { connectClient, connectNative, temporalAddress } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

const agentsModule = join(fileURLToPath(new URL('../..', import.meta.url)), 'test/fixtures/cli-agents.ts');
const url = tempSqliteUrl('schedule-cli');
const taskQueue = `turnkit-schedule-cli-${process.pid}-${Date.now()}`;
let store: Store;
let worker: TurnKitWorker;
let running: Promise<void>;
let client: TurnKitClient;

async function turnkit(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const stream = (append: (text: string) => void) =>
    ({ isTTY: false, write: (text: string) => (append(text), true) }) as unknown as NodeJS.WriteStream;
  const code = await main(
    [
      '--store',
      url,
      '--address',
      temporalAddress(),
      '--task-queue',
      taskQueue,
      '--agents',
      agentsModule,
      ...args,
    ],
    { out: stream((text) => (out += text)), err: stream((text) => (err += text)) },
  );
  return { code, out, err };
}

describe('turnkit schedule', () => {
  beforeAll(async () => {
    store = await openStore(url);
    worker = await createWorker({
      store,
      agents: new AgentRegistry(agents),
      model,
      connection: await connectNative(),
      taskQueue,
    });
    running = worker.run();
    client = new TurnKitClient({
      store,
      agents: new AgentRegistry(agents),
      temporal: await connectClient(),
      taskQueue,
    });
  });

  afterAll(async () => {
    worker?.shutdown();
    await running;
    await store?.close();
  });

  it('schedule: the CLI creates, lists, pauses, triggers and deletes a schedule', async () => {
    const id = `cli-${process.pid}-${Date.now().toString(36)}`;
    const created = await turnkit(
      'schedule',
      'create',
      id,
      'helper',
      'Look up durable.',
      '--cron',
      '0 0 1 1 *',
      '--max-spend',
      '2',
      '--principal',
      '{"user":"ops"}',
    );
    expect(created).toMatchObject({ code: 0, out: `${id}\n  temporal schedule: turnkit-schedule-${id}\n` });
    const listed = async () =>
      JSON.parse((await turnkit('--json', 'schedule', 'ls')).out) as { id: string; paused: boolean }[];
    await waitUntil(async () => (await listed()).some((row) => row.id === id && !row.paused), 15_000);

    expect(await turnkit('schedule', 'pause', id)).toMatchObject({
      code: 0,
      err: `schedule ${id}: pause done\n`,
    });
    expect(await client.getSchedule(id).describe()).toMatchObject({ paused: true, budget: { maxSpend: 2 } });
    await waitUntil(async () => (await listed()).some((row) => row.id === id && row.paused), 15_000);
    expect((await turnkit('schedule', 'unpause', id)).code).toBe(0);

    expect((await turnkit('schedule', 'trigger', id)).code).toBe(0);
    let runs = await client.getSchedule(id).runs();
    await waitUntil(async () => {
      runs = await client.getSchedule(id).runs();
      return runs.length === 1 && (await runs[0]!.status()) === 'completed';
    }, 20_000);
    const turn = await store.loadTurn(runs[0]!.turnId);
    expect(turn).toMatchObject({ agentName: 'helper', outputText: 'Durable: lasting.' });
    expect(turn.options['principal']).toEqual({ user: 'ops' });

    expect((await turnkit('schedule', 'delete', id)).code).toBe(0);
    await waitUntil(async () => !(await listed()).some((row) => row.id === id), 15_000);
  });

  it('schedule: the CLI refuses an unknown agent and a cron Temporal rejects, creating nothing', async () => {
    const id = `cli-bad-${process.pid}-${Date.now().toString(36)}`;
    const unknown = await turnkit('schedule', 'create', id, 'nobody', 'x', '--cron', '0 0 1 1 *');
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('unknown agent nobody');
    const cron = await turnkit('schedule', 'create', id, 'helper', 'x', '--cron', '0 0 32 1 *');
    expect(cron.code).toBe(1);
    expect(cron.err).toMatch(/ArgumentError: schedule .*: Temporal refuses it: .*Day/);
    const overlap = await turnkit(
      'schedule',
      'create',
      id,
      'helper',
      'x',
      '--every',
      '1h',
      '--overlap',
      'sometimes',
    );
    expect(overlap.code).toBe(2);
    await expect(client.getSchedule(id).describe()).rejects.toMatchObject({
      details: { reason: 'not_found' },
    });
  });
});
