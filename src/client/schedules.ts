/**
 * Scheduled agents on Temporal Schedules (issue 31): `client.schedule(agent, task, options)`
 * creates a Temporal Schedule (`turnkit-schedule-<id>`) whose action is the firing workflow;
 * each firing writes an ordinary turn and runs it as its child (scheduled-turn-workflow.ts).
 * The schedule's definition is its action's argument, signed with the client's key.
 */
import type { Client, ScheduleDescription, ScheduleSpec } from '@temporalio/client';
import { isGrpcServiceError, ScheduleAlreadyRunning, ScheduleNotFoundError } from '@temporalio/client';
import type { Duration } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time.js';
import type { Agent } from '../agents/agent.js';
import type { ScheduleBudget, ScheduledTurnInput, ScheduleOverlap } from '../contract/schedule.js';
import { asSent } from '../engine/controls/principal-signature.js';
import { checkBudget, checkOverlap, checkScheduleId, signDefinition } from '../engine/schedule/definition.js';
import { queryLiteral } from '../engine/schedule/firing.js';
import { ArgumentError, RecordNotFound } from '../errors.js';
import type { Json, Store } from '../store/types.js';
import type { TurnSettings } from '../workflows/contract.js';
import {
  SCHEDULE_ID_PREFIX,
  TURN_WORKFLOW_ID_PREFIX,
  TURNKIT_AGENT,
  TURNKIT_SCHEDULE_ID,
} from '../workflows/contract.js';
import type { scheduledTurnWorkflow } from '../workflows/scheduled-turn-workflow.js';
import type { RunHandle } from './run-handle.js';

export type { ScheduleBudget, ScheduleOverlap } from '../contract/schedule.js';

/** When a schedule fires, and what each firing does. */
export interface ScheduleOptions {
  /** The schedule's id: letters, digits, `.`, `_`, `-` (Temporal's schedule is `turnkit-schedule-<id>`). */
  id: string;
  /** A cron expression as Temporal reads it (5–7 fields, `@daily`, `CRON_TZ=…`); or `every`. */
  cron?: string;
  /** An interval (at least a second): milliseconds or a duration string (`'15 minutes'`, `'1h'`). */
  every?: Duration;
  /** `'new'` (the default): a new conversation per firing; or the id of one each firing posts into. */
  conversation?: string;
  /** While the previous firing's turn still works: `skip` (default), `buffer_one`, `cancel_other`, `allow_all`. */
  overlap?: ScheduleOverlap;
  /** How late a firing missed during an outage may still be taken (Temporal's default: 1 year). */
  catchupWindow?: Duration;
  /** Caps of each run (the tighter of these and the agent's) and the spend per UTC day. */
  budget?: ScheduleBudget;
  /** The principal every firing's turn runs as. */
  principal?: Json;
  /** Create the schedule paused. */
  paused?: boolean;
}

/** What `update` may change (the agent and the id stay). */
export type ScheduleChanges = Partial<Omit<ScheduleOptions, 'id' | 'paused'>> & { task?: string };

/** A schedule as Temporal holds it. */
export interface ScheduleInfo {
  id: string;
  agent: string;
  task: string;
  cron: string | null;
  everyMs: number | null;
  conversation: string;
  overlap: ScheduleOverlap;
  catchupWindowMs: number;
  budget: ScheduleBudget | null;
  principal: Json;
  paused: boolean;
  note: string | null;
  nextRunAt: Date[];
  /** Firing workflows recently started (oldest first) and those still running. */
  recentFirings: { workflowId: string; scheduledAt: Date; takenAt: Date }[];
  runningFirings: string[];
  firings: number;
  skippedOverlap: number;
}

/** A line of `listSchedules()`. */
export interface ScheduleSummary {
  id: string;
  agent: string;
  paused: boolean;
  note: string | null;
  nextRunAt: Date | null;
  lastFiredAt: Date | null;
}

/** What schedules need of the client. */
export interface ScheduleDeps {
  temporal: Client;
  store: Store;
  taskQueue: string;
  settings: TurnSettings | undefined;
  signingKey: string | Buffer | undefined;
  agent(name: string): Agent;
  handle(turnId: string): Promise<RunHandle>;
}

const FIRING_WORKFLOW = 'scheduledTurnWorkflow';

