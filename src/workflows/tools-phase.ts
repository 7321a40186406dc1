/**
 * The tools phase of a turn workflow (spec §4.1): one activity per call, sub-agents and
 * launched agents as child workflows, and the waits that hold no worker.
 */
import { condition, upsertSearchAttributes } from '@temporalio/workflow';
import { TURNKIT_STATUS } from './contract.js';
import type { ChildTurn } from './child-turns.js';
import { joinSubAgents, launchChild, startSubAgents } from './child-turns.js';
import { PATCH_COORDINATION, releasedPatch } from './patches.js';
import { pauseAtBoundary, steerAtBoundary } from './control-boundaries.js';
import type { TurnRun } from './turn-run.js';
import { awaitNudge, continueDue, finishRequest, nudgeMark, runStoreStep, settingsOf } from './turn-run.js';
import type { ToolCallDigest, TurnDigest } from '../contract/digests.js';

/** Waits, without holding a worker, until every `wait_for` target of the turn is finished. */
async function awaitWaitTargets(run: TurnRun): Promise<void> {
  for (
    let seen = nudgeMark(run);
    !(await runStoreStep(() => run.activities.store.waitsReady({ turnId: run.turnId }))).ready;
    seen = nudgeMark(run)
  )
    await awaitNudge(run, null, seen);
}

/**
 * Waits, holding no worker, until one of these calls is decided (each is decided on its own:
 * the next pass runs or rejects it) or steering arrives.
 */
async function awaitDecision(run: TurnRun, awaiting: string[]): Promise<void> {
  const controls = run.controls!;
  await condition(() => awaiting.some((id) => controls.decisions.has(id)) || controls.steers.length > 0);
}

/** What one pass over the calls left open: sub-agents and joins to wait on, lanes to wake. */
interface DispatchPass {
  terminalToolCallId: string | null;
  subAgents: ChildTurn[];
  joining: boolean;
  lanes: Set<string>;
  /** Calls awaiting a person's decision (later ordinary calls ran, their results deferred). */
  awaiting: string[];
  /** Steering arrived: the pass stopped at a boundary, the calls not started are superseded. */
  steered: boolean;
  /** The closing call closed the tools phase in its activity: where the turn is now. */
  closed: TurnDigest | null;
}

/** A sub-agent group or a `wait_for` join of this pass is still open. */
const childrenOpen = (pass: DispatchPass) => pass.subAgents.length > 0 || pass.joining;

/**
 * May this call go now? An ordinary call never jumps ahead of an unresolved group or
 * `wait_for`; a call awaiting approval holds back a terminal tool, a sub-agent or a
 * coordination tool (later ordinary calls run).
 */
function mayGo(pass: DispatchPass, call: ToolCallDigest): boolean {
  if (childrenOpen(pass) && call.kind !== 'subAgent') return false;
  return !(pass.awaiting.length > 0 && (call.terminal || call.kind !== 'ordinary'));
}

/**
 * Dispatches the calls in order until one must be waited on. A contiguous group of sub-agent
 * calls fans out; an ordinary call never jumps ahead of an unresolved group or `wait_for`; a
 * completed terminal tool stops everything after it. A call awaiting approval holds back only
 * what must follow it: later ordinary calls run (their results deferred, so results stay in
 * call order), while a terminal tool, a sub-agent or a coordination tool waits for the decision.
 * Before each call is a control boundary (pause, steering) while no child or join is open.
 */
