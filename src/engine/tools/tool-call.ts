import type { Agent } from '../../agents/agent.js';
import type { ToolContext, ToolDefinition } from '../../agents/tool.js';
import { normalizeToolPayload, validateToolArguments } from '../../agents/tool.js';
import {
  AuthorizationError,
  BudgetError,
  LostClaim,
  storedErrorClass,
  ToolError,
  TurnKitError,
} from '../../errors.js';
import { nowIso } from '../../store/records.js';
import type {
  Json,
  JsonObject,
  MessageRecord,
  Store,
  ToolExecutionRecord,
  TurnRecord,
} from '../../store/types.js';
import { Budget } from '../step/budget.js';
import { toolSpanAttributes } from '../telemetry/genai-spans.js';
import { isLaunchAgentTool } from '../../agents/coordination.js';
import type { CoordinationOutcome } from './coordination.js';
import { launchAgent, sendMessageCall, waitForCall } from './coordination.js';
import { delegate, isFinished, subAgentResult } from './delegation.js';
import { turnDigest } from '../step/digest.js';
import type { Runtime } from '../runtime.js';
import { toolForTurn } from './skills.js';
import { findToolExecution } from './execution-lookup.js';
import { retryWhileStoreDown } from '../step/store-outage.js';
import { appendToolResultOnce, OUTCOME_UNKNOWN } from '../end/terminal-write.js';
import { newId } from '../../ids.js';
import { checkTreeSpend, recordInternalCall } from '../step/charge.js';
import { finishToolsPhase } from './tools-phase.js';
import {
  contextOf,
  phaseOf,
  principalOf,
  toolCallParts,
  turnState,
  updateState,
} from '../step/turn-state.js';
import { APPROVAL_TIMED_OUT, principalName } from '../../contract/control-request.js';
import type { ToolCallOutcome } from '../../contract/digests.js';
import type { ApprovalDecision, ToolCallInput } from '../../contract/activities.js';

/**
 * A replay-safe tool threw and has attempts left (`maxToolAttempts`): Temporal runs it again
 * under the same idempotency key. The engine's own signal, not part of the public API.
 */
class ToolRetry extends TurnKitError {
  override readonly retryable = true;
}

type ToolCall = ReturnType<typeof toolCallParts>[number];

export interface ToolCallHooks {
  signal: AbortSignal;
  heartbeat: (details?: unknown) => void;
  /** Runs a replay-safe tool that throws may have (`maxToolAttempts`), counted in the store. */
  maxAttempts: number;
}

/** Kinds the engine runs itself; they start `pending` and never take the running claim. */
const KNOWN_WORK = new Set(['subAgent', 'launchAgent', 'waitFor', 'sendMessage']);

class ToolRun {
  readonly events: Array<[string, JsonObject]> = [];
  /** Messages the tool asked for after the results; stored with its completion. */
  readonly afterResults: JsonObject[] = [];

  constructor(
    readonly runtime: Runtime,
    readonly store: Store,
    readonly turn: TurnRecord,
    readonly agent: Agent,
    readonly call: ToolCall,
    readonly tool: ToolDefinition | undefined,
    readonly deferResult: boolean,
  ) {}

  async findExecution(): Promise<ToolExecutionRecord | undefined> {
    return findToolExecution(this.store, this.turn.id, this.call.id);
  }

  outcome(execution: ToolExecutionRecord): ToolCallOutcome {
    return {
      toolCallId: this.call.id,
      executionId: execution.id,
      status: execution.status,
      terminal: execution.status === 'completed' && (this.tool?.terminal ?? false),
      waiting: false,
    };
  }

  async appendResult(
    execution: ToolExecutionRecord,
    payload: Json,
    error: boolean,
  ): Promise<MessageRecord | null> {
    if (this.deferResult) return null;
    return appendToolResultOnce(this.store, this.turn, this.call, execution.id, payload, error);
  }

