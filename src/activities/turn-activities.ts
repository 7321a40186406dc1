/**
 * Thin Temporal adapters over the engine. Each activity takes ids, does its I/O through the
 * store, and returns a small digest; errors are mapped onto Temporal failures on purpose.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { authorizeCancel, cancelTurn, rejectCancel } from '../engine/end/cancel.js';
import type { Claimed } from '../engine/claim/claim.js';
import { claimTurnRow } from '../engine/claim/claim.js';
import { authorizeControl } from '../engine/controls/authorize.js';
import { pauseTurn } from '../engine/controls/pause.js';
import { resumePausedTurn, resumeTurn } from '../engine/claim/resume.js';
import { steerTurn } from '../engine/controls/steer.js';
import { laneStep } from '../engine/lane/lane-step.js';
import { acceptPost } from '../engine/lane/post.js';
import type { RepairContext } from '../engine/end/repair.js';
import { repairTurns } from '../engine/end/repair.js';
import { checkLaneAhead } from '../engine/end/lane-ahead.js';
import { startOrNudgeTurn, wakeLane } from '../engine/end/workflow-start.js';
import { runCompactionStep } from '../engine/model/compact-step.js';
import { runModelStep } from '../engine/model/model-step.js';
import { runOutputAudit } from '../engine/output/audit.js';
import { finishInStep, runOutputStep } from '../engine/output/output-step.js';
import type { Runtime } from '../engine/runtime.js';
import { retryWhileStoreDown } from '../engine/step/store-outage.js';
import { failTurn } from '../engine/end/fail.js';
import { toleratingErasure } from '../store/sql/sealed-columns.js';
import { runToolCall } from '../engine/tools/tool-call.js';
import { finishToolsPhase, suspendTurn, turnStatus } from '../engine/tools/tools-phase.js';
import { StoreMismatchError, TurnKitError } from '../errors.js';
import { HeartbeatPacer } from './heartbeat.js';
import { retentionActivities } from './retention-activities.js';
import { scheduleActivities } from './schedule-activities.js';
import { waitsReady } from '../store/wait-graph.js';
import type { RetentionActivities } from '../contract/retention.js';
import type { ErasureActivities } from '../erasure/erasure-types.js';
import { erasureActivities } from './erasure-activities.js';
import type { TurnActivities, TurnSettings } from '../workflows/contract.js';
import type { OwnerInput, TurnDigest } from '../contract/digests.js';
import type { FinishRequest, ModelStepInput } from '../contract/activities.js';
import { claimTokenOf, turnWorkflowId } from '../workflows/contract.js';

/**
 * TurnKit errors become ApplicationFailures typed by class name, non-retryable unless the
 * error says a retry could help; anything else is an infrastructure failure Temporal retries.
 */
function toFailure(error: unknown): unknown {
  if (error instanceof TurnKitError) {
    return ApplicationFailure.create({
      type: error.name,
      message: error.message,
      nonRetryable: !error.retryable,
      ...(error.retryable && error.retryDelayMs !== undefined ? { nextRetryDelay: error.retryDelayMs } : {}),
      details: error.details ? [error.details] : [],
      cause: error.cause instanceof Error ? error.cause : undefined,
    });
  }
  return error;
}

/** Runs an activity body so that whatever it throws reaches Temporal through `toFailure`. */
export async function mappingFailures<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw toFailure(error);
  }
}

/**
 * Heartbeats at the pacer's period while `fn` runs, so a dead or paused worker is noticed and
 * a cancel reaches the attempt (heartbeat.ts).
 */
function withHeartbeat<T>(
  pacer: HeartbeatPacer,
  fn: (heartbeat: (details?: unknown) => void) => Promise<T>,
): Promise<T> {
  const context = Context.current();
  const heartbeat = (details?: unknown) => context.heartbeat(details);
  return pacer.run(heartbeat, () => fn(heartbeat));
}

/**
 * Repair from inside an activity: the worker's client and task queue. The workflow asking runs
 * in this namespace, so the store's workflows do: `not found` means gone (decision 33).
 */