function checkTask(task: unknown): string {
  if (typeof task !== 'string' || task.trim() === '')
    throw new ArgumentError('a schedule needs a non-empty task');
  return task;
}

function duration(what: string, value: Duration): number {
  let ms: number;
  try {
    ms = msToNumber(value);
  } catch {
    ms = Number.NaN;
  }
  if (!Number.isFinite(ms) || ms <= 0)
    throw new ArgumentError(
      `${what} must be a positive duration (ms or a string like '15 minutes'), got ${JSON.stringify(value)}`,
    );
  return ms;
}

/** The timing: exactly one of `cron` and `every`. */
function timingOf(options: { cron?: string; every?: Duration }): {
  spec: ScheduleSpec;
  timing: ScheduledTurnInput['timing'];
} {
  if ((options.cron === undefined) === (options.every === undefined))
    throw new ArgumentError('a schedule needs exactly one of cron and every');
  if (options.cron !== undefined) {
    if (typeof options.cron !== 'string' || options.cron.trim() === '')
      throw new ArgumentError('cron must be a non-empty cron expression');
    return { spec: { cronExpressions: [options.cron] }, timing: { cron: options.cron } };
  }
  const everyMs = duration('every', options.every!);
  if (everyMs < 1000) throw new ArgumentError('every must be at least one second');
  return { spec: { intervals: [{ every: everyMs }] }, timing: { everyMs } };
}

/** `'new'` or an existing conversation of the schedule's agent. */
async function conversationOf(store: Store, agent: Agent, conversation: unknown): Promise<string | null> {
  if (conversation === undefined || conversation === 'new') return null;
  if (typeof conversation !== 'string' || conversation === '')
    throw new ArgumentError(`conversation must be 'new' or a conversation id`);
  const record = await store.loadConversation(conversation).catch((error: unknown) => {
    if (error instanceof RecordNotFound)
      throw new ArgumentError(`conversation ${conversation} does not exist`);
    throw error;
  });
  if (record.agentName !== agent.name)
    throw new ArgumentError(
      `conversation ${conversation} belongs to agent ${record.agentName}, not ${agent.name}`,
    );
  return conversation;
}

/** What Temporal answered to a create or an update, as TurnKit's typed errors. */
function scheduleError(id: string, error: unknown): unknown {
  if (error instanceof ScheduleAlreadyRunning)
    return new ArgumentError(`schedule ${id} exists already (delete it first, or update it)`, {
      details: { scheduleId: id, reason: 'exists' },
    });
  if (error instanceof ScheduleNotFoundError)
    return new ArgumentError(`no schedule ${id}`, { details: { scheduleId: id, reason: 'not_found' } });
  // The SDK raises TypeError for "Invalid schedule spec"; other refusals are INVALID_ARGUMENT.
  const cause = error instanceof Error ? error.cause : undefined;
  if (error instanceof TypeError || (isGrpcServiceError(cause) && cause.code === 3))
    return new ArgumentError(`schedule ${id}: Temporal refuses it: ${(error as Error).message}`, {
      cause: error,
      details: { scheduleId: id, reason: 'invalid' },
    });
  return error;
}

/** The firing workflow's start: its definition, task queue, UI summary and search attributes. */
function actionOf(deps: ScheduleDeps, definition: ScheduledTurnInput) {
  const head = definition.task.replace(/\s+/g, ' ').trim().slice(0, 100);
  return {
    type: 'startWorkflow' as const,
    workflowType: FIRING_WORKFLOW,
    workflowId: `${SCHEDULE_ID_PREFIX}${definition.scheduleId}`,
    taskQueue: deps.taskQueue,
    args: [definition] as Parameters<typeof scheduledTurnWorkflow>,
    staticSummary: `schedule ${definition.scheduleId}: ${definition.agent}: ${head}`,
    typedSearchAttributes: [
      { key: TURNKIT_AGENT, value: definition.agent },
      { key: TURNKIT_SCHEDULE_ID, value: definition.scheduleId },
    ],
  };
}

