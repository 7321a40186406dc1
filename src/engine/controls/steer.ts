/**
 * Steering a running turn at a control boundary (spec Appendix A): each person's message is
 * written once, and every call of an interrupted tools phase keeps its one result.
 */
import { isOpenToolExecution } from '../../store/types.js';
import type { MessageRecord } from '../../store/types.js';
import { appendAfterResults } from '../step/after-results.js';
import { turnDigest } from '../step/digest.js';
import type { Runtime } from '../runtime.js';
import { appendResultOf, closeUnrun } from '../step/tool-results.js';
import { executionsOfCalls } from '../step/execution-lookup.js';
import { toolCallParts } from '../step/turn-state.js';
import { messageCreated, turnEvent } from '../step/events.js';
import { TurnStep } from '../step/turn-step.js';
import type { OwnerInput, TurnDigest } from '../../contract/digests.js';
import type { Steer } from '../../contract/activities.js';

const SUPERSEDED = 'superseded by human steering';

/**
 * Applies steering at a control boundary, in one transaction: in the tools phase every call
 * gets its one result in call order (a finished call its own; one not started, or awaiting
 * its approval, "superseded by human steering", cancelled), then each person's message is
 * appended and the turn goes back to the model. Before a model call it only appends; before
 * the output step the candidate is dropped and the model answers again.
 */
export async function steerTurn(
  runtime: Runtime,
  input: OwnerInput & { steers: Steer[] },
): Promise<TurnDigest> {
  const step = await TurnStep.open(runtime, input);
  await step.write(async (tx) => {
    const state = tx.state;
    const applied = new Set(state.steers_applied ?? []);
    // One message per steer id: the same post's steer may arrive twice when it was re-sent
    // to a run that continued as new (Temporal's Update-id dedup is per run).
    const steers: Steer[] = [];
    for (const steer of input.steers) {
      if (applied.has(steer.id)) continue;
      applied.add(steer.id);
      steers.push(steer);
    }
    if (steers.length === 0) return;
    const written: MessageRecord[] = [];
    if (state.phase === 'tools') {
      const calls = toolCallParts(state.parts);
      const executions = await executionsOfCalls(tx.store, tx.turn.id, calls);
      for (const call of calls) {
        const row = executions.find((execution) => execution.toolCallId === call.id);
        if (row && !isOpenToolExecution(row)) {
          const message = await appendResultOf(tx.store, tx.turn, call, row);
          if (message) written.push(message);
          continue;
        }
        // A running row cannot be here (every call before a boundary returned); it stays open.
        const closed = await closeUnrun(tx.store, tx.turn, call, row, SUPERSEDED);
        if (!closed) continue;
        if (closed.message) written.push(closed.message);
        tx.emit(turnEvent('tool_call.superseded', { id: call.id, name: call.name }));
      }
      written.push(...(await appendAfterResults(tx)));
    }
    for (const steer of steers) {
      written.push(
        await tx.store.appendMessage({
          conversationId: tx.turn.conversationId,
          turnId: tx.turn.id,
          role: 'user',
          kind: 'text',
          content: steer.text,
          metadata: { steered_by: steer.principal, steer_id: steer.id },
        }),
      );
    }
    tx.emit(...written.map(messageCreated), turnEvent('turn.steered', { steers: steers.length }));
    tx.patchState({
      steers_applied: [...applied],
      phase: 'model',
      parts: null,
      candidate: null,
      output_data: null,
      terminal_tool_name: null,
    });
  });
  return turnDigest(step.agent, step.turn);
}