function repairContext(runtime: Runtime, settings?: TurnSettings): RepairContext {
  const context = Context.current();
  return {
    runtime,
    temporal: context.client,
    taskQueue: context.info.taskQueue,
    settings,
    namespaceKnown: true,
  };
}

/**
 * Runs a long activity body (model, compaction, tool, audit): mapped failures, heartbeats at
 * the pacer's period, and a store outage waited out inside the attempt (decision 14) instead
 * of using up the step's own attempts.
 */
function storeOutageAware<T>(
  pacer: HeartbeatPacer,
  fn: (hooks: { signal: AbortSignal; heartbeat: (details?: unknown) => void }) => Promise<T>,
): Promise<T> {
  const signal = Context.current().cancellationSignal;
  return mappingFailures(() =>
    withHeartbeat(pacer, (heartbeat) => retryWhileStoreDown(() => fn({ signal, heartbeat }), { signal })),
  );
}

type Activities<K extends keyof TurnActivities> = Pick<TurnActivities, K>;

function laneActivities(
  runtime: Runtime,
): Activities<'laneStep' | 'wakeLanes' | 'waitsReady' | 'acceptPost'> {
  return {
    async laneStep(input) {
      return mappingFailures(async () => {
        const step = await laneStep(runtime, input.conversationId);
        const repair = repairContext(runtime, input.settings);
        // The turns the lane waits on are checked with Temporal: one whose workflow is gone
        // is failed, and its terminal write wakes this lane again (decision 33).
        if (step.busy.length > 0) await repairTurns(repair, step.busy);
        if (step.next && (await startOrNudgeTurn(repair, step.next)) === 'closed')
          await repairTurns(repair, [step.next]);
        return {
          delivered: step.delivered,
          woke: step.woke,
          started: step.next?.id ?? null,
          queued: Math.max(step.queued - (step.next ? 1 : 0), 0),
        };
      });
    },

    async wakeLanes(input) {
      return mappingFailures(async () => {
        const repair = repairContext(runtime, input.settings);
        for (const conversationId of input.conversationIds) await wakeLane(repair, conversationId);
      });
    },

    async waitsReady(input) {
      return mappingFailures(async () => ({ ready: await waitsReady(runtime.store, input.turnId) }));
    },

    acceptPost: (input) =>
      mappingFailures(() =>
        acceptPost(repairContext(runtime, input.settings), input.conversationId, input.request),
      ),
  };
}

/**
 * Claims the turn for the activity's workflow run. Only the open run of the turn's own
 * workflow, whose run id is the token, may take over a claim that an ended run (reset,
 * terminated) still holds. Refused for the lane: what blocks it is checked with Temporal
 * (decision 33). Best effort: a check that fails (the frontend unreachable) leaves the refusal
 * as it is, and the next refusal, the lane or `turnkit repair` checks again.
 */
async function claimForRun(
  runtime: Runtime,
  input: OwnerInput,
  reserveStep?: ModelStepInput,
): Promise<Claimed> {
  const run = Context.current().info.workflowExecution;
  const supersede =
    run?.workflowId === turnWorkflowId(input.turnId) && claimTokenOf(run.runId) === input.claimToken;
  const claimed = await claimTurnRow(runtime, input.turnId, input.claimToken, {
    supersede,
    ...(input.taskHistoryLength !== undefined ? { taskHistoryLength: input.taskHistoryLength } : {}),
    ...(reserveStep !== undefined ? { reserveStep } : {}),
  });
  const claim = claimed.digest;
  if (!claim.claimed && claim.reason === 'lane_busy') {
    await checkLaneAhead(repairContext(runtime), input.turnId).catch((error: unknown) =>
      Context.current().log.warn('turnkit lane check failed', {
        turnId: input.turnId,
        error: error instanceof Error ? error.message : String(error),
      }),
    );
  }
  return claimed;
}

/**
 * The model step; given `finish` (0.6), a response that ends the turn's last phase is followed
 * by the output step in this activity when nothing is left to check (decision 82).
 */
