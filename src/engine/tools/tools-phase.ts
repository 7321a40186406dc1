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
  const { turn, agent } = step;
  if (step.state.phase !== 'tools') return turnDigest(agent, turn);
  const calls = toolCallParts(step.state.parts);
  const terminal = terminalToolCallId ? calls.find((call) => call.id === terminalToolCallId) : undefined;
  // Every call up to the terminal one (all of them otherwise) must have run to an end. The
  // workflow closes the phase only after every call returned, so a caller that finds one
  // open is a stale workflow task of this run (its worker paused past the task timeout),
  // behind a live task that is still working through the phase: it must stop, not fail.
  const ran = calls.slice(0, terminal ? calls.indexOf(terminal) + 1 : calls.length);
  const executions = await executionsOf(step, ran, known);
  const finished = new Set(
    executions.filter((row) => !isOpenToolExecution(row)).map((row) => row.toolCallId),
  );
  const open = ran.filter((call) => !finished.has(call.id));
  if (open.length > 0) {
    throw new StaleTask(
      `turn ${turn.id}: the tools phase cannot close while calls are still open (${open.map((c) => c.id).join(', ')})`,
    );
  }
  if (!terminal) {
    await step.write(async (tx) => {
      tx.emit(...(await appendAfterResults(tx)).map(messageCreated));
      tx.patchState({ phase: 'model', parts: null });
    });
    return turnDigest(agent, step.turn);
  }
  const execution = executions.find((row) => row.toolCallId === terminal.id);
  const tool = agent.effectiveTools.find((candidate) => candidate.name === terminal.name);
  const candidate = tool?.completionMessage(execution?.result ?? null) ?? `Completed via ${terminal.name}.`;
  await step.write(async (tx) => {
    await skipRemaining(tx, calls, terminal);
    const appended = await appendAfterResults(tx);
    const message = await tx.store.appendMessage({
      conversationId: turn.conversationId,
      turnId: turn.id,
      role: 'assistant',
      kind: 'text',
      content: candidate,
    });
    tx.emit(...[...appended, message].map(messageCreated));
    tx.patchState({ phase: 'output', candidate, output_data: null, terminal_tool_name: terminal.name });
  });
  return turnDigest(agent, step.turn);
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
