/**
 * The store side of the tools phase around the calls themselves (spec §4): closing it (skip
 * after a terminal tool, completion message), suspending while children run, resuming.
 */
import { LostClaim, StaleTask } from '../../errors.js';
import { isOpenToolExecution } from '../../store/types.js';
import type { JsonObject, MessageRecord, Store, TurnRecord } from '../../store/types.js';
import { retakeClaim } from '../claim/claim.js';
import { turnDigest } from '../step/digest.js';
import type { Runtime } from '../runtime.js';
import { appendAfterResults } from './after-results.js';
import { closeUnrun } from './tool-results.js';
import type { ToolCall } from './tool-execution.js';
import { executionsOfCalls, findToolExecution } from './execution-lookup.js';
import { toolCallParts, turnState, updateState } from '../step/turn-state.js';
import type { OwnerInput, TurnDigest } from '../../contract/digests.js';

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
      if (await findToolExecution(store, turn.id, call.id)) return null;
      const closed = await closeUnrun(
        store,
        turn,
        call,
        undefined,
        `not executed: turn ended by ${terminal.name}`,
      );
      return closed?.message ?? null;
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

async function emitCreated(runtime: Runtime, turn: TurnRecord, messages: readonly MessageRecord[]) {
  await runtime.emitAll(
    turn,
    messages.map((message): [string, JsonObject] => [
      'message.created',
      { message_id: message.id, role: message.role, kind: message.kind },
    ]),
  );
}

/**
 * Closes the tools phase: after a terminal tool, skip the rest and append its completion
 * message as the output candidate; otherwise go back to the model.
 */
export async function finishToolsPhase(
  runtime: Runtime,
  input: OwnerInput & { terminalToolCallId: string | null },
): Promise<TurnDigest> {
  const { store, turn, agent } = await runtime.ownTurn(input);
  if (turnState(turn).phase !== 'tools') return turnDigest(agent, turn);
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
    (await executionsOfCalls(store, turn.id, ran))
      .filter((row) => !isOpenToolExecution(row))
      .map((row) => row.toolCallId),
  );
  const open = ran.filter((call) => !finished.has(call.id));
  if (open.length > 0) {
    throw new StaleTask(
      `turn ${turn.id}: the tools phase cannot close while calls are still open (${open.map((c) => c.id).join(', ')})`,
    );
  }
  if (!terminal) {
    const { updated, appended } = await store.atomic(null, async () => {
      const appended = await appendAfterResults(store, turn);
      return { updated: await updateState(store, turn.id, { phase: 'model', parts: null }), appended };
    });
    await emitCreated(runtime, updated, appended);
    return turnDigest(agent, updated);
  }
  await skipRemaining(runtime, store, turn, terminal);
  const execution = await findToolExecution(store, turn.id, terminal.id);
  const tool = agent.effectiveTools.find((candidate) => candidate.name === terminal.name);
  const candidate = tool?.completionMessage(execution?.result ?? null) ?? `Completed via ${terminal.name}.`;
  const { updated, message, appended } = await store.atomic(null, async () => {
    const appended = await appendAfterResults(store, turn);
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
    return { updated, message, appended };
  });
  await emitCreated(runtime, updated, [...appended, message]);
  return turnDigest(agent, updated);
}

/** The turn waits for its children: status `waiting`, claim cleared, no worker held. */
export async function suspendTurn(runtime: Runtime, input: OwnerInput): Promise<void> {
  const { store } = await runtime.ownTurn(input);
  await store.atomic(null, () => store.updateTurn(input.turnId, { status: 'waiting', claimToken: null }));
}

/** Takes the turn back after its children resolved; fails with LostClaim if it was cancelled meanwhile. */
export async function resumeTurn(runtime: Runtime, input: OwnerInput): Promise<TurnDigest> {
  const resumed = await retakeClaim(runtime, input, ['waiting']);
  if (!resumed) {
    const { status } = await runtime.store.loadTurn(input.turnId);
    throw new LostClaim(`turn ${input.turnId} is ${status}: it can no longer resume`);
  }
  return turnDigest(runtime.agents.resolve(resumed.agentName), resumed);
}

/** A turn's status, for a workflow waiting on a child it could not start itself. */
export async function turnStatus(runtime: Runtime, input: { turnId: string }): Promise<{ status: string }> {
  return { status: (await runtime.store.loadTurn(input.turnId)).status };
}
