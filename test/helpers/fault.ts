/**
 * Helpers for the fault-injection, zombie and service-restart tests: fault workers as real OS
 * processes (test/fixtures/fault-worker.ts), the shared log, and the store invariants every
 * fault case must leave behind.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { expect } from 'vitest';
import { AgentRegistry } from '../../src/agents/registry.js';
import type { TurnSettings } from '../../src/workflows/contract.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { iterationsOf, toolCallParts } from '../../src/engine/step/turn-state.js';
import type { MessageRecord, Store, ToolExecutionRecord, TurnRecord } from '../../src/store/types.js';
import { TERMINAL_TURN_STATUSES } from '../../src/store/types.js';
import { EFFECT_TOOLS, REPLAY_SAFE_TOOLS, faultFixture } from '../fixtures/fault-agents.js';
import { uniqueTaskQueue } from './temporal.js';

export interface FaultCaseSetup {
  /** The side-effect log every process of the case appends to. */
  log: string;
  /** The `gate` tool opens once this file exists. */
  gate: string;
  /** Written when the fault fires (it fires once). */
  marker: string;
  taskQueue: string;
  /** A client in the test process whose agents are the fixture's. */
  client: TurnKitClient;
}

/** The files, task queue and client of one fault case named `name`, under `dir`. */
export function faultCaseSetup(options: {
  dir: string;
  name: string;
  store: Store;
  temporal: Client;
  turnSettings?: TurnSettings;
}): FaultCaseSetup {
  const { dir, name } = options;
  const log = join(dir, `${name}.log`);
  const taskQueue = uniqueTaskQueue(`turnkit-fault-${name}`);
  const client = new TurnKitClient({
    store: options.store,
    agents: new AgentRegistry(faultFixture({ log, flavor: 'client' }).agents),
    temporal: options.temporal,
    taskQueue,
    ...(options.turnSettings ? { turnSettings: options.turnSettings } : {}),
  });
  return { log, gate: join(dir, `${name}.gate`), marker: join(dir, `${name}.fault`), taskQueue, client };
}

const faultWorkerScript = fileURLToPath(new URL('../fixtures/fault-worker.ts', import.meta.url));

export interface FaultWorker {
  child: ChildProcess;
  /** Booted (bundle built, connected); with `hold` it does not poll before `go()`. */
  ready: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  go(): void;
  output(): string;
  alive(): boolean;
  stop(): Promise<void>;
}

/**
 * Spawns test/fixtures/fault-worker.ts (node + tsx), or another worker script that prints
 * "fault-worker ready" once booted, with an IPC channel for `go()`.
 */