async function modelStep(runtime: Runtime, pacer: HeartbeatPacer, input: ModelStepInput, claimed?: Claimed) {
  const { attempt } = Context.current().info;
  let dispatches = 0;
  return storeOutageAware(pacer, async (hooks) => {
    // The claim's row and reservation serve the first dispatch only: a store outage reads anew.
    const first = dispatches === 0 ? claimed : undefined;
    const digest = await runModelStep(
      runtime,
      input,
      { ...hooks, retry: attempt > 1 || dispatches++ > 0 },
      first?.turn
        ? {
            turn: first.turn,
            ...(first.reserved ? { reserved: first.reserved } : {}),
            ...(first.opened ? { opened: first.opened } : {}),
          }
        : undefined,
    );
    return withFinish(runtime, input, digest);
  });
}

/** The digest with the output step's, when `finish` was asked and the step finished the turn. */
async function withFinish<D extends TurnDigest>(
  runtime: Runtime,
  input: OwnerInput & { finish?: FinishRequest },
  digest: D,
): Promise<D> {
  if (!input.finish || digest.phase !== 'output') return digest;
  const done = await finishInStep(runtime, input, input.finish);
  return done ? { ...digest, done } : digest;
}

function claimActivities(runtime: Runtime, pacer: HeartbeatPacer): Activities<'claimTurn' | 'claimStep'> {
  return {
    claimTurn: (input) => mappingFailures(async () => (await claimForRun(runtime, input)).digest),

    // The run's first step (decision 82): the claim, then the model call in the same activity,
    // which takes the claim's row, the iteration it reserved and the call it opened (decision 88).
    async claimStep(input) {
      const claimed = await mappingFailures(() =>
        retryWhileStoreDown(() => claimForRun(runtime, input, input), {
          signal: Context.current().cancellationSignal,
        }),
      );
      const claim = claimed.digest;
      if (!claim.claimed || claim.phase !== 'model' || claim.modelRoute) return { claim };
      return { claim, step: await modelStep(runtime, pacer, input, claimed) };
    },
  };
}

function modelActivities(runtime: Runtime, pacer: HeartbeatPacer): Activities<'modelStep' | 'compactStep'> {
  return {
    modelStep: (input) => modelStep(runtime, pacer, input),

    async compactStep(input) {
      return storeOutageAware(pacer, (hooks) => runCompactionStep(runtime, input, hooks));
    },
  };
}

function toolActivities(
  runtime: Runtime,
  pacer: HeartbeatPacer,
): Activities<'toolCall' | 'finishTools' | 'suspendTurn' | 'resumeTurn' | 'turnStatus'> {
  return {
    async toolCall(input) {
      // A store outage re-dispatches the call inside this attempt (a finished execution keeps
      // its result; a running one is re-run only if replay-safe) instead of failing it.
      return storeOutageAware(pacer, async (hooks) => {
        const outcome = await runToolCall(runtime, input, { ...hooks, maxAttempts: input.maxAttempts });
        // Given `finish` (0.6): a call that closed the phase into the output finishes the turn
        // (done already when its closing block made the terminal write, decision 89).
        return outcome.closed && !outcome.closed.done
          ? { ...outcome, closed: await withFinish(runtime, input, outcome.closed) }
          : outcome;
      });
    },
    finishTools: (input) => mappingFailures(() => finishToolsPhase(runtime, input)),
    suspendTurn: (input) => mappingFailures(() => suspendTurn(runtime, input)),
    resumeTurn: (input) => mappingFailures(() => resumeTurn(runtime, input)),
    turnStatus: (input) => mappingFailures(() => turnStatus(runtime, input)),
  };
}

function outputActivities(runtime: Runtime, pacer: HeartbeatPacer): Activities<'outputAudit' | 'outputStep'> {
  return {
    async outputAudit(input) {
      return storeOutageAware(pacer, async (hooks) => {
        const audit = await runOutputAudit(runtime, input, {
          signal: hooks.signal,
          heartbeat: () => hooks.heartbeat(),
        });
        // Given `finish` (0.6): the output step follows the checks in this activity.
        const done = input.finish ? await finishInStep(runtime, input, input.finish, true) : null;
        return done ? { ...audit, done } : audit;
      });
    },
    outputStep: (input) => mappingFailures(() => runOutputStep(runtime, input)),
  };
}

