/** Starting or nudging the workflows of the store from outside them (repair, the lane). */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Store, TurnRecord } from '../../store/types.js';
import { laneStartOptions, laneFreeSignal, turnStartOptions } from '../../workflows/contract.js';
import type { laneWorkflow } from '../../workflows/lane-workflow.js';
import type { turnWorkflow } from '../../workflows/turn-workflow.js';
import type { RepairContext } from './repair.js';

/**
 * Starts the turn's workflow, or nudges it when it already runs (waiting for its lane):
 * signal-with-start on the fixed workflow id, so a turn never runs twice. `closed` when its
 * workflow ran and closed already (nothing was started: repair decides what the row needs).
 */
export async function startOrNudgeTurn(
  context: RepairContext,
  turn: TurnRecord,
): Promise<'started' | 'closed'> {
  try {
    await context.temporal.workflow.signalWithStart<typeof turnWorkflow, []>('turnWorkflow', {
      ...turnStartOptions({
        turn,
        task: await taskOf(context.runtime.store, turn),
        settings: context.settings,
      }),
      taskQueue: context.taskQueue,
      signal: laneFreeSignal,
      signalArgs: [],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
    });
    return 'started';
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return 'closed';
    throw error;
  }
}

/** Signal-with-start of a conversation's lane. */
export async function wakeLane(context: RepairContext, conversationId: string): Promise<void> {
  await context.temporal.workflow.signalWithStart<typeof laneWorkflow, []>('laneWorkflow', {
    ...laneStartOptions(conversationId, context.settings),
    taskQueue: context.taskQueue,
  });
}

/** What a turn is about: the text of its trigger (the last message it sees), else its id. */
export async function taskOf(store: Store, turn: TurnRecord): Promise<string> {
  const through = turn.contextMessageSequence;
  // Usually the message at the snapshot's sequence: read it alone, not the whole history.
  const trigger =
    (
      await store.listMessages(turn.conversationId, { throughSequence: through, afterSequence: through - 1 })
    ).at(-1) ?? (await store.listMessages(turn.conversationId, { throughSequence: through })).at(-1);
  const text = trigger?.content.find((part) => part.type === 'text');
  return text && text.type === 'text' ? text.text : turn.id;
}
