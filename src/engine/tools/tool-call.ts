import type { Agent } from '../../agents/agent.js';
import type { ToolContext, ToolDefinition } from '../../agents/tool.js';
import { normalizeToolPayload, validateToolArguments } from '../../agents/tool.js';
import { BudgetError, LostClaim, TurnKitError } from '../../errors.js';
import { nowIso } from '../../store/records.js';
import { isOpenToolExecution } from '../../store/types.js';
import type { Json, JsonObject, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import { Budget, exhaustsAtLimit } from '../step/budget.js';
import { toolSpanAttributes } from '../telemetry/genai-spans.js';
import { turnDigest } from '../step/digest.js';
import type { Runtime } from '../runtime.js';
import { toolForTurn } from '../model/skills.js';
import { findToolExecution } from './execution-lookup.js';
import { retryWhileStoreDown } from '../step/store-outage.js';
import { newId } from '../../ids.js';
import { chargeCall, checkTreeSpend } from '../step/charge.js';
import { closeToolsPhase } from './tools-phase.js';
import { TurnStep } from '../step/turn-step.js';
import { contextOf, phaseOf, principalOf, toolCallParts, turnState } from '../step/turn-state.js';
import type { ToolCallOutcome } from '../../contract/digests.js';
import type { ToolCallInput } from '../../contract/activities.js';
import { askApproval, awaitingOutcome, decideApproval } from './approval.js';
import { coordinationCall, delegateCall, ENGINE_RUN_KINDS, reportedAgain } from './engine-run-call.js';
import { failedOutcome } from './tool-failure.js';
import { callHistory } from '../model/call-history.js';
import type { ToolCallHooks } from './tool-execution.js';
import { errorDetails, ToolExecution } from './tool-execution.js';
import { OUTCOME_UNKNOWN, resultOf } from './tool-results.js';
import { closeForSpend, closedBySpend } from './budget-completion.js';
import type { PolicyVerdict } from './tool-policy.js';
import { ALLOWED, askToolPolicy, closeBlocked } from './tool-policy.js';
import { replayToolCall, toolReplaySource } from './tool-replay.js';

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
  const outcome = await dispatchCall(run, input, hooks);
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
 * TurnKit's `ToolRunner#run`: each step decides one thing, in this order. A call that needs
 * approval is created `awaiting_approval` and returned as such (the workflow waits, holding
 * nothing); dispatched again with the person's decision, it runs or gets its one rejection.
 */
async function dispatchCall(
  run: ToolExecution,
  input: ToolCallInput,
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  const existing = await run.findExecution();
  if (closedBySpend(run.step.state, run.call.id, existing)) return closeForSpend(run, existing);
  if (existing?.status === 'awaiting_approval') return runDecided(run, existing, input.approval, hooks);
  if (existing && !isOpenToolExecution(existing)) return redispatchFinished(run, existing);
  if (existing?.status === 'running' && !mayRunAgain(run.tool))
    return run.outcome(await run.finish(existing, 'interrupted', { message: OUTCOME_UNKNOWN }));
  // Asked only while the call has no row: the row records the decision, a retry finds it. A
  // replayed call runs no tool code, so neither is asked (decision 48, issue 43 #11).
  const asks = !existing && toolReplaySource(run.turn) === null;
  const verdict = asks ? await askToolPolicy(run) : ALLOWED;
  const approval = !asks || verdict.block ? 'run' : await askApproval(run);
  const held = approval === 'hold' && input.approvals !== false;
  const execution = await createAndReserve(run, existing, { held, verdict });
  if (run.closedRow) return run.outcome(run.closedRow);
  if (!run.tool) return run.outcome(await run.fail(execution, `unknown tool: ${run.call.name}`));
  if (run.call.arguments_error) return run.outcome(await run.fail(execution, run.call.arguments_error));
  if (typeof approval === 'object')
    return run.outcome(await run.fail(execution, approval.error, approval.details));
  if (approval === 'hold' && input.approvals === false)
    return run.outcome(
      await run.fail(execution, 'not executed: this call needs approval, which this turn cannot wait for'),
    );
  if (execution.status === 'awaiting_approval') return awaitingOutcome(run, execution);
  return crossEffectBoundary(run, run.tool, await claimForRun(run, run.tool, execution), hooks);
}

/** A call awaiting approval, dispatched again: it runs once approved (see `decideApproval`). */
async function runDecided(
  run: ToolExecution,
  execution: ToolExecutionRecord,
  decision: ToolCallInput['approval'],
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  const step = await decideApproval(run, execution, decision);
  if ('outcome' in step) return step.outcome;
  // Closed meanwhile (steering superseded it, a cancel): it keeps the result it got.
  if ('closed' in step) return redispatchFinished(run, step.closed);
  if (!run.tool) return run.outcome(await run.fail(step.approved, `unknown tool: ${run.call.name}`));
  return crossEffectBoundary(run, run.tool, step.approved, hooks);
}

/** A row left running by an attempt that died: only a replay-safe ordinary tool may run again. */
const mayRunAgain = (tool: ToolDefinition | undefined) =>
  tool?.recovery === 'replaySafe' && tool.kind === 'ordinary';

/** Re-dispatch never re-runs a finished execution; it only makes sure its result exists. */
async function redispatchFinished(
  run: ToolExecution,
  existing: ToolExecutionRecord,
): Promise<ToolCallOutcome> {
  const { payload, error } = resultOf(existing);
  if (!run.deferResult) await run.step.write((tx) => run.appendResult(tx, existing, payload, error));
  return { ...run.outcome(existing), ...(await reportedAgain(run, existing)) };
}

/**
 * Creates the execution row and reserves it in the root's budget, in one transaction; a
 * denial fails the row and raises the BudgetError (the turn fails); a call the tool policy
 * blocked is closed in the same transaction. An existing row is kept.
 */
async function createAndReserve(
  run: ToolExecution,
  existing: ToolExecutionRecord | undefined,
  { held, verdict }: { held: boolean; verdict: PolicyVerdict },
): Promise<ToolExecutionRecord> {
  const { turn, call } = run;
  let denied: BudgetError | undefined;
  const execution = await run.step.write(async (tx) => {
    const again = existing ?? (await run.findExecution(tx.store));
    if (again) return again;
    const background = ENGINE_RUN_KINDS.has(run.tool?.kind ?? 'ordinary');
    const row = await tx.store.createToolExecution({
      turnId: turn.id,
      toolCallId: call.id,
      toolName: call.name,
      arguments: call.arguments,
      status: held ? 'awaiting_approval' : background ? 'pending' : 'running',
      startedAt: background || held ? null : nowIso(),
    });
    // The block's store answers a root's own row from the block's read.
    const budget = await Budget.load(tx.store, turn.rootTurnId, run.agent.limits, { excluding: row });
    try {
      budget.reserveToolExecution(call.name);
    } catch (error) {
      if (!(error instanceof BudgetError)) throw error;
      denied = error;
      const failed = { message: error.message, details: errorDetails(error, { budget_denied: true }) };
      return (await run.close(tx, row, 'failed', failed)) ?? row;
    }
    return verdict.block ? closeBlocked(tx, run, row, verdict) : row;
  });
  if (denied) throw denied;
  return execution;
}

/** An ordinary tool's pending row (left by a retried dispatch) becomes running before it runs. */
async function claimForRun(
  run: ToolExecution,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
): Promise<ToolExecutionRecord> {
  if (execution.status !== 'pending' || tool.kind !== 'ordinary') return execution;
  const claimed = await run.step.write((tx) =>
    tx.store.claimToolExecution(execution.id, { from: 'pending', to: 'running', startedAt: nowIso() }),
  );
  if (!claimed) throw new LostClaim('tool execution claim was revoked');
  return claimed;
}

/**
 * Authorizes the call and runs it (a sub-agent, a coordination tool, or the tool itself);
 * whatever it throws is classified by `failedOutcome`.
 */
async function crossEffectBoundary(
  run: ToolExecution,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  let payload: JsonObject;
  try {
    const principal = principalOf(run.turn);
    await run.runtime.authorize('tool', principal, {
      turn: run.turn.id,
      tool: tool.name,
      arguments: run.call.arguments,
    });
    // Observe cancellation or a lost claim immediately before crossing the external-effect boundary.
    await run.step.observeClaim();
    const replaySource = toolReplaySource(run.turn);
    if (replaySource) return await replayToolCall(run, tool, execution, replaySource);
    if (tool.kind === 'subAgent') return await delegateCall(run, tool, execution);
    if (tool.kind !== 'ordinary') return await coordinationCall(run, execution);
    const telemetry = run.runtime.telemetry;
    const attributes = toolSpanAttributes(telemetry, run.turn, tool, execution, run.call.arguments);
    payload = await telemetry.span(`execute_tool ${tool.name}`, attributes, async (span) => {
      const result = await executeTool(run, tool, execution, principal, hooks);
      if (telemetry.recordContent) span.set({ 'gen_ai.tool.call.result': JSON.stringify(result) });
      return result;
    });
  } catch (error) {
    return failedOutcome(run, tool, execution, error, hooks);
  }
  // The tool ran and its outcome is in hand: while the store is down, wait to commit it rather
  // than leave it to a retry, which could only re-run the tool or record its outcome as unknown.
  // The compare-and-set makes a retry after a commit that did land a no-op.
  return run.outcome(
    await retryWhileStoreDown(() => run.finish(execution, 'completed', payload), { signal: hooks.signal }),
  );
}

async function executeTool(
  run: ToolExecution,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  principal: Json,
  hooks: ToolCallHooks,
): Promise<JsonObject> {
  const args = await validateToolArguments(tool, run.call.arguments);
  const context: ToolContext = {
    idempotencyKey: `turnkit:tool:${execution.id}`,
    signal: hooks.signal,
    principal,
    context: contextOf(run.turn),
    turn: run.turn,
    execution,
    store: run.store,
    heartbeat: hooks.heartbeat,
    // Charged in a fenced block of the step: a tool of a turn whose claim moved on charges nothing.
    recordUsage: async (usage, model) =>
      (await run.step.write(async (tx) => chargeCall(tx, run.runtime, usage, model))).total,
    checkSpend: () => checkTreeSpend(run.store, run.turn.id, run.agent.limits, exhaustsAtLimit(run.agent)),
    appendAfterResults: async (message) => {
      const id = newId('msg');
      run.afterResults.push({ ...(JSON.parse(JSON.stringify(message)) as JsonObject), id });
      return id;
    },
    emit: (type, payload) => run.runtime.emit(run.turn, type, payload),
    history: () => callHistory(run.store, run.turn, run.call.id),
  };
  return normalizeToolPayload(await tool.execute(args, context));
}