/** Creates the schedule; a bad option, an unknown agent or a taken id is a typed error, and nothing is created. */
export async function createSchedule(
  deps: ScheduleDeps,
  agentName: string,
  task: string,
  options: ScheduleOptions,
): Promise<ScheduleHandle> {
  if (!options || typeof options !== 'object') throw new ArgumentError('schedule needs options with an id');
  const id = checkScheduleId(options.id);
  const agent = deps.agent(agentName);
  const { spec, timing } = timingOf(options);
  const overlap = checkOverlap(options.overlap);
  const catchupWindow =
    options.catchupWindow === undefined ? undefined : duration('catchupWindow', options.catchupWindow);
  const budget = checkBudget(options.budget);
  const definition = signDefinition(deps.signingKey, {
    scheduleId: id,
    agent: agent.name,
    task: checkTask(task),
    conversationId: await conversationOf(deps.store, agent, options.conversation),
    principal: asSent(options.principal ?? null),
    ...(budget ? { budget } : {}),
    ...(deps.settings ? { settings: deps.settings } : {}),
    timing,
  });
  try {
    await deps.temporal.schedule.create({
      scheduleId: `${SCHEDULE_ID_PREFIX}${id}`,
      spec,
      action: actionOf(deps, definition),
      policies: {
        overlap: overlap.toUpperCase() as Uppercase<ScheduleOverlap>,
        ...(catchupWindow !== undefined ? { catchupWindow } : {}),
      },
      typedSearchAttributes: [
        { key: TURNKIT_AGENT, value: agent.name },
        { key: TURNKIT_SCHEDULE_ID, value: id },
      ],
      state: { paused: options.paused === true, ...(options.paused ? { note: 'created paused' } : {}) },
    });
  } catch (error) {
    throw scheduleError(id, error);
  }
  return new ScheduleHandle(deps, id);
}

