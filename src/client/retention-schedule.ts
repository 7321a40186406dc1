/**
 * Retention on a Temporal Schedule (decision 64): `client.scheduleRetention({ every, policy })`
 * creates a schedule whose action runs `retentionWorkflow` on the client's task queue, where
 * any TurnKit worker runs the pass against its store. Passes never overlap: a firing that
 * comes while one still runs is skipped.
 */
import type { Client, ScheduleHandle } from '@temporalio/client';
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import type { Duration } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time.js';
import { ArgumentError, ConfigError } from '../errors.js';
import type { RetentionPolicy } from '../store/retention/retention-policy.js';
import { resolveRetentionPolicy } from '../store/retention/retention-policy.js';
import type { retentionWorkflow } from '../workflows/retention-workflow.js';

export interface RetentionScheduleOptions {
  /** The Temporal schedule's id (the UI's Schedules page); default `turnkit-retention`. */
  id?: string;
  /** How often a pass runs; default every hour. */
  every?: Duration;
  policy?: RetentionPolicy;
  /** Created paused (unpause it in the UI or with the returned handle). */
  paused?: boolean;
}

const DEFAULT_RETENTION_SCHEDULE_ID = 'turnkit-retention';
const DEFAULT_EVERY_MS = 60 * 60 * 1000;

function everyMs(every: Duration | undefined): number {
  if (every === undefined) return DEFAULT_EVERY_MS;
  let ms = Number.NaN;
  try {
    ms = msToNumber(every);
  } catch {
    // Reported below.
  }
  if (!Number.isFinite(ms) || ms < 1000)
    throw new ArgumentError(
      `retention's every must be a duration of a second or more (ms or a string like '1 hour'), got ${JSON.stringify(every)}`,
    );
  return ms;
}

/** Creates the schedule; a bad option or a taken id is a typed error, and nothing is created. */
export async function createRetentionSchedule(
  temporal: Client,
  taskQueue: string,
  options: RetentionScheduleOptions = {},
): Promise<ScheduleHandle> {
  const id = options.id ?? DEFAULT_RETENTION_SCHEDULE_ID;
  if (typeof id !== 'string' || !/^[\w.-]{1,200}$/.test(id))
    throw new ArgumentError(
      `a retention schedule id is 1-200 letters, digits, '.', '_' or '-', got ${JSON.stringify(id)}`,
    );
  const interval = everyMs(options.every);
  const policy = options.policy ?? {};
  resolveRetentionPolicy(policy);
  try {
    return await temporal.schedule.create({
      scheduleId: id,
      spec: { intervals: [{ every: interval }] },
      action: {
        type: 'startWorkflow',
        workflowType: 'retentionWorkflow',
        workflowId: id,
        taskQueue,
        args: [{ policy }] as Parameters<typeof retentionWorkflow>,
        staticSummary: `TurnKit retention: ${JSON.stringify(policy)}`,
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      state: { paused: options.paused === true },
    });
  } catch (error) {
    if (error instanceof ScheduleAlreadyRunning)
      throw new ConfigError(`a schedule ${id} already exists: delete it first, or pass another id`, {
        cause: error,
      });
    throw error;
  }
}
