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
import { TERMINAL_TURN_STATUSES } from '../../store/types.js';
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
 * What the schedule's runs of the UTC day of `at` spent before reservations were kept (turns
 * found by Temporal visibility, `TurnKitScheduleId`), their sub-agents included: the roots
 * that have no reservation row, with their cost in the store.
 */
async function unreservedRoots(temporal: Client, scheduleId: string, at: number): Promise<Set<string>> {
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
  return roots;
}

/**
 * What the day holds against the cap (under the schedule's lock): a finished run its spend; a
 * run still working the larger of its spend and its reservation (its cap when written), so
 * firings at the same moment share the cap; a run from before reservations its spend.
 */
async function committedOnDay(
  store: Store,
  scheduleId: string,
  day: string,
  legacy: ReadonlySet<string>,
): Promise<number> {
  const reserved = new Map(
    (await store.listScheduleSpend(scheduleId, day)).map((row) => [row.rootTurnId, row.reserved]),
  );
  let committed = 0;
  for (const rootTurnId of new Set([...reserved.keys(), ...legacy])) {
    const spent = (await store.budgetUsage(rootTurnId)).cost;
    const root = await findTurn(store, rootTurnId);
    const open = root !== null && !TERMINAL_TURN_STATUSES.includes(root.status);
    committed += open ? Math.max(spent, reserved.get(rootTurnId) ?? 0) : spent;
  }
  return committed;
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
 * firing, writing nothing, when the schedule's runs of the day have spent or reserved
 * `maxSpendPerDay`. Each firing reserves what it may spend (its cap, the day's remainder at
 * most) with its turn, under the schedule's lock: firings at the same moment share the cap.
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
  if (perDay === undefined) {
    const rows = rowsOf(definition, ids, cappedLimits(agent.limits, definition.budget));
    return digestOf(await writeOnce(store, agent, rows, ids.turnId));
  }
  // Runs from before reservations were kept are found by visibility, outside the lock.
  const legacy = await unreservedRoots(temporal, definition.scheduleId, input.firedAt);
  const day = new Date(input.firedAt).toISOString().slice(0, 10);
  // One firing of the schedule at a time reads the day and reserves its share of it.
  return store.atomic(`schedule:${definition.scheduleId}`, async (): Promise<ScheduledTurnDigest> => {
    const again = await findTurn(store, ids.turnId);
    if (again) return digestOf(again);
    const committed = await committedOnDay(store, definition.scheduleId, day, legacy);
    if (committed >= perDay)
      return {
        skipped: true,
        reason: `spend per day reached on ${day}: ${round(committed)} of ${perDay} USD`,
      };
    const remaining = round(perDay - committed);
    const limits = cappedLimits(agent.limits, definition.budget, remaining);
    const turn = await writeOnce(store, agent, rowsOf(definition, ids, limits), ids.turnId);
    await store.reserveScheduleSpend({
      scheduleId: definition.scheduleId,
      day,
      rootTurnId: turn.id,
      reserved: limits.maxSpend ?? remaining,
    });
    return digestOf(turn);
  });
}

/** Sums of costs in USD, shown to the micro-dollar (the store's precision). */
const round = (usd: number) => Math.round(usd * 1e6) / 1e6;

/** The firing's rows, or the turn an attempt that ran beside this one (timed out, still running) wrote. */
async function writeOnce(store: Store, agent: Agent, rows: TurnRows, turnId: string): Promise<TurnRecord> {
  return store.atomic(rows.conversationId, async () => {
    const again = await findTurn(store, turnId);
    return again ?? writeTurnRows(store, agent, rows);
  });
}
