/**
 * The pipeline of one tool call (decision 85): the only place that orders a call. The
 * decisions (approval, tool policy, budget completion, replay, failure) answer verdicts and
 * write nothing; `ToolExecution` makes every write of the row; the call's one result is
 * recorded once, at the end (`conclude`).
 */
import type { Agent } from '../../agents/agent.js';
import type { ToolDefinition } from '../../agents/tool.js';
import { LostClaim, TurnKitError } from '../../errors.js';
import { isOpenToolExecution } from '../../store/types.js';
import type { JsonObject, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import { turnDigest } from '../step/digest.js';
import type { Runtime } from '../runtime.js';
import { toolForTurn } from '../model/skills.js';
import { findToolExecution } from '../step/execution-lookup.js';
import { retryWhileStoreDown } from '../step/store-outage.js';
import { closeToolsPhase } from './tools-phase.js';
import { TurnStep } from '../step/turn-step.js';
import { phaseOf, principalOf, toolCallParts, turnState } from '../step/turn-state.js';
import type { ToolCallOutcome, TurnDigest } from '../../contract/digests.js';
import type { ToolCallInput } from '../../contract/activities.js';
import { decideApproval } from './approval.js';
import { asksNoOne, closingOf, firstDispatch, rowStatus } from './first-dispatch.js';
import type { EngineRun } from './engine-run-call.js';
import { coordinationCall, delegateCall, reportedAgain } from './engine-run-call.js';
import { failureVerdict, leftRunning, retryVerdict, unrunnable } from './tool-failure.js';
import type { ToolCallHooks } from './tool-execution.js';
import type { PhaseCloser } from './close-in-call.js';
import { phaseCloser } from './close-in-call.js';
import { ToolExecution } from './tool-execution.js';
import { spendVerdict } from './budget-completion.js';
import { replayVerdict, toolReplaySource } from './tool-replay.js';
import { runTool } from './run-tool.js';
import type { Decided } from './verdict.js';
import { RUN } from './verdict.js';

/** The hooks of a dispatch, with how the call's closing block may close the phase too. */
type DispatchHooks = ToolCallHooks & { closer?: PhaseCloser | undefined };

/**
 * Runs one tool call of the persisted response, in TurnKit's exact order (spec §4.2). Every
 * path leaves the execution finished with exactly one result message (unless deferred).
 */
export async function runToolCall(
  runtime: Runtime,
  input: ToolCallInput,
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  const step = await TurnStep.open(runtime, input);
  const { turn, agent } = step;
  // An attempt that closed the phase and died before reporting: its retry reports the close.
  if (input.close && phaseOf(turn) !== 'tools') {
    if (turn.claimToken !== input.claimToken) throw new LostClaim('turn ownership was revoked');
    return closedEarlier(runtime, agent, turn, input.toolCallId);
  }
  const run = await toolExecutionFor(step, input);
  const outcome = await dispatchCall(run, input, { ...hooks, closer: phaseCloser(run, input) });
  // Closed in the block that recorded the call's result (decision 89).
  if (outcome.closed) return outcome;
  if (!input.close || !settledPlainly(outcome) || !(outcome.terminal || input.close.last)) return outcome;
  const known = run.closedRow ? [run.closedRow] : [];
  const closed = await closeToolsPhase(step, outcome.terminal ? outcome.toolCallId : null, known);
  return { ...outcome, closed };
}

/** Nothing about this outcome is left for the workflow to do before the phase closes. */
const settledPlainly = (outcome: ToolCallOutcome) =>
  !outcome.waiting && !outcome.awaitingApproval && !outcome.launched && !outcome.wakeLanes?.length;

/** The outcome a retried closing call reports: its execution as stored, and where the turn is. */
async function closedEarlier(
  runtime: Runtime,
  agent: Agent,
  turn: TurnRecord,
  toolCallId: string,
): Promise<ToolCallOutcome> {
  const execution = await findToolExecution(runtime.store, turn.id, toolCallId);
  if (!execution) throw new TurnKitError(`turn ${turn.id} has no tool call ${toolCallId}`);
  const tool = agent.effectiveTools.find((candidate) => candidate.name === execution.toolName);
  return {
    toolCallId,
    executionId: execution.id,
    status: execution.status,
    terminal: execution.status === 'completed' && (tool?.terminal ?? false),
    waiting: false,
    closed: turnDigest(agent, turn),
  };
}

/** The call `input` names, in the response this turn persisted, and the tool it may call. */
async function toolExecutionFor(step: TurnStep, input: ToolCallInput): Promise<ToolExecution> {
  const { turn, agent } = step;
  const call = toolCallParts(turnState(turn).parts).find((part) => part.id === input.toolCallId);
  if (!call) throw new TurnKitError(`turn ${turn.id} has no pending tool call ${input.toolCallId}`);
  const tool = await toolForTurn(step.store, agent, turn, call.name);
  return new ToolExecution(step, call, tool, input.deferResult ?? false);
}

/**
 * TurnKit's `ToolRunner#run` (spec §4.2), in this order; each step asks one decision, and the
 * first verdict that is not `run` decides the call:
 *  1. budget completion: a sibling of the save that has not run is skipped;
 *  2. a finished call is never run again: its result is reported again;
 *  3. a call awaiting approval: the person's decision (none yet, it keeps waiting);
 *  4. a row an attempt that died left running: only a replay-safe tool runs again;
 *  5. whether it can run at all (its tool, its arguments), then, on its first dispatch only,
 *     the tool policy and approval (a replayed call runs no tool code, so neither is asked);
 *  6. the row: created and reserved (closed in the same transaction when 5 closed it), or
 *     started (pending or approved: running);
 *  7. the effect: authorized, the claim observed, then replay, the engine's own call or the tool;
 *  8. what it threw: stop, count and retry, or close;
 *  9. the one result (`conclude`).
 */
async function dispatchCall(
  run: ToolExecution,
  input: ToolCallInput,
  hooks: DispatchHooks,
): Promise<ToolCallOutcome> {
  const unread = asksNoOne(run);
  const existing = unread ? undefined : await run.findExecution();
  if (existing) return dispatchFound(run, existing, input, hooks);
  const spend = spendVerdict(run, undefined);
  if (spend.kind !== 'run') return conclude(run, undefined, spend);
  const verdict = await firstDispatch(run, input);
  const { row, created } = await run.create({ status: rowStatus(run, verdict), ...closingOf(verdict) });
  // A row the block found (an earlier attempt's, when the call was not looked for before it;
  // another attempt's, created meanwhile) is decided as a row found.
  if (!created) return dispatchFound(run, row, input, hooks);
  // Closed as it was created (a block, a call that cannot run).
  if (verdict.kind === 'close') return run.outcome(row);
  if (row.status === 'awaiting_approval') return conclude(run, row, { kind: 'hold' });
  return runEffect(run, run.tool!, await startForRun(run, run.tool!, row), hooks, true);
}

/** Steps 1 to 5 and 7 for a call that has a row already. */
async function dispatchFound(
  run: ToolExecution,
  existing: ToolExecutionRecord,
  input: ToolCallInput,
  hooks: DispatchHooks,
): Promise<ToolCallOutcome> {
  const spend = spendVerdict(run, existing);
  if (spend.kind !== 'run') return conclude(run, existing, spend);
  if (!isOpenToolExecution(existing)) return reportAgain(run, existing);
  if (existing.status === 'awaiting_approval') return runDecided(run, existing, input, hooks);
  const recovery = existing.status === 'running' ? leftRunning(run.tool) : RUN;
  if (recovery.kind !== 'run') return conclude(run, existing, recovery);
  const verdict = unrunnable(run);
  if (verdict.kind !== 'run') return conclude(run, existing, verdict);
  const started = await startForRun(run, run.tool!, existing);
  return runEffect(run, run.tool!, started, hooks, started !== existing);
}

/** Step 3: a call awaiting approval, dispatched again with the person's decision (if any). */
async function runDecided(
  run: ToolExecution,
  existing: ToolExecutionRecord,
  input: ToolCallInput,
  hooks: DispatchHooks,
): Promise<ToolCallOutcome> {
  const decided = decideApproval(run, input.approval);
  if (decided.kind !== 'run') return conclude(run, existing, decided);
  const approved = await run.start(existing, decided.events);
  // Closed meanwhile (steering superseded it, a cancel): it keeps the result it got.
  if (!approved) return reportAgain(run, await run.step.store.loadToolExecution(existing.id));
  const runnable = unrunnable(run);
  if (runnable.kind !== 'run') return conclude(run, approved, runnable);
  return runEffect(run, run.tool!, approved, hooks, true);
}

/** An ordinary tool's pending row (left by a retried dispatch) becomes running before it runs. */
async function startForRun(
  run: ToolExecution,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
): Promise<ToolExecutionRecord> {
  if (execution.status !== 'pending' || tool.kind !== 'ordinary') return execution;
  const started = await run.start(execution);
  if (!started) throw new LostClaim('tool execution claim was revoked');
  return started;
}

/** Step 2: a finished call is never run again; its one result is made sure of. */
async function reportAgain(run: ToolExecution, existing: ToolExecutionRecord): Promise<ToolCallOutcome> {
  await run.reportAgain(existing);
  return { ...run.outcome(existing), ...(await reportedAgain(run, existing)) };
}

/**
 * Steps 7 and 8: authorizes the call and runs it (replayed, a sub-agent, a coordination tool,
 * or the tool itself); what it threw is classified by `failureVerdict`. Then step 9.
 */
async function runEffect(
  run: ToolExecution,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  hooks: DispatchHooks,
  fenced = false,
): Promise<ToolCallOutcome> {
  let verdict: Decided;
  let report: Partial<ToolCallOutcome> = {};
  let outageWait: AbortSignal | undefined;
  try {
    const principal = principalOf(run.turn);
    const asked = run.runtime.asksAuthorization;
    await run.runtime.authorize('tool', principal, {
      turn: run.turn.id,
      tool: tool.name,
      arguments: run.call.arguments,
    });
    // Observe cancellation or a lost claim immediately before crossing the external-effect
    // boundary: `fenced`, the block that just wrote the row checked it, and only an
    // authorization policy (the application's code) may have run since (decision 89).
    if (asked || !fenced) await run.step.observeClaim();
    const replaySource = toolReplaySource(run.turn);
    if (replaySource) verdict = await replayVerdict(run, tool, execution, replaySource);
    else if (tool.kind !== 'ordinary') {
      const engine = await engineRun(run, tool, execution);
      // A child or a wait the workflow awaits: the call stays open.
      if (!engine.result) return { ...run.outcome(execution), ...engine.report };
      ({ report } = engine);
      verdict = completed(engine.result);
    } else verdict = completed(await runTool(run, tool, execution, principal, hooks));
    // The call ran and its outcome is in hand: while the store is down, wait to commit it
    // rather than leave it to a retry, which could only re-run the tool or record its outcome
    // as unknown. The compare-and-set makes a retry after a commit that did land a no-op.
    outageWait = hooks.signal;
  } catch (error) {
    verdict = await failureVerdict(run, tool, error, hooks.signal.aborted);
    if (verdict.kind === 'delegate' && verdict.retry)
      verdict = retryVerdict(verdict.error, await run.countRun(execution), hooks.maxAttempts);
  }
  // A call that leaves nothing else for the workflow may close the phase in its closing block.
  const closer = Object.keys(report).length === 0 ? hooks.closer : undefined;
  return { ...(await conclude(run, execution, verdict, outageWait, closer)), ...report };
}

/** The engine runs the call itself: a sub-agent's child turn, or a coordination tool. */
const engineRun = (
  run: ToolExecution,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
): Promise<EngineRun> =>
  tool.kind === 'subAgent' ? delegateCall(run, tool, execution) : coordinationCall(run, execution);

const completed = (payload: JsonObject): Decided => ({
  kind: 'close',
  closing: { status: 'completed', payload },
});

/**
 * Step 9, where every path that decides the call ends: `hold` reports it awaiting approval,
 * `close` records its one result (and raises what the closing raises), `delegate` ends the
 * attempt on its error. Given `whileStoreDown`, the close waits out a store outage.
 */
async function conclude(
  run: ToolExecution,
  execution: ToolExecutionRecord | undefined,
  verdict: Decided,
  whileStoreDown?: AbortSignal,
  closer?: PhaseCloser,
): Promise<ToolCallOutcome> {
  if (verdict.kind === 'delegate') throw verdict.error;
  if (verdict.kind === 'hold')
    return {
      ...run.outcome(execution!),
      awaitingApproval: true,
      approvalTimeoutMs: run.tool?.approvalTimeoutMs ?? null,
    };
  const { closing } = verdict;
  let closed: (() => Promise<TurnDigest>) | undefined;
  const settle = async () => {
    // Prepared again by each try: a try whose block rolled back closed nothing.
    closed = undefined;
    const close = execution && closer ? await closer(execution, closing) : undefined;
    return run.settle(execution, closing, close && (async (tx) => void (closed = await close(tx))));
  };
  const row = whileStoreDown ? await retryWhileStoreDown(settle, { signal: whileStoreDown }) : await settle();
  if (closing.raise) throw closing.raise;
  return closed ? { ...run.outcome(row), closed: await closed() } : run.outcome(row);
}
