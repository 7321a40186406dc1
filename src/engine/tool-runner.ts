import type { Agent } from '../agents/agent.js';
import type { ToolContext, ToolDefinition } from '../agents/tool.js';
import { normalizeToolPayload, validateToolArguments } from '../agents/tool.js';
import { AuthorizationError, BudgetError, LostClaim, StaleTask, ToolError, TurnKitError } from '../errors.js';
import { nowIso } from '../store/records.js';
import type {
  Json,
  JsonObject,
  MessageRecord,
  Store,
  ToolExecutionRecord,
  TurnRecord,
} from '../store/types.js';
import { Budget } from './budget.js';
import { isLaunchAgentTool } from '../agents/coordination.js';
import type { CoordinationOutcome } from './coordination.js';
import { launchAgent, sendMessageCall, waitForCall } from './coordination.js';
import { delegate, isFinished, subAgentResult } from './delegation.js';
import { takeBack, turnDigest } from './claim.js';
import type { OwnerInput, ToolCallOutcome, TurnDigest } from './digest.js';
import type { Runtime } from './runtime.js';
import { retryWhileStoreDown } from './store-outage.js';
import { appendToolResultOnce, OUTCOME_UNKNOWN } from './terminal.js';
import { contextOf, principalOf, toolCallParts, turnState, updateState } from './turn-state.js';

type ToolCall = ReturnType<typeof toolCallParts>[number];

export interface ToolCallInput {
  turnId: string;
  claimToken: string;
  toolCallId: string;
  /** A sub-agent call behind a still-waiting one: its result is appended later, in order. */
  deferResult?: boolean;
}

export interface ToolCallHooks {
  signal: AbortSignal;
  heartbeat: (details?: unknown) => void;
  /** 1 for the first attempt of this activity. */
  attempt: number;
  /** Whether Temporal will retry this activity if it throws. */
  canRetry: boolean;
}

/** Kinds the engine runs itself; they start `pending` and never take the running claim. */
const KNOWN_WORK = new Set(['subAgent', 'launchAgent', 'waitFor', 'sendMessage']);

class ToolRun {
  readonly events: Array<[string, JsonObject]> = [];

  constructor(
    readonly runtime: Runtime,
    readonly store: Store,
    readonly turn: TurnRecord,
    readonly agent: Agent,
    readonly call: ToolCall,
    readonly tool: ToolDefinition | undefined,
    readonly deferResult: boolean,
  ) {}

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
  return { class: error instanceof Error ? error.name : 'Error', ...extra };
}

/**
 * Runs one tool call of the persisted response, in TurnKit's exact order (spec §4.2):
 * re-dispatch of a finished execution, create + reserve, unknown tool, invalid arguments,
 * authorization, a fence check right before the effect, then the call. Every path leaves
 * the execution finished with exactly one result message (unless deferred).
 */
export async function runToolCall(
  runtime: Runtime,
  input: ToolCallInput,
  hooks: ToolCallHooks,
): Promise<ToolCallOutcome> {
  const store = await runtime.fenced(input.turnId, input.claimToken);
  const turn = await store.loadTurn(input.turnId);
  const agent = runtime.agents.resolve(turn.agentName);
  const call = toolCallParts(turnState(turn).parts).find((part) => part.id === input.toolCallId);
  if (!call) throw new TurnKitError(`turn ${turn.id} has no pending tool call ${input.toolCallId}`);
  const tool = agent.effectiveTools.find((candidate) => candidate.name === call.name);
  const run = new ToolRun(runtime, store, turn, agent, call, tool, input.deferResult ?? false);
  try {
    return await dispatchCall(run, hooks);
  } finally {
    await run.flushEvents();
  }
}