  /** CAS from the row's current status, and only then append its result (spec §4.4). */
  async finish(
    execution: ToolExecutionRecord,
    status: 'completed' | 'failed' | 'interrupted',
    payload: JsonObject,
  ): Promise<ToolExecutionRecord> {
    const { row, message } = await this.store.atomic(null, async () => {
      const row = await this.store.claimToolExecution(execution.id, {
        from: execution.status,
        to: status,
        ...(status === 'completed' ? { result: payload } : { error: payload as { message: string } }),
        completedAt: nowIso(),
      });
      const message = row ? await this.appendResult(row, payload, status !== 'completed') : null;
      if (row && status === 'completed' && this.afterResults.length > 0) {
        const fresh = await this.store.loadTurn(this.turn.id);
        await updateState(this.store, this.turn.id, {
          after_results: [...(turnState(fresh).after_results ?? []), ...this.afterResults],
        });
      }
      return { row, message };
    });
    // Someone else (cancel, recovery) closed the row while the tool ran: the late outcome is dropped.
    if (!row) return this.store.loadToolExecution(execution.id);
    if (message)
      this.events.push(['message.created', { message_id: message.id, role: 'tool', kind: 'tool_result' }]);
    const chars = JSON.stringify(payload).length;
    this.events.push(
      status === 'completed'
        ? ['tool_call.completed', { id: this.call.id, name: this.call.name, result_chars: chars }]
        : [
            'tool_call.failed',
            { id: this.call.id, name: this.call.name, error: payload, result_chars: chars },
          ],
    );
    return row;
  }

  fail(execution: ToolExecutionRecord, message: string, details?: JsonObject): Promise<ToolExecutionRecord> {
    return this.finish(execution, 'failed', details ? { message, details } : { message });
  }

  async flushEvents(): Promise<void> {
    await this.runtime.emitAll(this.turn, this.events.splice(0));
  }
}

function errorDetails(error: unknown, extra: JsonObject = {}): JsonObject {
  return { class: storedErrorClass(error instanceof Error ? error.name : 'Error'), ...extra };
}

/**
 * Runs one tool call of the persisted response, in TurnKit's exact order (spec §4.2). Every
 * path leaves the execution finished with exactly one result message (unless deferred).
 */
