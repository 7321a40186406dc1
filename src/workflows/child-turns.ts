/**
 * The child turns a tools phase starts: sub-agents (child workflows it waits for) and
 * launched agents (started detached), and a child an earlier run started, followed.
 */
import { CancellationScope, sleep, startChild, workflowInfo } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { TURNKIT_ROOT_TURN_ID, turnStartOptions } from './contract.js';
import type { TurnRun } from './turn-run.js';
import { awaitNudge } from './turn-run.js';
import type { turnWorkflow } from './turn-workflow.js';
import { TERMINAL_TURN_STATUSES } from '../contract/turn-statuses.js';

/** A child turn to start: a sub-agent call, or an agent launched by `launch_agent`. */
export interface ChildTurn {
  turnId: string;
  agent: string;
  conversationId: string;
}

/** Starts a child turn's workflow that outlives this run. */
async function startChildTurn(run: TurnRun, child: ChildTurn, task: string) {
  run.children.add(child.turnId);
  return startChild<typeof turnWorkflow>('turnWorkflow', {
    ...turnStartOptions({
      turn: {
        id: child.turnId,
        agentName: child.agent,
        conversationId: child.conversationId,
        parentTurnId: run.turnId,
        rootTurnId: workflowInfo().typedSearchAttributes.get(TURNKIT_ROOT_TURN_ID) ?? run.turnId,
        status: 'pending',
      },
      task,
      settings: run.settings,
    }),
    parentClosePolicy: 'ABANDON',
  });
}

/** Launched agents run detached: started, never awaited. A start that already happened is fine. */
export async function launchChild(run: TurnRun, launched: ChildTurn) {
  await CancellationScope.nonCancellable(async () => {
    try {
      await startChildTurn(run, launched, `launched by ${run.turnId}`);
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    }
  });
}

const FINISHED = new Set<string>(TERMINAL_TURN_STATUSES);

/**
 * Follows a child that an earlier run of this turn started (a reset's, or the run this one
 * continued), through the store. On 0.5 runs the child signals its parent's workflow when it
 * ends (`targetFinished`), so this waits for that instead of polling.
 */
async function childFinished(run: TurnRun, childTurnId: string): Promise<void> {
  const status = () => run.activities.store.turnStatus({ turnId: childTurnId });
  if (run.features.v0_5) {
    for (let seen = run.nudges(); !FINISHED.has((await status()).status); seen = run.nudges())
      await awaitNudge(run, null, seen);
    return;
  }
  for (let wait = 1; !FINISHED.has((await status()).status);) {
    await sleep(`${wait} seconds`);
    wait = Math.min(wait * 2, 30);
  }
}

/**
 * Starts the children of a sub-agent group as child workflows, in parallel; returns when all
 * of them started, with what each one's end is awaited by. They are started outside the
 * cancellable scope: a `retain` cancel leaves them running, a `cascade` cancel signals each one.
 */
export async function startSubAgents(run: TurnRun, children: ChildTurn[]) {
  return CancellationScope.nonCancellable(() =>
    Promise.all(
      children.map(async (child) => {
        try {
          const handle = await startChildTurn(run, child, `sub-agent of ${run.turnId}`);
          // Wrapped: an async function returning a promise would wait for it, and the join
          // below (which a cancel must be able to interrupt) would never be reached.
          return { done: handle.result().then(() => undefined) };
        } catch (error) {
          if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
          return { done: childFinished(run, child.turnId) };
        }
      }),
    ),
  );
}

/** Waits for all the started children (a cancel interrupts it). */
export async function joinSubAgents(started: { done: Promise<void> }[]) {
  await Promise.race([
    Promise.all(started.map((child) => child.done)),
    CancellationScope.current().cancelRequested,
  ]);
}
