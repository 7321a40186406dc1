import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { phaseOf } from '../../src/engine/step/turn-state.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { crashFixture } from '../fixtures/crash-agents.js';
import { temporalConnections } from '../helpers/turnkit.js';
import type { WorkerProcess } from '../helpers/worker-process.js';
import { spawnWorker } from '../helpers/worker-process.js';
import type { RunHandle } from '../../src/client/run-handle.js';
import type { RunStreamPart } from '../../src/client/run-stream.js';

async function collect(run: RunHandle): Promise<RunStreamPart[]> {
  const parts: RunStreamPart[] = [];
  for await (const part of run.stream()) parts.push(part);
  return parts;
}

// Short heartbeat timeouts so a killed worker's activity is retried elsewhere within seconds.
const turnSettings = {
  model: { heartbeatTimeout: '3 seconds' },
  tool: { heartbeatTimeout: '3 seconds' },
};

describe('recovery from a SIGKILLed worker process', () => {
  let dir: string;
  let store: Store;
  let client: TurnKitClient;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'turnkit-crash-'));
    store = await openStore(join(dir, 'turnkit.sqlite'));
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await store?.close();
  });

  async function scenario(name: string, crashOn: string) {
    const log = join(dir, `${name}.log`);
    const marker = join(dir, `${name}.crashed`);
    const taskQueue = `turnkit-crash-${name}-${Date.now()}`;
    const { temporal } = { temporal: (await temporalConnections()).client };
    client = new TurnKitClient({
      store,
      agents: new AgentRegistry(crashFixture(log, 'client').agents),
      temporal,
      taskQueue,
      turnSettings,
    });
    const env = {
      TURNKIT_DATABASE_URL: join(dir, 'turnkit.sqlite'),
      TURNKIT_TEST_LOG: log,
      TURNKIT_TEST_TASK_QUEUE: taskQueue,
    };
    const first = spawnWorker({ ...env, TURNKIT_TEST_CRASH_ON: crashOn, TURNKIT_TEST_CRASH_MARKER: marker });
    workers.push(first);
    await first.ready;
    const run = await client.run('reporter', 'Write and save the report');
    const exit = await first.exited;
    expect(exit.signal, first.output()).toBe('SIGKILL');
    expect(existsSync(marker)).toBe(true);
    const afterCrash = await run.turn();
    const second = spawnWorker({ ...env, TURNKIT_TEST_FLAVOR: 'replacement' });
    workers.push(second);
    const turn = await run.result();
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    return { run, turn, afterCrash, lines };
  }

  it('BG-05 DB-08 killed right after model.completed: the stored response is reused, the tool runs once, the replacement model is called once', async () => {
    const { run, turn, afterCrash, lines } = await scenario('model', 'model.completed');
    expect(afterCrash.status).toBe('running');
    expect(phaseOf(afterCrash)).toBe('tools');
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toMatch(/^replacement done/);
    expect(lines.filter((l) => l.startsWith('model:reporter:first'))).toHaveLength(1);
    expect(lines.filter((l) => l.startsWith('model:reporter:replacement'))).toHaveLength(1);
    expect(lines.filter((l) => l.startsWith('effect:save_report'))).toHaveLength(1);
    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual(['completed']);
    const toolMessages = (await run.transcript()).filter((m) => m.kind === 'tool_result');
    expect(toolMessages).toHaveLength(1);
  }, 120_000);

  it('BG-15 killed right after tool_call.completed: resume does not rerun the tool, makes one more model call and keeps one tool result', async () => {
    const { run, turn, lines } = await scenario('tool', 'tool_call.completed');
    expect(turn.status).toBe('completed');
    expect(lines.filter((l) => l.startsWith('model:'))).toHaveLength(2);
    expect(lines.filter((l) => l.startsWith('effect:save_report'))).toHaveLength(1);
    const toolMessages = (await run.transcript()).filter((m) => m.kind === 'tool_result');
    expect(toolMessages).toHaveLength(1);
    expect((await run.toolExecutions()).map((e) => e.status)).toEqual(['completed']);
  }, 120_000);

  /** Keeps one worker alive (replacing each one that dies) until the run finishes. */
  async function untilDone(name: string, agent: string, crashInTool: number) {
    const log = join(dir, `${name}.log`);
    const taskQueue = `turnkit-crash-${name}-${Date.now()}`;
    client = new TurnKitClient({
      store,
      agents: new AgentRegistry(crashFixture(log, 'client').agents),
      temporal: (await temporalConnections()).client,
      taskQueue,
      turnSettings,
    });
    const env = {
      TURNKIT_DATABASE_URL: join(dir, 'turnkit.sqlite'),
      TURNKIT_TEST_LOG: log,
      TURNKIT_TEST_TASK_QUEUE: taskQueue,
      TURNKIT_TEST_CRASH_IN_TOOL: String(crashInTool),
    };
    const run = await client.run(agent, 'Do the thing');
    let kills = 0;
    let done = false;
    const finished = run.result().finally(() => (done = true));
    while (!done) {
      const worker = spawnWorker(env);
      workers.push(worker);
      const exit = await Promise.race([worker.exited, finished.then(() => null)]);
      if (exit?.signal === 'SIGKILL') kills += 1;
    }
    const turn = await finished;
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    return { run, turn, kills, lines };
  }

  it('BG-16 E2E-04 a tool that crashes its worker mid-effect is interrupted, never re-run, and its result says the outcome is unknown', async () => {
    const { run, turn, kills, lines } = await untilDone('midtool', 'reporter', 1);
    expect(kills, lines.join('\n')).toBe(1);
    expect(turn.status).toBe('completed');
    expect(lines.filter((l) => l.startsWith('effect:save_report'))).toHaveLength(1);
    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual(['interrupted']);
    const results = (await run.transcript()).filter((m) => m.kind === 'tool_result');
    expect(results).toHaveLength(1);
    expect(JSON.stringify(results[0]!.content)).toContain('unknown');
    expect(turn.outputText).toContain('unknown');
  }, 180_000);

  it('BG-35 a replay-safe tool crashing twice after its effect is retried under one idempotency key: 3 attempts, 1 effect, 1 execution', async () => {
    const { run, turn, kills, lines } = await untilDone('replay', 'replayer', 2);
    expect(kills).toBe(2);
    expect(turn.status).toBe('completed');
    const attempts = lines.filter((l) => l.startsWith('attempt:upsert_record'));
    expect(attempts).toHaveLength(3);
    expect(new Set(attempts).size).toBe(1);
    expect(lines.filter((l) => l.startsWith('effect:upsert_record'))).toHaveLength(1);
    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual(['completed']);
    expect(attempts[0]).toContain(`turnkit:tool:${executions[0]!.id}`);
  }, 180_000);

  it('audit: #19 a replay-safe AI SDK tool crashing after its effect is re-run with the same idempotencyKey in its execute options: 2 attempts, 1 effect', async () => {
    const { run, turn, kills, lines } = await untilDone('sdk-replay', 'sdk_replayer', 1);
    expect(kills).toBe(1);
    expect(turn.status).toBe('completed');
    const attempts = lines.filter((l) => l.startsWith('attempt:sdk_upsert'));
    expect(attempts).toHaveLength(2);
    expect(new Set(attempts).size).toBe(1);
    expect(lines.filter((l) => l.startsWith('effect:sdk_upsert'))).toHaveLength(1);
    const executions = await run.toolExecutions();
    expect(executions.map((e) => e.status)).toEqual(['completed']);
    expect(attempts[0]).toBe(`attempt:sdk_upsert:turnkit:tool:${executions[0]!.id}`);
  }, 180_000);

  it("stream: a worker SIGKILLed mid-stream: the replacement streams the answer again after step.restarted, and the dead attempt's text is never glued to it", async () => {
    const log = join(dir, 'stream.log');
    const taskQueue = `turnkit-crash-stream-${Date.now()}`;
    const streamClient = new TurnKitClient({
      store,
      agents: new AgentRegistry(crashFixture(log, 'client').agents),
      temporal: (await temporalConnections()).client,
      taskQueue,
      turnSettings,
    });
    const env = {
      TURNKIT_DATABASE_URL: join(dir, 'turnkit.sqlite'),
      TURNKIT_TEST_LOG: log,
      TURNKIT_TEST_TASK_QUEUE: taskQueue,
    };
    const first = spawnWorker(env);
    workers.push(first);
    await first.ready;
    const run = await streamClient.run('streamer', 'Answer slowly');
    const parts: RunStreamPart[] = [];
    for await (const part of run.stream()) {
      parts.push(part);
      if (part.type === 'text.delta' && first.child.exitCode === null && first.child.signalCode === null) {
        // The first worker has streamed part of its answer: it dies, another takes over.
        first.child.kill('SIGKILL');
        await first.exited;
        workers.push(spawnWorker({ ...env, TURNKIT_TEST_FLAVOR: 'replacement' }));
      }
    }
    const turn = await run.turn();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('The replacement worker answers this in full.');
    const types = parts.map((part) => part.type);
    expect(types.indexOf('text.delta')).toBeLessThan(types.indexOf('step.restarted'));
    const deltas = (list: RunStreamPart[]) =>
      list.flatMap((part) => (part.type === 'text.delta' ? [part.text] : [])).join('');
    // After the restart, only the replacement's answer; a reader that comes later never sees the dead attempt's text.
    expect(deltas(parts.slice(types.indexOf('step.restarted')))).toBe(turn.outputText);
    expect(deltas(parts.slice(0, types.indexOf('step.restarted')))).toMatch(/^The first/);
    expect(deltas(await collect(run))).toBe(turn.outputText);
  });
});
