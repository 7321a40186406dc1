/**
 * A schedule's firing, in its activity: the turn's rows, written once per firing (ids derived
 * from the firing, so a retried attempt finds what an earlier one wrote), under the
 * schedule's caps and its spend per day. The firing workflow then runs the turn as its child.
 */
import type { Client } from '@temporalio/client';
import type { Agent, BudgetLimits } from '../../agents/agent.js';
import type {
  PrepareScheduledTurnInput,
  ScheduledTurnDigest,
  ScheduledTurnInput,
} from '../../contract/schedule.js';
import { ArgumentError, AuthorizationError, RecordNotFound } from '../../errors.js';
import type { Store, TurnRecord } from '../../store/types.js';
import { TURN_WORKFLOW_ID_PREFIX, TURNKIT_SCHEDULE_ID } from '../../workflows/contract.js';
import type { Runtime } from '../runtime.js';
import type { TurnRows } from '../lane/turn-rows.js';
import { taskText, writeTurnRows } from '../lane/turn-rows.js';
import { cappedLimits, definitionSigned, firingIds } from './definition.js';

const DAY_MS = 24 * 60 * 60 * 1000;

async function findTurn(store: Store, turnId: string): Promise<TurnRecord | null> {
  return store.loadTurn(turnId).catch((error: unknown) => {
    if (error instanceof RecordNotFound) return null;
    throw error;
  });
}

function digestOf(turn: TurnRecord): ScheduledTurnDigest {
  return {
    skipped: false,
    turnId: turn.id,
    conversationId: turn.conversationId,
    rootTurnId: turn.rootTurnId,
    agentName: turn.agentName,
    status: turn.status,
  };
}

/** A visibility query's string literal. */
export function queryLiteral(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/**
 * What the schedule's runs that started on the UTC day of `at` spent, their sub-agents
 * included: the turns are found by Temporal visibility (`TurnKitScheduleId`), their cost in
 * the store.
 */
async function spentOnDay(store: Store, temporal: Client, scheduleId: string, at: number): Promise<number> {
  const start = Math.floor(at / DAY_MS) * DAY_MS;
  const query = [
    `WorkflowType = 'turnWorkflow'`,
    `${TURNKIT_SCHEDULE_ID.name} = ${queryLiteral(scheduleId)}`,
    `StartTime >= '${new Date(start).toISOString()}'`,
    `StartTime < '${new Date(start + DAY_MS).toISOString()}'`,
  ].join(' AND ');
  const roots = new Set<string>();
  // A turn that continued as new is listed once per run: counted once.
  for await (const workflow of temporal.workflow.list({ query }))
    roots.add(workflow.workflowId.slice(TURN_WORKFLOW_ID_PREFIX.length));
  let spent = 0;
  for (const rootTurnId of roots) spent += (await store.budgetUsage(rootTurnId)).cost;
  return spent;
}

/** The rows of a firing: a run's (a new conversation), or an `ask`'s in the schedule's conversation. */
function rowsOf(
  definition: ScheduledTurnInput,
  ids: { turnId: string; conversationId: string },
  limits: BudgetLimits,
): TurnRows {
  const principal = definition.principal ?? null;
  const turn = {
    id: ids.turnId,
    limits,
    submit: true,
    ...(principal !== null ? { principal } : {}),
  };
  const marks = { schedule_id: definition.scheduleId };
  if (definition.conversationId !== null) {
    return {
      conversationId: definition.conversationId,
      content: [{ type: 'text', text: definition.task }],
      metadata: marks,
      turn,
    };
  }
  return {
    conversationId: ids.conversationId,
    conversation: {
      agentName: definition.agent,
      metadata: { turnkit_schedule_id: definition.scheduleId, ...(principal !== null ? { principal } : {}) },
    },
    content: [{ type: 'text', text: taskText(definition.task, undefined) }],
    metadata: { source: 'schedule', task: true, task_text: definition.task, ...marks },
    turn: { ...turn, promptMode: 'task' },
  };
}

/** The schedule's conversation still exists and belongs to its agent. */
async function checkConversation(store: Store, definition: ScheduledTurnInput, agent: Agent): Promise<void> {
  const id = definition.conversationId!;
  const conversation = await store.loadConversation(id).catch((error: unknown) => {
    if (error instanceof RecordNotFound)
      throw new ArgumentError(`schedule ${definition.scheduleId}: conversation ${id} does not exist`);
    throw error;
  });
  if (conversation.agentName !== agent.name)
    throw new ArgumentError(
      `schedule ${definition.scheduleId}: conversation ${id} belongs to agent ${conversation.agentName}, not ${agent.name}`,
    );
}

/**
 * Writes the firing's turn (submitted), or finds it when an earlier attempt did; skips the
 * firing, writing nothing, when the schedule's runs of the day have spent `maxSpendPerDay`.
 * A worker holding a signing key runs only definitions signed with it (AuthorizationError).
 */
export async function prepareScheduledTurn(
  runtime: Runtime,
  temporal: Client,
  input: PrepareScheduledTurnInput,
): Promise<ScheduledTurnDigest> {
  const { definition } = input;
  const key = runtime.signingKey;
  if (key !== undefined && !definitionSigned(key, definition))
    throw new AuthorizationError(
      `schedule ${definition.scheduleId}: its definition is not signed with this worker's signing key ` +
        '(create or update it through a client that holds the key)',
    );
  const agent = runtime.agents.resolve(definition.agent);
  const store = runtime.store;
  const ids = firingIds(input.firingId, input.firstRunId);
  const existing = await findTurn(store, ids.turnId);
  if (existing) return digestOf(existing);
  if (definition.conversationId !== null) await checkConversation(store, definition, agent);
  const perDay = definition.budget?.maxSpendPerDay;
  let remaining: number | undefined;
  if (perDay !== undefined) {
    const spent = await spentOnDay(store, temporal, definition.scheduleId, input.firedAt);
    const day = new Date(input.firedAt).toISOString().slice(0, 10);
    // Spend is observed, not reserved: a day whose runs reached the cap runs nothing more.
    if (spent >= perDay)
      return { skipped: true, reason: `spend per day reached on ${day}: ${spent} of ${perDay} USD` };
    remaining = perDay - spent;
  }
  const rows = rowsOf(definition, ids, cappedLimits(agent.limits, definition.budget, remaining));
  const turn = await store.atomic(rows.conversationId, async () => {
    // An attempt that ran beside this one (a timed-out attempt still running) wrote it first.
    const again = await findTurn(store, ids.turnId);
    return again ?? writeTurnRows(store, agent, rows);
  });
  return digestOf(turn);
}