export async function runToolCall(
  runtime: Runtime,
  input: ToolCallInput,
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  const { store, turn, agent } = await runtime.ownTurn(input);
  // An attempt that closed the phase and died before reporting: its retry reports the close.
  if (input.close && phaseOf(turn) !== 'tools') {
    if (turn.claimToken !== input.claimToken) throw new LostClaim('turn ownership was revoked');
    return closedEarlier(runtime, agent, turn, input.toolCallId);
  }
  const outcome = await runCall(runtime, input, hooks, store, turn, agent);
  if (!input.close || !settledPlainly(outcome) || !(outcome.terminal || input.close.last)) return outcome;
  const closed = await finishToolsPhase(runtime, {
    turnId: input.turnId,
    claimToken: input.claimToken,
    terminalToolCallId: outcome.terminal ? outcome.toolCallId : null,
  });
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

async function runCall(
  runtime: Runtime,
  input: ToolCallInput,
  hooks: ToolCallHooks,
  store: Store,
  turn: TurnRecord,
  agent: Agent,
): Promise<ToolCallOutcome> {
  const call = toolCallParts(turnState(turn).parts).find((part) => part.id === input.toolCallId);
  if (!call) throw new TurnKitError(`turn ${turn.id} has no pending tool call ${input.toolCallId}`);
  const tool = await toolForTurn(store, agent, turn, call.name);
  const run = new ToolRun(runtime, store, turn, agent, call, tool, input.deferResult ?? false);
  try {
    return await dispatchCall(run, input, hooks);
  } finally {
    await run.flushEvents();
  }
}

/**
 * TurnKit's `ToolRunner#run`: each step decides one thing, in this order. A call that needs
 * approval is created `awaiting_approval` and returned as such (the workflow waits, holding
 * nothing); dispatched again with the person's decision, it runs or gets its one rejection.
 */
async function dispatchCall(
  run: ToolRun,
  input: ToolCallInput,
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  const existing = await run.findExecution();
  if (existing?.status === 'awaiting_approval') return decideApproval(run, existing, input.approval, hooks);
  if (existing && isClosed(existing)) return redispatchFinished(run, existing);
  if (existing?.status === 'running' && !mayRunAgain(run.tool))
    return run.outcome(await run.finish(existing, 'interrupted', { message: OUTCOME_UNKNOWN }));
  const approval = existing ? 'run' : await askApproval(run);
  const execution = await createAndReserve(run, existing, approval === 'hold' && input.approvals !== false);
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

const isClosed = (execution: ToolExecutionRecord) =>
  execution.status !== 'pending' &&
  execution.status !== 'running' &&
  execution.status !== 'awaiting_approval';

/**
 * Asks the tool's `needsApproval` about this call, once, when it is first dispatched: with
 * the validated arguments (invalid ones fail later, unrun, needing no approval). If it throws,
 * the call fails with its message and the model reads it.
 */
async function askApproval(run: ToolRun): Promise<'hold' | 'run' | { error: string; details: JsonObject }> {
  const { tool, call, turn } = run;
  if (!tool?.needsApproval || call.arguments_error) return 'run';
  let args: unknown;
  try {
    args = validateToolArguments(tool, call.arguments);
  } catch {
    return 'run';
  }
  try {
    const context = { principal: principalOf(turn), context: contextOf(turn), turn, toolCallId: call.id };
    return (await tool.requiresApproval(args as never, context)) === true ? 'hold' : 'run';
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return {
      error: `needsApproval of ${tool.name} failed: ${message}`,
      details: errorDetails(error, { approval_check_failed: true }),
    };
  }
}

function awaitingOutcome(run: ToolRun, execution: ToolExecutionRecord): ToolCallOutcome {
  return {
    ...run.outcome(execution),
    awaitingApproval: true,
    approvalTimeoutMs: run.tool?.approvalTimeoutMs ?? null,
  };
}

/**
 * A call awaiting approval, dispatched again: still undecided, it keeps waiting; approved, it
 * becomes `running` and runs (a retry after a crash finds it running, as any call); rejected
 * (by a person or the approval timeout), it fails unrun with "rejected by <who>: <reason>".
 */
async function decideApproval(
  run: ToolRun,
  execution: ToolExecutionRecord,
  decision: ApprovalDecision | undefined,
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  if (!decision) return awaitingOutcome(run, execution);
  if (decision.decision === 'rejected') {
    const who = principalName(decision.principal);
    const message = decision.timedOut
      ? APPROVAL_TIMED_OUT
      : `rejected by ${who}${decision.reason ? `: ${decision.reason}` : ''}`;
    run.events.push([
      'tool_call.rejected',
      {
        id: run.call.id,
        name: run.call.name,
        principal: decision.principal,
        timed_out: decision.timedOut ?? false,
      },
    ]);
    return run.outcome(
      await run.fail(execution, message, {
        rejected: true,
        ...(decision.timedOut ? { timed_out: true } : {}),
      }),
    );
  }
  const approved = await run.store.claimToolExecution(execution.id, {
    from: 'awaiting_approval',
    to: 'running',
    startedAt: nowIso(),
  });
  // Closed meanwhile (steering superseded it, a cancel): it keeps the result it got.
  if (!approved) return redispatchFinished(run, await run.store.loadToolExecution(execution.id));
  run.events.push([
    'tool_call.approved',
    { id: run.call.id, name: run.call.name, principal: decision.principal },
  ]);
  if (!run.tool) return run.outcome(await run.fail(approved, `unknown tool: ${run.call.name}`));
  return crossEffectBoundary(run, run.tool, approved, hooks);
}

/** A row left running by an attempt that died: only a replay-safe ordinary tool may run again. */
const mayRunAgain = (tool: ToolDefinition | undefined) =>
  tool?.recovery === 'replaySafe' && tool.kind === 'ordinary';

/** Re-dispatch never re-runs a finished execution; it only makes sure its result exists. */
async function redispatchFinished(run: ToolRun, existing: ToolExecutionRecord): Promise<ToolCallOutcome> {
  const message = await run.appendResult(
    existing,
    (existing.result ?? existing.error) as Json,
    existing.status !== 'completed' && existing.status !== 'cancelled',
  );
  if (message)
    run.events.push(['message.created', { message_id: message.id, role: 'tool', kind: 'tool_result' }]);
  return run.outcome(existing);
}

/**
 * Creates the execution row and reserves it in the root's budget, in one transaction; a
 * denial fails the row and raises the BudgetError (the turn fails). An existing row is kept.
 */
async function createAndReserve(
  run: ToolRun,
  existing: ToolExecutionRecord | undefined,
  awaitingApproval = false,
): Promise<ToolExecutionRecord> {
  const { store, turn, call } = run;
  let denied: BudgetError | undefined;
  const execution = await store.atomic(null, async () => {
    const again = existing ?? (await run.findExecution());
    if (again) return again;
    const background = KNOWN_WORK.has(run.tool?.kind ?? 'ordinary');
    const row = await store.createToolExecution({
      turnId: turn.id,
      toolCallId: call.id,
      toolName: call.name,
      arguments: call.arguments,
      status: awaitingApproval ? 'awaiting_approval' : background ? 'pending' : 'running',
      startedAt: background || awaitingApproval ? null : nowIso(),
    });
    const budget = await Budget.load(store, turn.rootTurnId, run.agent.limits, {
      excludingExecutionId: row.id,
    });
    try {
      budget.reserveToolExecution(call.name);
    } catch (error) {
      if (!(error instanceof BudgetError)) throw error;
      denied = error;
      return run.fail(row, error.message, errorDetails(error, { budget_denied: true }));
    }
    return row;
  });
  if (denied) throw denied;
  return execution;
}

/** An ordinary tool's pending row (left by a retried dispatch) becomes running before it runs. */
async function claimForRun(
  run: ToolRun,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
): Promise<ToolExecutionRecord> {
  if (execution.status !== 'pending' || tool.kind !== 'ordinary') return execution;
  const claimed = await run.store.claimToolExecution(execution.id, {
    from: 'pending',
    to: 'running',
    startedAt: nowIso(),
  });
  if (!claimed) throw new LostClaim('tool execution claim was revoked');
  return claimed;
}

/**
 * Authorizes the call and runs it (a sub-agent, a coordination tool, or the tool itself);
 * whatever it throws is classified by `failedOutcome`.
 */
async function crossEffectBoundary(
  run: ToolRun,
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
    await run.store.atomic(null, async () => true);
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

/** A sub-agent call: its child turn is created (or found); the workflow runs and awaits it. */
async function delegateCall(
  run: ToolRun,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
): Promise<ToolCallOutcome> {
  const child = await delegate(run.runtime, run.store, run.turn, tool, execution, run.call.arguments);
  if (isFinished(child)) return run.outcome(await run.finish(execution, 'completed', subAgentResult(child)));
  return {
    ...run.outcome(execution),
    waiting: true,
    childTurnId: child.id,
    childConversationId: child.conversationId,
  };
}

/** launch_agent, send_message, wait_for: what the workflow must do next rides on the outcome. */
async function coordinationCall(run: ToolRun, execution: ToolExecutionRecord): Promise<ToolCallOutcome> {
  const outcome = await coordinate(run, execution);
  if (outcome.kind === 'waiting')
    return { ...run.outcome(execution), waiting: true, waitTargets: outcome.targets };
  const row = await run.finish(execution, 'completed', outcome.payload);
  if (outcome.kind === 'launched') {
    const { child } = outcome;
    return {
      ...run.outcome(row),
      launched: { turnId: child.id, agent: child.agentName, conversationId: child.conversationId },
    };
  }
  if (outcome.kind === 'sent') return { ...run.outcome(row), wakeLanes: [outcome.destinationConversationId] };
  return run.outcome(row);
}

/** An ordinary tool: validated arguments, the idempotency key, the turn's context. */
async function executeTool(
  run: ToolRun,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  principal: Json,
  hooks: ToolCallHooks,
): Promise<JsonObject> {
  const args = validateToolArguments(tool, run.call.arguments);
  const context: ToolContext = {
    idempotencyKey: `turnkit:tool:${execution.id}`,
    signal: hooks.signal,
    principal,
    context: contextOf(run.turn),
    turn: run.turn,
    execution,
    store: run.store,
    heartbeat: hooks.heartbeat,
    recordUsage: async (usage, model) =>
      (await recordInternalCall(run.runtime, run.store, run.turn.id, usage, model)).total,
    checkSpend: () => checkTreeSpend(run.store, run.turn.id, run.agent.limits),
    appendAfterResults: async (message) => {
      const id = newId('msg');
      run.afterResults.push({ ...(JSON.parse(JSON.stringify(message)) as JsonObject), id });
      return id;
    },
    emit: (type, payload) => run.runtime.emit(run.turn, type, payload),
  };
  return normalizeToolPayload(await tool.execute(args, context));
}

/**
 * Classifies what the call threw: a lost claim or an aborted attempt stops; a budget denial
 * fails the row and the turn; an authorization denial or any other error fails the row, which
 * the model reads.
 */
async function failedOutcome(
  run: ToolRun,
  tool: ToolDefinition,
  execution: ToolExecutionRecord,
  error: unknown,
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  if (error instanceof LostClaim) throw error;
  // Thrown after the attempt was aborted (a cancel, the turn's timeout, a worker going away):
  // what the tool did is not known, so no outcome is recorded here. The row stays running for
  // whoever aborted it: the turn's end marks it interrupted, a retry applies its recovery.
  if (hooks.signal.aborted) throw error;
  if (error instanceof BudgetError) {
    await run.fail(execution, error.message, errorDetails(error, { budget_denied: true }));
    throw error;
  }
  if (error instanceof AuthorizationError) {
    return run.outcome(
      await run.fail(execution, error.message, errorDetails(error, { authorization_denied: true })),
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  // A replay-safe tool's unexpected error is retried by Temporal under the same idempotency key,
  // until it has thrown `maxAttempts` times (a run lost with its worker is not counted).
  if (!(error instanceof ToolError) && tool.recovery === 'replaySafe') {
    const runs = await countToolError(run, execution);
    if (runs < hooks.maxAttempts)
      throw new ToolRetry(message, { cause: error, retryDelayMs: Math.min(1_000 * 2 ** (runs - 1), 30_000) });
  }
  return run.outcome(await run.fail(execution, message, errorDetails(error)));
}

/** One more run of this execution threw: the count lives in the turn's state. */
function countToolError(run: ToolRun, execution: ToolExecutionRecord): Promise<number> {
  const { store, turn } = run;
  return store.atomic(null, async () => {
    const errors = turnState(await store.loadTurn(turn.id)).tool_errors ?? {};
    const runs = (errors[execution.id] ?? 0) + 1;
    await updateState(store, turn.id, { tool_errors: { ...errors, [execution.id]: runs } });
    return runs;
  });
}

/** Runs a coordination tool (launch_agent, send_message, wait_for) for this execution. */
function coordinate(run: ToolRun, execution: ToolExecutionRecord): Promise<CoordinationOutcome> {
  const { runtime, store, turn, tool, call } = run;
  if (tool && isLaunchAgentTool(tool))
    return launchAgent(runtime, store, turn, tool, execution, call.arguments);
  if (tool?.kind === 'sendMessage')
    return sendMessageCall(runtime, store, turn, tool, execution, call.arguments);
  if (tool?.kind === 'waitFor') return waitForCall(runtime, store, turn, tool, call.arguments);
  throw new ToolError(`${call.name}: this ${tool?.kind ?? 'unknown'} tool cannot run here`);
}
