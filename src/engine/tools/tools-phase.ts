/**
 * The store side of the tools phase around the calls themselves (spec §4): closing it (skip
 * after a terminal tool, completion message), suspending while children run, resuming.
 */
import { StaleTask } from '../../errors.js';
import { isOpenToolExecution } from '../../store/types.js';
import type { ToolExecutionRecord } from '../../store/types.js';
import { turnDigest } from '../step/digest.js';
import { messageCreated, turnEvent } from '../step/events.js';
import { TurnStep } from '../step/turn-step.js';
import type { TurnTx } from '../step/turn-step.js';
import { toolCallParts } from '../step/turn-state.js';
import type { Runtime } from '../runtime.js';
import { appendAfterResults } from '../step/after-results.js';
import { executionsOfCalls, findToolExecution } from '../step/execution-lookup.js';
import type { ToolCall } from './verdict.js';
import { closeUnrun } from '../step/tool-results.js';
import { SPEND_LIMIT_SKIP } from './budget-completion.js';
import type { OwnerInput, TurnDigest } from '../../contract/digests.js';

/** Skips every call after a completed terminal tool (spec §4.7), in the closing block. */
async function skipRemaining(tx: TurnTx, calls: readonly ToolCall[], terminal: ToolCall): Promise<void> {
  const later = calls.slice(calls.indexOf(terminal) + 1);
  const saved = tx.state.budget_completion_call_id !== undefined;
  const message = saved ? SPEND_LIMIT_SKIP : `not executed: turn ended by ${terminal.name}`;
  for (const call of later) {
    if (await findToolExecution(tx.store, tx.turn.id, call.id)) continue;
    const closed = await closeUnrun(tx.store, tx.turn, call, undefined, message);
    if (!closed?.message) continue;
    tx.emit(messageCreated(closed.message), turnEvent('tool_call.skipped', { id: call.id, name: call.name }));
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
  return closeToolsPhase(await TurnStep.open(runtime, input), input.terminalToolCallId);
}

/**
 * `finishToolsPhase` in the step of the tool call that closes the phase (decision 28);
 * `known`: rows this step closed itself, which need no second read.
 */
export async function closeToolsPhase(
  step: TurnStep,
  terminalToolCallId: string | null,
  known: readonly ToolExecutionRecord[] = [],
): Promise<TurnDigest> {
  const close = await preparePhaseClose(step, terminalToolCallId, known);
  if (close) {
    // Every call up to the terminal one (all of them otherwise) must have run to an end. The
    // workflow closes the phase only after every call returned, so a caller that finds one
    // open is a stale workflow task of this run (its worker paused past the task timeout),
    // behind a live task that is still working through the phase: it must stop, not fail.
    if (close.open.length > 0) {
      throw new StaleTask(
        `turn ${step.turn.id}: the tools phase cannot close while calls are still open (${close.open.map((c) => c.id).join(', ')})`,
      );
    }
    await step.write((tx) => writePhaseClose(tx, close));
  }
  return turnDigest(step.agent, step.turn);
}

/** How the tools phase closes, decided before its block (its reads are not locked). */
export interface PhaseClose {
  calls: readonly ToolCall[];
  /** The completed terminal call that ends the phase into the output; none: back to the model. */
  terminal: ToolCall | undefined;
  /** The terminal call's completion message (the output candidate). */
  candidate: string;
  /** Calls up to the terminal one (all of them otherwise) that have not run to an end. */
  open: ToolCall[];
}

/**
 * Reads what closing the phase needs: the executions of the calls that must have run to an
 * end (those in `known` as they are), and the terminal tool's completion message. Null when
 * the phase is closed already.
 */
export async function preparePhaseClose(
  step: TurnStep,
  terminalToolCallId: string | null,
  known: readonly ToolExecutionRecord[] = [],
): Promise<PhaseClose | null> {
  const { agent } = step;
  if (step.state.phase !== 'tools') return null;
  const calls = toolCallParts(step.state.parts);
  const terminal = terminalToolCallId ? calls.find((call) => call.id === terminalToolCallId) : undefined;
  const ran = calls.slice(0, terminal ? calls.indexOf(terminal) + 1 : calls.length);
  const executions = await executionsOf(step, ran, known);
  const finished = new Set(
    executions.filter((row) => !isOpenToolExecution(row)).map((row) => row.toolCallId),
  );
  const open = ran.filter((call) => !finished.has(call.id));
  if (!terminal) return { calls, terminal, candidate: '', open };
  const execution = executions.find((row) => row.toolCallId === terminal.id);
  const tool = agent.effectiveTools.find((candidate) => candidate.name === terminal.name);
  const candidate = tool?.completionMessage(execution?.result ?? null) ?? `Completed via ${terminal.name}.`;
  return { calls, terminal, candidate, open };
}

/**
 * The phase's close in the caller's block: after a terminal tool, the rest skipped and its
 * completion message appended as the output candidate; otherwise back to the model.
 */
export async function writePhaseClose(tx: TurnTx, close: PhaseClose): Promise<void> {
  const { calls, terminal, candidate } = close;
  if (!terminal) {
    tx.emit(...(await appendAfterResults(tx)).map(messageCreated));
    tx.patchState({ phase: 'model', parts: null });
    return;
  }
  await skipRemaining(tx, calls, terminal);
  const appended = await appendAfterResults(tx);
  const message = await tx.store.appendMessage({
    conversationId: tx.turn.conversationId,
    turnId: tx.turn.id,
    role: 'assistant',
    kind: 'text',
    content: candidate,
  });
  tx.emit(...[...appended, message].map(messageCreated));
  tx.patchState({ phase: 'output', candidate, output_data: null, terminal_tool_name: terminal.name });
}

/** The executions of `calls`: those in `known` as they are, the others read. */
async function executionsOf(
  step: TurnStep,
  calls: readonly ToolCall[],
  known: readonly ToolExecutionRecord[],
): Promise<ToolExecutionRecord[]> {
  const ids = new Set(calls.map((call) => call.id));
  const have = known.filter((row) => ids.has(row.toolCallId));
  const missing = calls.filter((call) => !have.some((row) => row.toolCallId === call.id));
  return missing.length === 0
    ? have
    : [...have, ...(await executionsOfCalls(step.store, step.turn.id, missing))];
}

/** The turn waits for its children: status `waiting`, claim cleared, no worker held. */
export async function suspendTurn(runtime: Runtime, input: OwnerInput): Promise<void> {
  const step = await TurnStep.open(runtime, input);
  await step.write(async (tx) => tx.set({ status: 'waiting', claimToken: null }));
}

/** A turn's status, for a workflow waiting on a child it could not start itself. */
export async function turnStatus(runtime: Runtime, input: { turnId: string }): Promise<{ status: string }> {
  return { status: (await runtime.store.loadTurn(input.turnId)).status };
}