function endActivities(
  runtime: Runtime,
): Activities<'authorizeCancel' | 'rejectCancel' | 'cancelTurn' | 'failTurn'> {
  return {
    authorizeCancel: (input) =>
      mappingFailures(() => authorizeCancel(runtime, { ...input, use: activityUse() })),
    rejectCancel: (input) => mappingFailures(() => rejectCancel(runtime, input)),
    // A turn whose tenant was erased (decision 80) still ends: these read its erased content
    // as placeholders and write what they must as erased content.
    cancelTurn: (input) => mappingFailures(() => toleratingErasure(() => cancelTurn(runtime, input))),
    failTurn: (input) => mappingFailures(() => toleratingErasure(() => failTurn(runtime, input))),
  };
}

function controlActivities(
  runtime: Runtime,
): Activities<'authorizeControl' | 'pauseTurn' | 'resumePausedTurn' | 'steerTurn'> {
  return {
    authorizeControl: (input) =>
      mappingFailures(() => authorizeControl(runtime, { ...input, use: activityUse() })),
    pauseTurn: (input) => mappingFailures(() => pauseTurn(runtime, input)),
    resumePausedTurn: (input) => mappingFailures(() => resumePausedTurn(runtime, input)),
    steerTurn: (input) => mappingFailures(() => steerTurn(runtime, input)),
  };
}

export function createTurnActivities(
  runtime: Runtime,
  pacer: HeartbeatPacer = new HeartbeatPacer(),
): TurnActivities & RetentionActivities & ErasureActivities {
  return refusingOtherStores(runtime, {
    ...laneActivities(runtime),
    ...claimActivities(runtime, pacer),
    ...modelActivities(runtime, pacer),
    ...toolActivities(runtime, pacer),
    ...outputActivities(runtime, pacer),
    ...endActivities(runtime),
    ...controlActivities(runtime),
    ...scheduleActivities(runtime, mappingFailures),
    ...retentionActivities(runtime, mappingFailures),
    ...erasureActivities(runtime, mappingFailures),
  });
}

/**
 * Work of a turn whose rows are in another store (its id on the input, or on a lane's
 * settings) is refused, never retried, naming both stores: two stores shared a task queue,
 * and this worker would otherwise fail on rows it cannot see (decision 67).
 */
function refusingOtherStores<T extends object>(runtime: Runtime, activities: T): T {
  const own = runtime.store.identity;
  const wrapped: Record<string, (input: never) => Promise<unknown>> = {};
  for (const [name, activity] of Object.entries(activities) as [
    string,
    (input: unknown) => Promise<unknown>,
  ][]) {
    wrapped[name] = async (input: never) => {
      const given = input as { storeId?: string; turnId?: string; settings?: TurnSettings } | undefined;
      const theirs = given?.storeId ?? given?.settings?.store?.id;
      if (theirs !== undefined && theirs !== own.id) {
        const whose = given?.turnId ? `turn ${given.turnId}` : 'this work';
        const where = given?.settings?.store?.location ? ` (${given.settings.store.location})` : '';
        throw toFailure(
          new StoreMismatchError(
            `${whose} belongs to store ${theirs}${where}, but this worker (task queue ${Context.current().info.taskQueue}) ` +
              `holds store ${own.id} (${own.location}): the two stores share a task queue. Run a worker on that ` +
              `store, or give each store its own queue (unset TURNKIT_TASK_QUEUE: each store has its own by default)`,
          ),
        );
      }
      return activity(input);
    };
  }
  return wrapped as unknown as T;
}

/** This activity, across its retries: a signature it used is not a replay when it runs again. */
function activityUse(): string {
  const info = Context.current().info;
  return `${info.workflowExecution?.runId ?? '-'}/${info.activityId}`;
}