async function dispatchCall(run: ToolRun, hooks: ToolCallHooks): Promise<ToolCallOutcome> {
  const { store, turn, call, tool } = run;
  const findExisting = async () =>
    (await store.listToolExecutions({ turnId: turn.id })).find((row) => row.toolCallId === call.id);

  const existing = await findExisting();
  // Re-dispatch never re-runs a finished execution; it only makes sure its result exists.
  if (existing && existing.status !== 'pending' && existing.status !== 'running') {
    const message = await run.appendResult(
      existing,
      (existing.result ?? existing.error) as Json,
      existing.status !== 'completed' && existing.status !== 'cancelled',
    );
    if (message)
      run.events.push(['message.created', { message_id: message.id, role: 'tool', kind: 'tool_result' }]);
    return run.outcome(existing);
  }

  // A row left running by an attempt that died: only a replay-safe tool may run again.
  if (
    existing &&
    existing.status === 'running' &&
    !(tool?.recovery === 'replaySafe' && tool.kind === 'ordinary')
  ) {
    return run.outcome(await run.finish(existing, 'interrupted', { message: OUTCOME_UNKNOWN }));
  }

  let denied: BudgetError | undefined;
  let execution = await store.atomic(null, async () => {
    const again = existing ?? (await findExisting());
    if (again) return again;
    const background = KNOWN_WORK.has(tool?.kind ?? 'ordinary');
    const row = await store.createToolExecution({
      turnId: turn.id,
      toolCallId: call.id,
      toolName: call.name,
      arguments: call.arguments,
      status: background ? 'pending' : 'running',
      startedAt: background ? null : nowIso(),
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

  if (!tool) return run.outcome(await run.fail(execution, `unknown tool: ${call.name}`));
  if (call.arguments_error) return run.outcome(await run.fail(execution, call.arguments_error));

  if (execution.status === 'pending' && tool.kind === 'ordinary') {
    const claimed = await store.claimToolExecution(execution.id, {
      from: 'pending',
      to: 'running',
      startedAt: nowIso(),
    });
    if (!claimed) throw new LostClaim('tool execution claim was revoked');
    execution = claimed;
  }

  let payload: JsonObject;
  try {
    const principal = principalOf(await store.loadTurn(turn.id));
    await run.runtime.authorize('tool', principal, {
      turn: turn.id,
      tool: tool.name,
      arguments: call.arguments,
    });
    // Observe cancellation or a lost claim immediately before crossing the external-effect boundary.
    await store.atomic(null, async () => true);
    if (tool.kind === 'subAgent') {
      const child = await delegate(run.runtime, store, turn, tool, execution, call.arguments);
      if (isFinished(child))
        return run.outcome(await run.finish(execution, 'completed', subAgentResult(child)));
      return {
        ...run.outcome(execution),
        waiting: true,
        childTurnId: child.id,
        childConversationId: child.conversationId,
      };
    }
    if (tool.kind !== 'ordinary') {
      const outcome = await coordinate(run, execution);
      if (outcome.kind === 'waiting') {
        return { ...run.outcome(execution), waiting: true, waitTargets: outcome.targets };
      }
      const row = await run.finish(execution, 'completed', outcome.payload);
      if (outcome.kind === 'launched') {
        return {
          ...run.outcome(row),
          launched: {
            turnId: outcome.child.id,
            agent: outcome.child.agentName,
            conversationId: outcome.child.conversationId,
          },
        };
      }
      if (outcome.kind === 'sent')
        return { ...run.outcome(row), wakeLanes: [outcome.destinationConversationId] };
      return run.outcome(row);
    }
    const args = validateToolArguments(tool, call.arguments);
    const context: ToolContext = {
      idempotencyKey: `turnkit:tool:${execution.id}`,
      signal: hooks.signal,
      principal,
      context: contextOf(turn),
      turn,
      execution,
      store,
      heartbeat: hooks.heartbeat,
    };
    payload = normalizeToolPayload(await tool.execute(args, context));
  } catch (error) {
    if (error instanceof LostClaim) throw error;
    if (error instanceof BudgetError) {
      await run.fail(execution, error.message, errorDetails(error, { budget_denied: true }));
      throw error;
    }
    if (error instanceof AuthorizationError) {
      return run.outcome(
        await run.fail(execution, error.message, errorDetails(error, { authorization_denied: true })),
      );
    }
    // A replay-safe tool's unexpected error is retried by Temporal under the same idempotency key.
    if (!(error instanceof ToolError) && tool.recovery === 'replaySafe' && hooks.canRetry) throw error;
    const message = error instanceof Error ? error.message : String(error);
    return run.outcome(await run.fail(execution, message, errorDetails(error)));
  }
  // The tool ran and its outcome is in hand: while the store is down, wait to commit it rather
  // than leave it to a retry, which could only re-run the tool or record its outcome as unknown.
  // The compare-and-set makes a retry after a commit that did land a no-op.
  return run.outcome(
    await retryWhileStoreDown(() => run.finish(execution, 'completed', payload), { signal: hooks.signal }),
  );
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

/** Skips every call after a completed terminal tool (spec §4.7). */
async function skipRemaining(
  runtime: Runtime,
  store: Store,
  turn: TurnRecord,
  terminal: ToolCall,
): Promise<void> {
  const calls = toolCallParts(turnState(turn).parts);
  const later = calls.slice(calls.findIndex((call) => call.id === terminal.id) + 1);
  for (const call of later) {
    const skipped = await store.atomic(null, async () => {
      const rows = await store.listToolExecutions({ turnId: turn.id });
      if (rows.some((row) => row.toolCallId === call.id)) return null;
      const payload = { skipped: true, message: `not executed: turn ended by ${terminal.name}` };
      const row = await store.createToolExecution({
        turnId: turn.id,
        toolCallId: call.id,
        toolName: call.name,
        arguments: call.arguments,
        status: 'pending',
      });
      await store.claimToolExecution(row.id, {
        from: 'pending',
        to: 'cancelled',
        result: payload,
        completedAt: nowIso(),
      });
      return appendToolResultOnce(store, turn, call, row.id, payload, false);
    });
    if (skipped) {
      await runtime.emit(turn, 'message.created', {
        message_id: skipped.id,
        role: 'tool',
        kind: 'tool_result',
      });
      await runtime.emit(turn, 'tool_call.skipped', { id: call.id, name: call.name });
    }
  }
}

/**
 * Closes the tools phase: after a terminal tool, skip the rest and append its completion
 * message as the output candidate; otherwise go back to the model.
 */
export async function finishToolsPhase(
  runtime: Runtime,
  input: OwnerInput & { terminalToolCallId: string | null },
): Promise<TurnDigest> {
  const store = await runtime.fenced(input.turnId, input.claimToken, input.taskHistoryLength);
  const turn = await store.loadTurn(input.turnId);
  const agent = runtime.agents.resolve(turn.agentName);
  if (turnState(turn).phase !== 'tools') return turnDigest(runtime, store, turn);
  const calls = toolCallParts(turnState(turn).parts);
  const terminal = input.terminalToolCallId
    ? calls.find((call) => call.id === input.terminalToolCallId)
    : undefined;
  // Every call up to the terminal one (all of them otherwise) must have run to an end. The
  // workflow closes the phase only after every call returned, so a caller that finds one
  // open is a stale workflow task of this run (its worker paused past the task timeout),
  // behind a live task that is still working through the phase: it must stop, not fail.
  const ran = calls.slice(0, terminal ? calls.indexOf(terminal) + 1 : calls.length);
  const finished = new Set(
    (await store.listToolExecutions({ turnId: turn.id }))
      .filter((row) => row.status !== 'pending' && row.status !== 'running')
      .map((row) => row.toolCallId),
  );
  const open = ran.filter((call) => !finished.has(call.id));
  if (open.length > 0) {
    throw new StaleTask(
      `turn ${turn.id}: the tools phase cannot close while calls are still open (${open.map((c) => c.id).join(', ')})`,
    );
  }
  if (!terminal) {
    return turnDigest(runtime, store, await updateState(store, turn.id, { phase: 'model', parts: null }));
  }
  await skipRemaining(runtime, store, turn, terminal);
  const execution = (await store.listToolExecutions({ turnId: turn.id })).find(
    (row) => row.toolCallId === terminal.id,
  );
  const tool = agent.effectiveTools.find((candidate) => candidate.name === terminal.name);
  const candidate = tool?.completionMessage(execution?.result ?? null) ?? `Completed via ${terminal.name}.`;
  const { updated, message } = await store.atomic(null, async () => {
    const message = await store.appendMessage({
      conversationId: turn.conversationId,
      turnId: turn.id,
      role: 'assistant',
      kind: 'text',
      content: candidate,
    });
    const updated = await updateState(store, turn.id, {
      phase: 'output',
      candidate,
      output_data: null,
      terminal_tool_name: terminal.name,
    });
    return { updated, message };
  });
  await runtime.emit(updated, 'message.created', { message_id: message.id, role: 'assistant', kind: 'text' });
  return turnDigest(runtime, store, updated);
}

/** The turn waits for its children: status `waiting`, claim cleared, no worker held. */
export async function suspendTurn(runtime: Runtime, input: OwnerInput): Promise<void> {
  const store = await runtime.fenced(input.turnId, input.claimToken, input.taskHistoryLength);
  await store.atomic(null, () => store.updateTurn(input.turnId, { status: 'waiting', claimToken: null }));
}

/** Takes the turn back after its children resolved; fails with LostClaim if it was cancelled meanwhile. */
export async function resumeTurn(runtime: Runtime, input: OwnerInput): Promise<TurnDigest> {
  const resumed = await takeBack(runtime, input, ['waiting']);
  if (!resumed) {
    const { status } = await runtime.store.loadTurn(input.turnId);
    throw new LostClaim(`turn ${input.turnId} is ${status}: it can no longer resume`);
  }
  return turnDigest(runtime, runtime.store, resumed);
}

/** A turn's status, for a workflow waiting on a child it could not start itself. */
export async function turnStatus(runtime: Runtime, input: { turnId: string }): Promise<{ status: string }> {
  return { status: (await runtime.store.loadTurn(input.turnId)).status };
}
