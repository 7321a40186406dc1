/**
 * Fault-injection matrix (issue 5 item 5): a worker process is SIGKILLed (or SIGSTOPped) at
 * each step boundary of a turn; a replacement worker process finishes the run; after every
 * case the store invariants of test/helpers/fault.ts hold. The fault is injected by the worker
 * itself (test/fixtures/fault-agents.ts) at the boundary named by TURNKIT_FAULT_AT.
 * TURNKIT_FAULT_RUNS (default 2) repeats each case.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunHandle } from '../../src/client/run-handle.js';
import { iterationsOf, phaseOf } from '../../src/engine/step/turn-state.js';
import { openStore } from '../../src/store/index.js';
import type { Store, TurnRecord } from '../../src/store/types.js';
import type { FaultMode, FaultPoint } from '../fixtures/fault-agents.js';
import type { FaultWorker, TreeSnapshot } from '../helpers/fault.js';
import {
  effectsByKey,
  expectInvariants,
  faultCaseSetup,
  logLines,
  sleep,
  spawnFaultWorker,
  waitUntil,
  withTimeout,
} from '../helpers/fault.js';
import { requireTemporal } from '../helpers/temporal.js';
import { temporalConnections } from '../helpers/turnkit.js';

const RUNS = Math.max(1, Number(process.env['TURNKIT_FAULT_RUNS'] ?? 2));
const repeat = Array.from({ length: RUNS }, (_, i) => i + 1);

const temporalUp = await requireTemporal();

interface CaseResult {
  run: RunHandle;
  turn: TurnRecord;
  afterFault: TurnRecord;
  lines: string[];
  tree: TreeSnapshot;
}

describe.skipIf(!temporalUp)('fault injection at every step boundary (worker processes)', () => {
  let dir: string;
  let store: Store;
  const workers: FaultWorker[] = [];
  let counter = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'turnkit-fault-'));
    store = await openStore(join(dir, 'turnkit.sqlite'));
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await store?.close();
  });

  async function faultCase(options: {
    agent: string;
    faultAt: FaultPoint;
    mode?: FaultMode;
    /** Runs after the run started, before the fault is awaited (e.g. sends the cancel). */
    duringRun?: (run: RunHandle) => Promise<void>;
    /**
     * When a stopped worker gets SIGCONT: after the run finished (default), or mid-run, while
     * the replacement holds the turn in the `gate` tool (the gate opens a little later).
     */
    wake?: 'after' | 'mid-run';
    /** Runs once the replacement polls (e.g. resumes a paused turn). */
    afterFault?: (run: RunHandle) => Promise<void>;
    /**
     * Queries the turn's workflow every 50 ms from its start to its end, as the Temporal UI
     * and `temporal workflow query --type state` do (issue 26); counts the answers.
     */
    queryStorm?: { answered: number };
  }): Promise<CaseResult> {
    const mode = options.mode ?? 'kill';
    const name = `${options.faultAt}-${mode}-${++counter}`;
    const {
      log,
      marker,
      gate: gateFile,
      taskQueue,
      client,
    } = faultCaseSetup({
      dir,
      name,
      store,
      // The default settings (DEFAULT_TURN_SETTINGS): a lost attempt is retried within seconds,
      // and retries after timeouts are unbounded, so a paused worker's open polls may swallow a
      // few of them (each then times out) without failing the turn.
      temporal: (await temporalConnections()).client,
      // A workflow task a paused worker took holds the turn until this timeout. One provider
      // error, or one throw of a replay-safe tool, would end its step: a killed or paused
      // worker's attempt must not count as one (issue 20).
      turnSettings: { workflowTaskTimeout: '2 seconds', maxProviderAttempts: 1, maxToolAttempts: 1 },
    });
    const env = {
      TURNKIT_TEST_DATABASE_URL: join(dir, 'turnkit.sqlite'),
      TURNKIT_TEST_LOG: log,
      TURNKIT_TEST_TASK_QUEUE: taskQueue,
      TURNKIT_TEST_GATE: gateFile,
    };
    const first = spawnFaultWorker({
      ...env,
      TURNKIT_TEST_FLAVOR: 'first',
      TURNKIT_FAULT_AT: options.faultAt,
      TURNKIT_FAULT_MODE: mode,
      TURNKIT_FAULT_MARKER: marker,
    });
    // Boots while the first one works; it polls only after go().
    const replacement = spawnFaultWorker({ ...env, TURNKIT_TEST_FLAVOR: 'replacement' }, { hold: true });
    workers.push(first, replacement);
    await first.ready;
    expect(first.alive(), first.output()).toBe(true);
    const run = await client.run(options.agent, `Fault case ${name}`);
    const storm =
      options.queryStorm &&
      queryStorm(client.temporal.workflow.getHandle(run.workflowId), options.queryStorm);
    await options.duringRun?.(run);
    await waitUntil(`the ${options.faultAt} fault`, () => existsSync(marker) || !first.alive());
    expect(existsSync(marker), first.output()).toBe(true);
    if (mode === 'kill') {
      const exit = await first.exited;
      expect(exit.signal, first.output()).toBe('SIGKILL');
    } else {
      await sleep(200);
      expect(first.alive(), 'a stopped worker is still a process').toBe(true);
    }
    const afterFault = await run.turn();
    await replacement.ready;
    replacement.go();
    await options.afterFault?.(run);
    const resumed = () => logLines(log).some((l) => l.startsWith(`resumed:${options.faultAt}:first`));
    if (options.wake === 'mid-run') {
      // The paused worker's open polls swallow a few retry attempts first (each must time out).
      await waitUntil(
        'the replacement to hold the gate',
        () => logLines(log).some((l) => l.startsWith('attempt:gate:') && l.endsWith(':replacement')),
        150_000,
      );
      first.child.kill('SIGCONT');
      await waitUntil('the zombie to resume', resumed);
      await sleep(2_000);
    }
    writeFileSync(gateFile, 'open');
    const turn = await withTimeout(run.result(), 90_000, () =>
      [
        `log:\n${logLines(log).join('\n')}`,
        `first:\n${first.output()}`,
        `replacement:\n${replacement.output()}`,
      ].join('\n'),
    );
    if (storm) clearInterval(storm);
    if (mode === 'stop' && options.wake !== 'mid-run') {
      // The zombie wakes up with its attempt still in hand; whatever it tries must not land.
      first.child.kill('SIGCONT');
      await waitUntil('the zombie to resume', resumed);
      await sleep(2_000);
    }
    await Promise.all([first.stop(), replacement.stop()]);
    const lines = logLines(log);
    if (turn.status === 'failed')
      console.error(`${name} failed: ${JSON.stringify(turn.error)}\n${lines.join('\n')}`);
    const tree = await expectInvariants(store, run.rootTurnId, log);
    return { run, turn, afterFault, lines, tree };
  }

  const count = (lines: string[], prefix: string) => lines.filter((l) => l.startsWith(prefix)).length;

  /** A query every 50 ms (at most four in flight: a killed worker's queries wait for the next). */
  function queryStorm(handle: WorkflowHandle, tally: { answered: number }) {
    let inFlight = 0;
    return setInterval(() => {
      if (inFlight >= 4) return;
      inFlight += 1;
      const type = tally.answered % 2 === 0 ? 'state' : '__temporal_workflow_metadata';
      handle
        .query(type)
        .then(
          () => (tally.answered += 1),
          () => undefined,
        )
        .finally(() => (inFlight -= 1));
    }, 50);
  }

  const cancelWhileHolding = async (run: RunHandle) => {
    await waitUntil('the hold tool to run', async () =>
      (await run.toolExecutions()).some((e) => e.toolName === 'hold' && e.status === 'running'),
    );
    await run.cancel();
  };

  describe.each(repeat)('run %i', () => {
    it('FI before-model-call: the reserved iteration is reused and the request re-sent; every effect once', async () => {
      const { turn, afterFault, lines, tree } = await faultCase({
        agent: 'ledger',
        faultAt: 'before-model-call',
      });
      expect(afterFault.status).toBe('running');
      expect(phaseOf(afterFault)).toBe('model');
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('replacement done');
      expect(count(lines, 'model:ledger:first')).toBe(1);
      expect(count(lines, 'model:ledger:replacement')).toBe(2);
      // Temporal retried the same step: no second reservation for the lost call.
      expect(iterationsOf(turn)).toBe(2);
      expect(tree.executions.map((e) => [e.toolName, e.status])).toEqual([
        ['charge', 'completed'],
        ['upsert', 'completed'],
      ]);
    }, 120_000);

    it('FI after-model-commit BG-05 DB-08: the stored response is reused; the replacement makes only the final call', async () => {
      const { turn, afterFault, lines, tree } = await faultCase({
        agent: 'ledger',
        faultAt: 'after-model-commit',
      });
      expect(afterFault.status).toBe('running');
      expect(phaseOf(afterFault)).toBe('tools');
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('replacement done');
      expect(count(lines, 'model:ledger:first')).toBe(1);
      expect(count(lines, 'model:ledger:replacement')).toBe(1);
      expect(count(lines, 'attempt:charge:')).toBe(1);
      expect(tree.executions.map((e) => e.status)).toEqual(['completed', 'completed']);
      expect(tree.messages.filter((m) => m.kind === 'tool_call')).toHaveLength(1);
    }, 120_000);

    it('FI before-tool-commit BG-16: the unsafe tool is interrupted, never re-run, and its result says the outcome is unknown', async () => {
      const { turn, lines, tree } = await faultCase({ agent: 'ledger', faultAt: 'before-tool-commit' });
      expect(turn.status).toBe('completed');
      const [charge, upsert] = tree.executions;
      expect(charge!.status).toBe('interrupted');
      expect(count(lines, 'attempt:charge:')).toBe(1);
      expect(count(lines, 'effect:charge:')).toBe(1);
      expect(upsert!.status).toBe('completed');
      const result = tree.messages.find((m) => m.toolExecutionId === charge!.id)!;
      expect(JSON.stringify(result.content)).toContain('unknown');
      expect(count(lines, 'model:ledger:')).toBe(2);
    }, 120_000);

    it('FI before-replay-safe-commit BG-35: the replay-safe tool is retried under the same key; its effect happened once', async () => {
      const { turn, lines, tree } = await faultCase({
        agent: 'ledger',
        faultAt: 'before-replay-safe-commit',
      });
      expect(turn.status).toBe('completed');
      const [charge, upsert] = tree.executions;
      expect(charge!.status).toBe('completed');
      expect(upsert!.status).toBe('completed');
      const key = `turnkit:tool:${upsert!.id}`;
      expect(lines.filter((l) => l.startsWith('attempt:upsert:'))).toEqual([
        `attempt:upsert:${key}:first`,
        `attempt:upsert:${key}:replacement`,
      ]);
      expect(effectsByKey(lines, 'upsert')).toEqual(new Map([[key, 1]]));
      expect(count(lines, 'attempt:charge:')).toBe(1);
    }, 120_000);

    it('FI after-tool-commit BG-15: the committed result is kept; the tool is not re-run; one result per call', async () => {
      const { turn, lines, tree } = await faultCase({ agent: 'ledger', faultAt: 'after-tool-commit' });
      expect(turn.status).toBe('completed');
      expect(tree.executions.map((e) => e.status)).toEqual(['completed', 'completed']);
      expect(count(lines, 'attempt:charge:')).toBe(1);
      expect(count(lines, 'attempt:upsert:')).toBe(1);
      expect(count(lines, 'model:ledger:')).toBe(2);
      expect(tree.messages.filter((m) => m.kind === 'tool_result')).toHaveLength(2);
    }, 120_000);

    it('long-lived: FI after-tool-commit under a query storm (a query every 50 ms throughout): the replacement replays the history the queries were answered in; no workflow task fails', async () => {
      const storm = { answered: 0 };
      const { run, turn, lines, tree } = await faultCase({
        agent: 'ledger',
        faultAt: 'after-tool-commit',
        queryStorm: storm,
      });
      expect(turn.status).toBe('completed');
      expect(tree.executions.map((e) => e.status)).toEqual(['completed', 'completed']);
      expect(count(lines, 'attempt:charge:')).toBe(1);
      expect(storm.answered).toBeGreaterThan(10);
      const { client: temporal } = await temporalConnections();
      const history = (await temporal.workflow.getHandle(run.workflowId).fetchHistory()).events ?? [];
      const failed = history.filter((e) => e.workflowTaskFailedEventAttributes);
      expect(failed.map((e) => e.workflowTaskFailedEventAttributes?.failure?.message)).toEqual([]);
    }, 120_000);

    it('FI fan-out BG-11 BG-12: killed while the children run, the group finishes with exactly two children and the parent completes after them', async () => {
      const { turn, lines, tree } = await faultCase({ agent: 'fanout', faultAt: 'fan-out' });
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('joined');
      const children = tree.turns.filter((t) => t.parentTurnId === turn.id);
      expect(children.map((c) => c.agentName).sort()).toEqual(['child_a', 'child_b']);
      expect(children.map((c) => c.status)).toEqual(['completed', 'completed']);
      expect(tree.turns).toHaveLength(3);
      expect(count(lines, 'model:fanout:')).toBe(2);
      const upserts = tree.executions.filter((e) => e.toolName === 'upsert');
      expect(upserts.map((e) => e.status)).toEqual(['completed', 'completed']);
      const results = tree.messages.filter((m) => m.turnId === turn.id && m.kind === 'tool_result');
      expect(results.map((m) => m.metadata['tool_name'])).toEqual(['child_a', 'child_b']);
    }, 120_000);

    it('FI during-cancel BG-42: killed between the cancel signal and the cancelled status, the replacement cancels; the held tool is interrupted with one result', async () => {
      const { turn, afterFault, tree } = await faultCase({
        agent: 'holder',
        faultAt: 'during-cancel',
        duringRun: cancelWhileHolding,
      });
      expect(afterFault.status).toBe('running');
      expect(turn.status).toBe('cancelled');
      expect(turn.outputText).toBeNull();
      expect(turn.error).toEqual({ class: 'TurnKit::Cancelled', message: 'cancelled by application' });
      expect(tree.executions.map((e) => e.status)).toEqual(['interrupted']);
    }, 120_000);

    it('FI after-cancel-commit: killed right after the cancelled status committed, the turn stays cancelled and nothing is appended later', async () => {
      const { turn, afterFault, tree } = await faultCase({
        agent: 'holder',
        faultAt: 'after-cancel-commit',
        duringRun: cancelWhileHolding,
      });
      expect(afterFault.status).toBe('cancelled');
      expect(turn.status).toBe('cancelled');
      expect(tree.executions.map((e) => e.status)).toEqual(['interrupted']);
      expect(tree.messages.filter((m) => m.kind === 'tool_result')).toHaveLength(1);
    }, 120_000);
  });

  describe('a person in the loop (issue 21)', () => {
    const awaitingApproval = async (run: RunHandle) => {
      await waitUntil('the call to await approval', async () => (await run.pendingApprovals()).length === 1);
      return (await run.pendingApprovals())[0]!.toolCallId;
    };
    const wireRanOnce = (lines: string[], tree: TreeSnapshot) => {
      expect(tree.executions.map((e) => [e.toolName, e.status])).toEqual([['wire', 'completed']]);
      expect(count(lines, 'attempt:wire:')).toBe(1);
      expect(count(lines, 'effect:wire:')).toBe(1);
    };

    it('FI after-approval: killed between the approval and its tool run, the approval holds and the tool runs once', async () => {
      let approval: Promise<unknown> = Promise.resolve();
      const { turn, lines, tree } = await faultCase({
        agent: 'approving',
        faultAt: 'after-approval',
        duringRun: async (run) => {
          const id = await awaitingApproval(run);
          // Answered once the replacement has taken the Update over.
          approval = run.approve(id, { principal: 'ops' }).catch((error: unknown) => error);
        },
      });
      expect(turn.status).toBe('completed');
      wireRanOnce(lines, tree);
      expect(await approval).toMatchObject({ decision: 'approved' });
    }, 120_000);

    it('FI after-steer: killed between the steering and the next model call, the person’s message is written once and the held call is superseded', async () => {
      let steer: Promise<unknown> = Promise.resolve();
      const { turn, tree, lines } = await faultCase({
        agent: 'approving',
        faultAt: 'after-steer',
        duringRun: async (run) => {
          await awaitingApproval(run);
          // Its answer rides on the workflow task the kill cuts short: the replacement gives it.
          steer = run.steer('Do not wire anything.', { principal: 'ops' });
        },
      });
      expect(await steer).toMatchObject({ pendingSteers: 1 });
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('replacement done: 2 user messages');
      expect(tree.messages.filter((m) => m.metadata['steer_id'])).toHaveLength(1);
      expect(tree.executions.map((e) => [e.toolName, e.status])).toEqual([['wire', 'cancelled']]);
      expect(count(lines, 'attempt:wire:')).toBe(0);
    }, 120_000);

    it('FI during-pause: killed while the turn is paused, it stays paused on the replacement; resumed, the approved tool runs once', async () => {
      let approval: Promise<unknown> = Promise.resolve();
      const { turn, afterFault, lines, tree } = await faultCase({
        agent: 'approving',
        faultAt: 'during-pause',
        duringRun: async (run) => {
          const id = await awaitingApproval(run);
          await run.pause({ principal: 'ops' });
          approval = run.approve(id, { principal: 'ops' });
        },
        afterFault: async (run) => {
          await approval;
          expect(await run.status()).toBe('paused');
          // Sent while the replacement takes over the lost workflow task: the client retries it.
          await run.resume({ principal: 'ops' });
        },
      });
      expect(afterFault.status).toBe('paused');
      expect(turn.status).toBe('completed');
      wireRanOnce(lines, tree);
    }, 120_000);
  });

  describe('SIGSTOP instead of SIGKILL (the paused worker wakes up after the replacement finished)', () => {
    it('FI after-model-commit SIGSTOP BG-17: the zombie cannot add a second response or re-run a tool', async () => {
      const { turn, lines, tree } = await faultCase({
        agent: 'ledger',
        faultAt: 'after-model-commit',
        mode: 'stop',
      });
      expect(turn.status).toBe('completed');
      expect(count(lines, 'resumed:after-model-commit:first')).toBe(1);
      expect(tree.messages.filter((m) => m.role === 'assistant')).toHaveLength(2);
      expect(count(lines, 'attempt:charge:')).toBe(1);
    }, 120_000);

    it('FI before-tool-commit SIGSTOP BG-16 DB-05: the zombie tool returns after the turn completed; its result is refused (LostClaim)', async () => {
      const { turn, lines, tree } = await faultCase({
        agent: 'ledger',
        faultAt: 'before-tool-commit',
        mode: 'stop',
      });
      expect(turn.status).toBe('completed');
      expect(count(lines, 'returned:charge:')).toBe(1);
      expect(lines).toContain('activity:toolCall:1:first:error:LostClaim');
      expect(tree.executions[0]!.status).toBe('interrupted');
      expect(count(lines, 'effect:charge:')).toBe(1);
    }, 120_000);

    it('FI model-in-flight SIGSTOP BG-17: the zombie’s late model response, after the turn completed, writes nothing (LostClaim)', async () => {
      const { turn, lines, tree } = await faultCase({
        agent: 'zmodel',
        faultAt: 'model-in-flight',
        mode: 'stop',
      });
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('replacement done');
      expect(count(lines, 'answered:zmodel:first')).toBe(1);
      // The turn's first model call is its claim step on 0.6 runs (decision 82).
      expect(lines).toContain('activity:claimStep:1:first:error:LostClaim');
      expect(tree.messages.filter((m) => m.role === 'assistant')).toHaveLength(2);
      expect(iterationsOf(turn)).toBe(2);
    }, 120_000);

    it('FI before-tool-commit SIGSTOP, woken after the turn completed: the late result of an unsafe tool is refused (LostClaim)', async () => {
      const { turn, lines, tree } = await faultCase({
        agent: 'late',
        faultAt: 'before-tool-commit',
        mode: 'stop',
      });
      expect(turn.status).toBe('completed');
      expect(lines).toContain('activity:toolCall:1:first:error:LostClaim');
      expect(tree.executions.map((e) => [e.toolName, e.status])).toEqual([['charge', 'interrupted']]);
      expect(count(lines, 'effect:charge:')).toBe(1);
    }, 120_000);
  });

  describe('SIGSTOP, woken mid-run (the replacement is still working: same run, same claim token)', () => {
    it('FI model-in-flight SIGSTOP mid-run: the replacement stored the response of the same step; the zombie’s copy is not stored again', async () => {
      const { turn, lines, tree } = await faultCase({
        agent: 'zmodel',
        faultAt: 'model-in-flight',
        mode: 'stop',
        wake: 'mid-run',
      });
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('replacement done');
      expect(count(lines, 'answered:zmodel:first')).toBe(1);
      // The step key kept the zombie's response out: one tool-call response, one answer.
      expect(tree.messages.filter((m) => m.role === 'assistant')).toHaveLength(2);
      expect(tree.executions.map((e) => [e.toolName, e.status])).toEqual([['gate', 'completed']]);
      expect(iterationsOf(turn)).toBe(2);
    }, 240_000);

    it('FI before-tool-commit SIGSTOP mid-run BG-16: the unsafe tool was interrupted; its late result does not replace the outcome-unknown one', async () => {
      const { turn, lines, tree } = await faultCase({
        agent: 'ztool',
        faultAt: 'before-tool-commit',
        mode: 'stop',
        wake: 'mid-run',
      });
      expect(turn.status).toBe('completed');
      expect(count(lines, 'returned:charge:')).toBe(1);
      expect(count(lines, 'effect:charge:')).toBe(1);
      const [charge, gateRow] = tree.executions;
      expect([charge!.status, gateRow!.status]).toEqual(['interrupted', 'completed']);
      const result = tree.messages.find((m) => m.toolExecutionId === charge!.id)!;
      expect(JSON.stringify(result.content)).toContain('unknown');
      expect(JSON.stringify(result.content)).not.toContain('charged');
    }, 240_000);

    it('FI before-replay-safe-commit SIGSTOP mid-run BG-35: the replacement re-ran the tool under the same key; the zombie’s return changes nothing', async () => {
      const { turn, lines, tree } = await faultCase({
        agent: 'zupsert',
        faultAt: 'before-replay-safe-commit',
        mode: 'stop',
        wake: 'mid-run',
      });
      expect(turn.status).toBe('completed');
      const [upsert] = tree.executions;
      expect(upsert!.status).toBe('completed');
      const key = `turnkit:tool:${upsert!.id}`;
      expect(lines.filter((l) => l.startsWith('attempt:upsert:'))).toEqual([
        `attempt:upsert:${key}:first`,
        `attempt:upsert:${key}:replacement`,
      ]);
      expect(count(lines, 'returned:upsert:')).toBe(2);
      expect(effectsByKey(lines, 'upsert')).toEqual(new Map([[key, 1]]));
    }, 240_000);
  });

  describe('SIGSTOP during the cancel', () => {
    it('FI during-cancel SIGSTOP: the zombie that was authorizing the cancel wakes after the replacement cancelled; nothing changes', async () => {
      const { turn, tree } = await faultCase({
        agent: 'holder',
        faultAt: 'during-cancel',
        mode: 'stop',
        duringRun: cancelWhileHolding,
      });
      expect(turn.status).toBe('cancelled');
      expect(tree.executions.map((e) => e.status)).toEqual(['interrupted']);
    }, 120_000);
  });
});