/** TurnKit's schedules (firing workflow type), from Temporal's list (eventually consistent). */
export async function listSchedules(temporal: Client): Promise<ScheduleSummary[]> {
  const found: ScheduleSummary[] = [];
  for await (const schedule of temporal.schedule.list()) {
    if (schedule.action?.workflowType !== FIRING_WORKFLOW) continue;
    if (!schedule.scheduleId.startsWith(SCHEDULE_ID_PREFIX)) continue;
    const recent = schedule.info.recentActions.at(-1);
    found.push({
      id: schedule.scheduleId.slice(SCHEDULE_ID_PREFIX.length),
      agent: schedule.typedSearchAttributes?.get(TURNKIT_AGENT) ?? '',
      paused: schedule.state.paused,
      note: schedule.state.note ?? null,
      nextRunAt: schedule.info.nextActionTimes[0] ?? null,
      lastFiredAt: recent?.takenAt ?? null,
    });
  }
  return found.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** The definition a schedule's action carries (what `describe` and `update` start from). */
function definitionOf(id: string, described: ScheduleDescription): ScheduledTurnInput {
  const definition = described.action.args?.[0] as ScheduledTurnInput | undefined;
  if (described.action.workflowType !== FIRING_WORKFLOW || !definition)
    throw new ArgumentError(`${SCHEDULE_ID_PREFIX}${id} is not a TurnKit schedule`);
  return definition;
}

/** A TurnKit schedule: pause, unpause, trigger, update, delete, and the turns it ran. */
export class ScheduleHandle {
  constructor(
    private readonly deps: ScheduleDeps,
    readonly id: string,
  ) {}

  /** Temporal's schedule id (`temporal schedule describe --schedule-id …`, the UI's Schedules page). */
  get scheduleId(): string {
    return `${SCHEDULE_ID_PREFIX}${this.id}`;
  }

  get #temporal() {
    return this.deps.temporal.schedule.getHandle(this.scheduleId);
  }

  async #call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw scheduleError(this.id, error);
    }
  }

  async describe(): Promise<ScheduleInfo> {
    const described = await this.#call(() => this.#temporal.describe());
    const definition = definitionOf(this.id, described);
    const timing = definition.timing;
    return {
      id: this.id,
      agent: definition.agent,
      task: definition.task,
      cron: timing && 'cron' in timing ? timing.cron : null,
      everyMs: timing && 'everyMs' in timing ? timing.everyMs : null,
      conversation: definition.conversationId ?? 'new',
      overlap: (described.policies.overlap ?? 'SKIP').toLowerCase() as ScheduleOverlap,
      catchupWindowMs: described.policies.catchupWindow,
      budget: definition.budget ?? null,
      principal: definition.principal ?? null,
      paused: described.state.paused,
      note: described.state.note ?? null,
      nextRunAt: described.info.nextActionTimes,
      recentFirings: described.info.recentActions.map((action) => ({
        workflowId: action.action.workflow.workflowId,
        scheduledAt: action.scheduledAt,
        takenAt: action.takenAt,
      })),
      runningFirings: described.info.runningActions.map((action) => action.workflow.workflowId),
      firings: described.info.numActionsTaken,
      skippedOverlap: described.info.numActionsSkippedOverlap,
    };
  }

  pause(note = 'paused through TurnKit'): Promise<void> {
    return this.#call(() => this.#temporal.pause(note));
  }

  unpause(note = 'unpaused through TurnKit'): Promise<void> {
    return this.#call(() => this.#temporal.unpause(note));
  }

  /** Fires now, under the schedule's own overlap policy (Temporal's trigger would allow all). */
  async trigger(): Promise<void> {
    const described = await this.#call(() => this.#temporal.describe());
    await this.#call(() => this.#temporal.trigger(described.policies.overlap ?? 'SKIP'));
  }

  delete(): Promise<void> {
    return this.#call(() => this.#temporal.delete());
  }

  /** Changes the task, timing, conversation, overlap, catch-up window, budget or principal. */
  async update(changes: ScheduleChanges): Promise<void> {
    if (!changes || typeof changes !== 'object') throw new ArgumentError('update needs the changes');
    const described = await this.#call(() => this.#temporal.describe());
    const old = definitionOf(this.id, described);
    const agent = this.deps.agent(old.agent);
    const timed = changes.cron !== undefined || changes.every !== undefined ? timingOf(changes) : null;
    const overlap = changes.overlap !== undefined ? checkOverlap(changes.overlap) : null;
    const catchupWindow =
      changes.catchupWindow !== undefined ? duration('catchupWindow', changes.catchupWindow) : null;
    const budget = changes.budget !== undefined ? checkBudget(changes.budget) : old.budget;
    const { mac: _old, ...unsigned } = old;
    const definition = signDefinition(this.deps.signingKey, {
      ...unsigned,
      task: changes.task !== undefined ? checkTask(changes.task) : old.task,
      conversationId:
        changes.conversation !== undefined
          ? await conversationOf(this.deps.store, agent, changes.conversation)
          : old.conversationId,
      principal: changes.principal !== undefined ? asSent(changes.principal) : old.principal,
      ...(budget ? { budget } : {}),
      ...(timed ? { timing: timed.timing } : {}),
    });
    if (!budget) delete definition.budget;
    await this.#call(() =>
      this.#temporal.update((previous) => ({
        ...previous,
        spec: timed ? timed.spec : previous.spec,
        action: actionOf(this.deps, definition),
        policies: {
          ...previous.policies,
          ...(overlap ? { overlap: overlap.toUpperCase() as Uppercase<ScheduleOverlap> } : {}),
          ...(catchupWindow !== null ? { catchupWindow } : {}),
        },
        state: {
          paused: previous.state.paused,
          ...(previous.state.note ? { note: previous.state.note } : {}),
        },
      })),
    );
  }

  /** The turns this schedule's firings ran, newest first (Temporal visibility, eventually consistent). */
  async runs(options: { limit?: number } = {}): Promise<RunHandle[]> {
    const limit = options.limit ?? 20;
    if (!Number.isInteger(limit) || limit < 1) throw new ArgumentError('limit must be a positive integer');
    const query = [
      `WorkflowType = 'turnWorkflow'`,
      `${TURNKIT_SCHEDULE_ID.name} = ${queryLiteral(this.id)}`,
      `ExecutionStatus != 'ContinuedAsNew'`,
    ].join(' AND ');
    const runs: RunHandle[] = [];
    for await (const workflow of this.deps.temporal.workflow.list({ query, pageSize: limit })) {
      const turnId = workflow.workflowId.slice(TURN_WORKFLOW_ID_PREFIX.length);
      const handle = await this.deps.handle(turnId).catch((error: unknown) => {
        if (error instanceof RecordNotFound) return null;
        throw error;
      });
      if (handle) runs.push(handle);
      if (runs.length >= limit) break;
    }
    return runs;
  }
}
