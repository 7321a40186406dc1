/**
 * Agents called from an application's own workflow (`turnkit/workflow`): the call writes its
 * turn through an activity whose ids derive from the calling run and the call's number, then
 * runs the turn's workflow as a child and returns the digest of its end. Deterministic: the
 * application's workflow bundle loads this.
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { ChildWorkflowHandle } from '@temporalio/workflow';
import { CancellationScope, proxyActivities, sleep, startChild, workflowInfo } from '@temporalio/workflow';
import type {
  AgentCallActivities,
  AgentCallOptions,
  AgentTurnDigest,
  PreparedAgentTurn,
} from '../contract/agent-call.js';
import type { ControlAction } from '../contract/control-request.js';
import { TERMINAL_TURN_STATUSES } from '../contract/turn-statuses.js';
import type { Json, JsonObject } from '../store/types.js';
import { STORE_OUTAGE_RETRY } from './activity-options.js';
import { turnStartOptions, turnWorkflowId } from './contract.js';
import type { turnWorkflow } from './turn-workflow.js';

/** Agent calls this run made so far: the call's number is part of its key. */
let calls = 0;

const FINISHED = new Set<string>(TERMINAL_TURN_STATUSES);

/** A running agent call: wait for its end, cancel it, or send it a person's controls. */
export interface AgentRun {
  readonly turnId: string;
  readonly conversationId: string;
  /** The turn's workflow id (`turnkit-turn-<turnId>`). */
  readonly workflowId: string;
  /**
   * The digest of the turn's end. A cancel of the awaiting scope cancels the turn (TurnKit's
   * `cancel`, as the call's principal), waits until the store says it ended, and is rethrown.
   */
  result(): Promise<AgentTurnDigest>;
  /** TurnKit's `cancel` of the turn, as the call's principal (default `cascade`). */
  cancel(options?: { descendants?: 'retain' | 'cascade' }): Promise<void>;
  /**
   * A person's control as its Update (`approve {toolCallId}`, `reject {toolCallId}`, `pause`,
   * `resume`, `steer {text}`), as the call's principal unless `fields.principal` says otherwise.
   */
  control(action: ControlAction, fields?: JsonObject): Promise<Json>;
}

function callActivities(taskQueue: string) {
  return proxyActivities<AgentCallActivities>({
    startToCloseTimeout: '1 minute',
    retry: STORE_OUTAGE_RETRY,
    taskQueue,
  });
}

/** A turn whose workflow somebody else started (its conversation's lane): followed through the store. */
async function followTurn(activities: ReturnType<typeof callActivities>, turnId: string): Promise<void> {
  for (let wait = 1; !FINISHED.has((await activities.agentTurnDigest({ turnId })).status);) {
    await sleep(`${wait} seconds`);
    wait = Math.min(wait * 2, 30);
  }
}

async function startTurn(
  turn: PreparedAgentTurn,
  task: string,
  options: AgentCallOptions,
  taskQueue: string,
  activities: ReturnType<typeof callActivities>,
): Promise<{ ended: Promise<unknown> }> {
  const start = turnStartOptions({ turn: { ...turn, id: turn.turnId }, task, settings: options.settings });
  // Started outside the caller's scope: its cancel is TurnKit's cancel of the turn (below),
  // authorized as the call's principal, never Temporal's. A caller that closes without
  // waiting asks Temporal to cancel the turn (REQUEST_CANCEL).
  return CancellationScope.nonCancellable(async () => {
    try {
      const child: ChildWorkflowHandle<typeof turnWorkflow> = await startChild<typeof turnWorkflow>(
        'turnWorkflow',
        { ...start, taskQueue, parentClosePolicy: 'REQUEST_CANCEL', cancellationType: 'ABANDON' },
      );
      return { ended: child.result() };
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      return { ended: followTurn(activities, turn.turnId) };
    }
  });
}

/**
 * Starts an agent's turn from a workflow and returns its handle once the turn's workflow has
 * started (a child of this one). The turn is written once per call: a replay, or a retry of
 * its activity, finds the same turn.
 */
export async function startAgent(
  agent: string,
  task: string,
  options: AgentCallOptions = {},
): Promise<AgentRun> {
  const info = workflowInfo();
  const callKey = `${info.workflowId}/${info.runId}#${calls++}`;
  const taskQueue = options.taskQueue ?? info.taskQueue;
  const activities = callActivities(taskQueue);
  const principal = options.principal ?? null;
  // Written and started whatever happens to the caller's scope meanwhile: a turn written is
  // never left without its workflow, and `result()` then cancels it if the caller was.
  const turn = await CancellationScope.nonCancellable(() =>
    activities.prepareAgentTurn({
      agent,
      task,
      callKey,
      ...(options.principal !== undefined ? { principal: options.principal } : {}),
      ...(options.budget !== undefined ? { budget: options.budget } : {}),
      ...(options.conversationId !== undefined ? { conversationId: options.conversationId } : {}),
      ...(options.context !== undefined ? { context: options.context } : {}),
    }),
  );
  const { ended } = await startTurn(turn, task, options, taskQueue, activities);
  const digest = () =>
    CancellationScope.nonCancellable(() => activities.agentTurnDigest({ turnId: turn.turnId }));
  return {
    turnId: turn.turnId,
    conversationId: turn.conversationId,
    workflowId: turnWorkflowId(turn.turnId),
    async result() {
      try {
        await Promise.race([ended, CancellationScope.current().cancelRequested]);
      } catch (error) {
        if (!CancellationScope.current().consideredCancelled) throw error;
        await CancellationScope.nonCancellable(async () => {
          await activities.cancelAgentTurn({ turnId: turn.turnId, principal });
          await ended;
        });
        throw error;
      }
      return digest();
    },
    cancel: (cancel = {}) =>
      CancellationScope.nonCancellable(() =>
        activities.cancelAgentTurn({
          turnId: turn.turnId,
          principal,
          ...(cancel.descendants ? { descendants: cancel.descendants } : {}),
        }),
      ),
    control: (action, fields = {}) =>
      activities.controlAgentTurn({ turnId: turn.turnId, action, fields: { principal, ...fields } }),
  };
}

/**
 * Runs an agent's turn from a workflow and returns the digest of its end (status, output,
 * usage, cost, turn id). Cancelling the calling scope cancels the turn (see `AgentRun.result`).
 */
export async function runAgent(
  agent: string,
  task: string,
  options: AgentCallOptions = {},
): Promise<AgentTurnDigest> {
  return (await startAgent(agent, task, options)).result();
}