export function spawnFaultWorker(
  env: Record<string, string>,
  options: { hold?: boolean; script?: string } = {},
): FaultWorker {
  const child = spawn(process.execPath, ['--import', 'tsx', options.script ?? faultWorkerScript], {
    env: { ...process.env, ...env, TURNKIT_TEST_HOLD: options.hold ? '1' : '0' },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.includes('fault-worker ready')) markReady();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  child.on('error', () => undefined);
  let running = true;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      running = false;
      markReady();
      resolve({ code, signal });
    }),
  );
  return {
    child,
    ready,
    exited,
    go() {
      if (running && child.connected) child.send('go');
    },
    output: () => output,
    alive: () => running,
    async stop() {
      if (!running) return;
      // A stopped process ignores SIGTERM until continued.
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 8_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export function logLines(log: string): string[] {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
}

export async function waitUntil(
  what: string,
  predicate: () => boolean | Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `promise`, or an error carrying `details()` when it takes longer than `ms`. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, details: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no result within ${ms} ms\n${details()}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `effect:<tool>:<idempotency key>:…` lines, counted by key. */
export function effectsByKey(lines: readonly string[], tool: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of lines) {
    const match = /^effect:([^:]+):(turnkit:tool:[^:]+):/.exec(line);
    if (!match || match[1] !== tool) continue;
    counts.set(match[2]!, (counts.get(match[2]!) ?? 0) + 1);
  }
  return counts;
}

export interface TreeSnapshot {
  turns: TurnRecord[];
  messages: MessageRecord[];
  executions: ToolExecutionRecord[];
}

/**
 * The invariants of issue 5 item 5, checked on the whole tree of `rootTurnId`:
 * - every turn is terminal, unowned (claim token cleared) and has `completedAt`; a parent
 *   finished no earlier than each of its children, and every wait target is terminal;
 * - per conversation, message sequences are 1..n (nothing lost, nothing duplicated);
 * - every tool call has exactly one tool result, after it and in its conversation; no result
 *   answers an unknown call; one execution per (turn, tool call), finished, with exactly one
 *   result message;
 * - a turn's assistant messages match its reserved iterations (a completed turn: equal; an
 *   interrupted one may have one reserved step that never committed), and `model.completed`
 *   was never emitted twice for one commit;
 * - side effects (log, keyed by idempotency key): every key belongs to an execution of the
 *   tree; replay-safe tools at most once per key and exactly once when completed; other tools
 *   at most once, exactly once when completed.
 */
export async function expectInvariants(
  store: Store,
  rootTurnId: string,
  log: string,
  /** The log also holds other trees' effects (the chaos suite): those are not this tree's. */
  options: { sharedLog?: boolean } = {},
): Promise<TreeSnapshot> {
  const turns = await store.listTurns({ rootTurnId });
  expect(turns.length).toBeGreaterThan(0);
  const byId = new Map(turns.map((t) => [t.id, t]));
  for (const turn of turns) {
    expect(TERMINAL_TURN_STATUSES, `${turn.agentName} ${turn.id} is ${turn.status}`).toContain(turn.status);
    expect(turn.claimToken, `${turn.agentName} still owned`).toBeNull();
    expect(turn.completedAt, `${turn.agentName} has no completedAt`).not.toBeNull();
    if (turn.parentTurnId) {
      const parent = byId.get(turn.parentTurnId);
      expect(parent, `parent of ${turn.id} is in the tree`).toBeDefined();
      if (parent!.status === 'completed') {
        expect(Date.parse(parent!.completedAt!)).toBeGreaterThanOrEqual(Date.parse(turn.completedAt!));
      }
    }
    for (const wait of await store.listWaits({ turnId: turn.id })) {
      expect(TERMINAL_TURN_STATUSES).toContain(byId.get(wait.targetTurnId)?.status);
    }
  }

  const conversations = [...new Set(turns.map((t) => t.conversationId))];
  const messages: MessageRecord[] = [];
  for (const conversationId of conversations) {
    const list = await store.listMessages(conversationId);
    expect(
      list.map((m) => m.sequence),
      `message sequences of ${conversationId}`,
    ).toEqual(list.map((_, i) => i + 1));
    expect(new Set(list.map((m) => m.id)).size).toBe(list.length);
    messages.push(...list);

    const calls = new Map<string, MessageRecord>();
    for (const message of list) {
      if (message.kind !== 'tool_call') continue;
      for (const call of toolCallParts(message.content)) {
        expect(calls.has(call.id), `tool call ${call.id} appears twice`).toBe(false);
        calls.set(call.id, message);
      }
    }
    const results = new Map<string, number>();
    for (const message of list) {
      for (const part of message.content) {
        if (part.type !== 'tool_result') continue;
        const call = calls.get(part.tool_call_id);
        expect(call, `result for unknown call ${part.tool_call_id}`).toBeDefined();
        expect(message.sequence).toBeGreaterThan(call!.sequence);
        results.set(part.tool_call_id, (results.get(part.tool_call_id) ?? 0) + 1);
      }
    }
    for (const id of calls.keys()) expect(results.get(id), `results of tool call ${id}`).toBe(1);
  }

  const executions = await store.listToolExecutions({ turnIds: turns.map((t) => t.id) });
  const pairs = executions.map((e) => `${e.turnId}/${e.toolCallId}`);
  expect(new Set(pairs).size, 'one execution per tool call').toBe(pairs.length);
  for (const execution of executions) {
    expect(['completed', 'failed', 'interrupted', 'cancelled']).toContain(execution.status);
    const withExecution = messages.filter((m) => m.toolExecutionId === execution.id);
    expect(withExecution, `result messages of execution ${execution.id}`).toHaveLength(1);
  }

  for (const turn of turns) {
    const assistant = messages.filter((m) => m.turnId === turn.id && m.role === 'assistant').length;
    const iterations = iterationsOf(turn);
    if (turn.status === 'completed')
      expect(assistant, `assistant messages of ${turn.agentName}`).toBe(iterations);
    else {
      expect(assistant).toBeLessThanOrEqual(iterations);
      expect(assistant).toBeGreaterThanOrEqual(iterations - 1);
    }
    const events = await store.listEvents(turn.id, { limit: 10_000 });
    const completedModel = events.filter((e) => e.type === 'model.completed').length;
    expect(completedModel).toBeLessThanOrEqual(assistant);
    const toolCompleted = events.filter((e) => e.type === 'tool_call.completed').map((e) => e.payload['id']);
    expect(new Set(toolCompleted).size, 'tool_call.completed once per call').toBe(toolCompleted.length);
  }

  const lines = logLines(log);
  const keys = new Map(executions.map((e) => [`turnkit:tool:${e.id}`, e]));
  for (const tool of new Set(lines.flatMap((l) => (l.startsWith('effect:') ? [l.split(':')[1]!] : [])))) {
    for (const [key, count] of effectsByKey(lines, tool)) {
      const execution = keys.get(key);
      if (!execution && options.sharedLog) continue;
      expect(execution, `effect of ${tool} under ${key} belongs to an execution of the tree`).toBeDefined();
      expect(execution!.toolName).toBe(tool);
      expect(count, `${tool} effects under ${key}`).toBe(1);
    }
  }
  for (const execution of executions) {
    if (!EFFECT_TOOLS.includes(execution.toolName)) continue;
    const key = `turnkit:tool:${execution.id}`;
    const attempts = lines.filter((l) => l.startsWith(`attempt:${execution.toolName}:${key}:`)).length;
    // A tool that is not replay-safe is never started twice, whatever happened to its worker.
    if (!REPLAY_SAFE_TOOLS.includes(execution.toolName))
      expect(attempts, `attempts of ${execution.toolName} under ${key}`).toBeLessThanOrEqual(1);
    if (execution.status !== 'completed') continue;
    const count = effectsByKey(lines, execution.toolName).get(key) ?? 0;
    expect(count, `${execution.toolName} completed, so its effect happened exactly once`).toBe(1);
  }
  return { turns, messages, executions };
}
