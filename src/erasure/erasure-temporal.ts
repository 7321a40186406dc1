/**
 * Temporal's side of an erasure (decision 78): the subject's schedules, and the workflow
 * executions of its conversations (turns, lanes) and of its schedules' firings. An open
 * execution is terminated, then every execution is deleted with Temporal's
 * `DeleteWorkflowExecution`, which removes its history and its visibility record. Whatever is
 * already gone counts as nothing: every call here can run again.
 */
import type { Client } from '@temporalio/client';
import { isGrpcServiceError, ScheduleNotFoundError, WorkflowNotFoundError } from '@temporalio/client';
import type { ScheduledTurnInput } from '../contract/schedule.js';
import { queryLiteral } from '../engine/schedule/firing.js';
import { canonicalJson } from '../store/records.js';
import {
  laneWorkflowId,
  SCHEDULE_ID_PREFIX,
  TURNKIT_CONVERSATION_ID,
  TURNKIT_SCHEDULE_ID,
  turnWorkflowId,
} from '../workflows/contract.js';
import type { ErasureSubject } from './erasure-types.js';

const FIRING_WORKFLOW = 'scheduledTurnWorkflow';
const GRPC_NOT_FOUND = 5;

export interface Execution {
  workflowId: string;
  runId?: string;
}

const notFound = (error: unknown) =>
  error instanceof WorkflowNotFoundError ||
  (isGrpcServiceError(error) && error.code === GRPC_NOT_FOUND) ||
  (error instanceof Error && isGrpcServiceError(error.cause) && error.cause.code === GRPC_NOT_FOUND);

/** Whether an execution exists (the latest run of the id when no run is given). */
async function executionExists(temporal: Client, execution: Execution): Promise<boolean> {
  try {
    await temporal.workflow.getHandle(execution.workflowId, execution.runId).describe();
    return true;
  } catch (error) {
    if (notFound(error)) return false;
    throw error;
  }
}

/**
 * Deletes an execution (the latest run of the id when no run is given); returns whether there
 * was one. Temporal terminates an open execution and deletes it as it closes, in one step on the
 * server (no cleanup of the erased turn runs, which would write); a closed one's history and
 * visibility record are deleted by the server's queues shortly after.
 */
export async function removeExecution(temporal: Client, execution: Execution): Promise<boolean> {
  try {
    await temporal.workflowService.deleteWorkflowExecution({
      namespace: temporal.options.namespace,
      workflowExecution: {
        workflowId: execution.workflowId,
        ...(execution.runId ? { runId: execution.runId } : {}),
      },
    });
    return true;
  } catch (error) {
    if (notFound(error)) return false;
    throw error;
  }
}

/** Every run visibility lists for a query (continued-as-new runs too), paged by the SDK. */
export async function listedRuns(temporal: Client, query: string, beat: () => void): Promise<Execution[]> {
  const runs: Execution[] = [];
  for await (const info of temporal.workflow.list({ query, pageSize: 200 })) {
    runs.push({ workflowId: info.workflowId, runId: info.runId });
    if (runs.length % 200 === 0) beat();
  }
  return runs;
}

/** The runs of a conversation's turns (by search attribute) and of its lane (by id). */
export function conversationRunsQuery(conversationId: string): string {
  return `${TURNKIT_CONVERSATION_ID.name} = ${queryLiteral(conversationId)} OR WorkflowId = ${queryLiteral(laneWorkflowId(conversationId))}`;
}

/** The firing workflows of a schedule. */
export function firingRunsQuery(scheduleId: string): string {
  return `WorkflowType = '${FIRING_WORKFLOW}' AND ${TURNKIT_SCHEDULE_ID.name} = ${queryLiteral(scheduleId)}`;
}

/**
 * The workflow ids a conversation has in Temporal: those visibility lists, its turns' that
 * exist (visibility may not list a new one yet) and its lane's.
 */
export async function conversationWorkflowIds(
  temporal: Client,
  conversationId: string,
  turnIds: AsyncIterable<string>,
  beat: () => void,
): Promise<Set<string>> {
  const ids = new Set(
    (await listedRuns(temporal, conversationRunsQuery(conversationId), beat)).map((run) => run.workflowId),
  );
  for await (const turnId of turnIds) {
    const id = turnWorkflowId(turnId);
    if (!ids.has(id) && (await executionExists(temporal, { workflowId: id }))) ids.add(id);
    beat();
  }
  const lane = laneWorkflowId(conversationId);
  if (!ids.has(lane) && (await executionExists(temporal, { workflowId: lane }))) ids.add(lane);
  return ids;
}

/** The TurnKit schedules (ids without the prefix) whose definition belongs to the subject. */
export async function subjectSchedules(
  temporal: Client,
  subject: ErasureSubject,
  beat: () => void,
): Promise<string[]> {
  const wanted = 'principal' in subject ? canonicalJson(subject.principal) : null;
  const found: string[] = [];
  for await (const schedule of temporal.schedule.list()) {
    beat();
    if (
      schedule.action?.workflowType !== FIRING_WORKFLOW ||
      !schedule.scheduleId.startsWith(SCHEDULE_ID_PREFIX)
    )
      continue;
    let definition: ScheduledTurnInput | undefined;
    try {
      definition = (await temporal.schedule.getHandle(schedule.scheduleId).describe()).action.args?.[0] as
        ScheduledTurnInput | undefined;
    } catch (error) {
      // Listed, but deleted since (the list is eventually consistent).
      if (error instanceof ScheduleNotFoundError) continue;
      throw error;
    }
    if (!definition) continue;
    const mine =
      wanted !== null
        ? canonicalJson(definition.principal ?? null) === wanted
        : 'conversationId' in subject && definition.conversationId === subject.conversationId;
    if (mine) found.push(schedule.scheduleId.slice(SCHEDULE_ID_PREFIX.length));
  }
  return found.sort();
}

/** Deletes a schedule (nothing when it is gone already). */
export async function removeSchedule(temporal: Client, scheduleId: string): Promise<void> {
  try {
    await temporal.schedule.getHandle(`${SCHEDULE_ID_PREFIX}${scheduleId}`).delete();
  } catch (error) {
    if (!(error instanceof ScheduleNotFoundError) && !notFound(error)) throw error;
  }
}