async function dispatchCalls(run: TurnRun, digest: TurnDigest): Promise<DispatchPass> {
  const pass: DispatchPass = {
    terminalToolCallId: null,
    subAgents: [],
    joining: false,
    lanes: new Set(),
    awaiting: [],
    steered: false,
    closed: null,
  };
  const controls = run.controls;
  const lastCall = digest.toolCalls[digest.toolCalls.length - 1];
  for (const call of digest.toolCalls) {
    if (!mayGo(pass, call)) break;
    const deferResult = childrenOpen(pass) || pass.awaiting.length > 0;
    if (controls && !childrenOpen(pass)) {
      if (controls.steers.length > 0) {
        pass.steered = true;
        break;
      }
      if (controls.pauseRequested) await pauseAtBoundary(run);
    }
    run.console.toolStarted(call.name);
    const decision = controls?.decisions.get(call.id);
    // Nothing of the pass left for this workflow to do: the call may close the phase itself.
    const close = run.features.closeInToolCall && !deferResult && pass.lanes.size === 0;
    const outcome = await run.activities.tool.toolCall.executeWithOptions({ summary: `tool ${call.name}` }, [
      {
        turnId: run.turnId,
        claimToken: run.claimToken,
        toolCallId: call.id,
        deferResult,
        maxAttempts: run.activities.toolMaxAttempts,
        ...(controls ? { approvals: true } : {}),
        ...(decision ? { approval: decision } : {}),
        ...(close ? { close: { last: call === lastCall }, ...finishRequest(run) } : {}),
      },
    ]);
    run.console.toolFinished(call.name, outcome.status);
    if (outcome.awaitingApproval && controls) {
      controls.noteAwaiting(call.id, outcome.approvalTimeoutMs);
      pass.awaiting.push(call.id);
      continue;
    }
    controls?.noteSettled(call.id);
    if (outcome.launched && releasedPatch(run.features, PATCH_COORDINATION))
      await launchChild(run, outcome.launched);
    for (const lane of outcome.wakeLanes ?? []) pass.lanes.add(lane);
    if (outcome.waiting && outcome.childTurnId) {
      pass.subAgents.push({
        turnId: outcome.childTurnId,
        agent: call.name,
        conversationId: outcome.childConversationId ?? '',
      });
    } else if (outcome.waiting && outcome.waitTargets) {
      pass.joining = true;
    } else if (outcome.terminal) {
      pass.terminalToolCallId = call.id;
      pass.closed = outcome.closed ?? null;
      break;
    } else if (outcome.closed) {
      pass.closed = outcome.closed;
    }
  }
  return pass;
}

/**
 * Waits for `waits`, or until the run should continue as new (true): the turn is suspended,
 * so the next run takes it over and dispatches the calls again (the finished ones return
 * their results, the awaited ones await again, a started child is followed).
 */
async function continueOrWait(
  run: TurnRun,
  waits: Promise<unknown>,
  starting: Promise<unknown> | null,
): Promise<boolean> {
  let settled: { error: unknown } | null = null;
  let started = !starting;
  waits.then(
    () => (settled = { error: null }),
    (error: unknown) => (settled = { error }),
  );
  starting?.then(
    () => (started = true),
    () => undefined,
  );
  await condition(() => settled !== null || (started && continueDue(run)));
  if (!settled) return true;
  const { error } = settled as { error: unknown };
  if (error) throw error;
  return false;
}

/**
 * The tools phase: dispatch, and while a group or a join is open, suspend the turn (no
 * worker held), wait, resume and dispatch again, which appends results in call order. Null:
 * the run stopped while suspended, to continue as new.
 */
export async function runToolsPhase(run: TurnRun, digest: TurnDigest): Promise<TurnDigest | null> {
  const { store } = run.activities;
  if (run.controls) run.controls.phaseCalls = new Set(digest.toolCalls.map((call) => call.id));
  for (;;) {
    const pass = await dispatchCalls(run, digest);
    if (pass.lanes.size > 0 && releasedPatch(run.features, PATCH_COORDINATION)) {
      await store.wakeLanes({ conversationIds: [...pass.lanes], ...settingsOf(run) });
    }
    if (pass.steered) return (await steerAtBoundary(run))!;
    if (pass.closed) return pass.closed;
    if (pass.subAgents.length === 0 && !pass.joining && pass.awaiting.length === 0)
      return runStoreStep(() =>
        store.finishTools.executeWithOptions({ summary: 'close tools phase' }, [
          { ...run.owner(), terminalToolCallId: pass.terminalToolCallId },
        ]),
      );
    await runStoreStep(() => store.suspendTurn(run.owner()));
    // Children, joins and approvals are waited for: the root timer bounds the wait.
    run.deadline.arm();
    upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'waiting' }]);
    const waitingOn = pass.subAgents.map((child) => child.agent);
    run.console.update({
      status: 'waiting',
      lastStep:
        waitingOn.length > 0
          ? `waiting for sub-agents ${waitingOn.join(', ')}`
          : pass.joining
            ? 'waiting for wait_for targets'
            : `waiting for approval of ${pass.awaiting.join(', ')}`,
    });
    // The children start, the join and the decisions are awaited together, as recorded.
    const starting = pass.subAgents.length > 0 ? startSubAgents(run, pass.subAgents) : null;
    const waits = Promise.all([
      starting ? (async () => joinSubAgents(await starting))() : undefined,
      pass.joining ? awaitWaitTargets(run) : undefined,
      pass.awaiting.length > 0 ? awaitDecision(run, pass.awaiting) : undefined,
    ]);
    // Suspended, children started: a safe point to continue as new while the children run and
    // approvals are awaited (not while a join's store check may be in flight).
    if (run.features.v0_5 && !pass.joining) {
      if (await continueOrWait(run, waits, starting)) return null;
    } else {
      await waits;
    }
    digest = await runStoreStep(() => store.resumeTurn(run.owner()));
    upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'running' }]);
    run.console.digest(digest);
  }
}
