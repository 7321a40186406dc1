/**
 * How the turn workflow calls its activities: one proxy per kind, with its timeouts and
 * retries. Whether a failure is retried is decided by the activity (`toFailure`: an error's
 * `retryable` flag), never here; how many provider or tool errors a step may see is counted by
 * the engine in the store.
 */
import type { ActivityOptions } from '@temporalio/workflow';
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import { msToNumber } from '@temporalio/common/lib/time.js';
import type { ActivitySettings, TurnActivities, TurnSettings } from './contract.js';
import { DEFAULT_TURN_SETTINGS } from './contract.js';
import type { RootDeadline } from './root-deadline.js';

/** Store steps wait out a store outage of about five minutes (a restart or failover). */
export const STORE_OUTAGE_RETRY = {
  maximumAttempts: 40,
  initialInterval: '200 milliseconds',
  maximumInterval: '10 seconds',
} as const;

/**
 * Temporal's retries of a model or tool activity. After an infrastructure fault (a worker
 * lost, a heartbeat timeout) the next attempt starts quickly on another worker; a provider
 * or tool error names its own delay (`nextRetryDelay`, from the engine's count), so it backs
 * off as before (1 s doubling to 30 s).
 */
function infrastructureRetry(settings: Required<ActivitySettings>) {
  return {
    // 0 is unbounded: the SDK's default (it refuses 0 itself).
    ...(settings.maximumAttempts > 0 ? { maximumAttempts: settings.maximumAttempts } : {}),
    initialInterval: '200 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '5 seconds',
  };
}

/** Start-to-close and schedule-to-close of one kind; the latter never cuts the former short. */
function timeouts(settings: Required<ActivitySettings>) {
  return {
    startToCloseTimeout: settings.startToCloseTimeout,
    heartbeatTimeout: settings.heartbeatTimeout,
    scheduleToCloseTimeout: Math.max(
      msToNumber(settings.scheduleToCloseTimeout),
      msToNumber(settings.startToCloseTimeout),
    ),
  };
}

/**
 * Every activity input of a turn carries its store's id, so a worker of another store (two
 * stores on one task queue) refuses the work instead of missing the turn's rows (decision 67).
 * Only the payload changes: the commands, and so replay, stay as they were.
 */
type Activity = ((input: object) => Promise<unknown>) & {
  executeWithOptions(options: object, args: [object]): Promise<unknown>;
};

function stamped<P extends object>(proxy: P, storeId: string | undefined): P {
  if (storeId === undefined) return proxy;
  return new Proxy(proxy, {
    get(target, name) {
      const activity = Reflect.get(target, name) as Activity;
      const call = (input: object) => activity({ ...input, storeId });
      call.executeWithOptions = (options: object, [input]: [object]) =>
        activity.executeWithOptions(options, [{ ...input, storeId }]);
      return call;
    },
  });
}

/**
 * A model, tool or output activity of a 0.6 run ends at the root deadline (decision 87): each
 * call is scheduled with its timeouts cut to the time left, and a timeout at the deadline
 * stops the turn as the root timer would have. Only the timeouts change, never the commands.
 */
function bounded<P extends object>(
  proxy: P,
  options: ActivityOptions,
  deadline: RootDeadline | undefined,
): P {
  if (!deadline) return proxy;
  return new Proxy(proxy, {
    get(target, name) {
      const activity = Reflect.get(target, name) as Activity;
      const execute = async (overrides: object, args: [object]) => {
        try {
          return await activity.executeWithOptions({ ...overrides, ...deadline.bound(options) }, args);
        } catch (error) {
          deadline.failed(error);
          throw error;
        }
      };
      const call = (input: object) => execute({}, [input]);
      call.executeWithOptions = execute;
      return call;
    },
  });
}

/** The turn's activities; `deadline`: a 0.6 run's, which its model, tool and output calls end at. */
export function turnActivities(settings: TurnSettings = {}, deadline?: RootDeadline) {
  const model = { ...DEFAULT_TURN_SETTINGS.model, ...settings.model };
  const tool = { ...DEFAULT_TURN_SETTINGS.tool, ...settings.tool };
  const output = { ...DEFAULT_TURN_SETTINGS.output, ...settings.output };
  const storeId = settings.store?.id;
  const proxy = (options: ActivityOptions) => stamped(proxyActivities<TurnActivities>(options), storeId);
  const ending = (options: ActivityOptions) => bounded(proxy(options), options, deadline);
  return {
    model: ending({ ...timeouts(model), retry: infrastructureRetry(model) }),
    tool: ending({ ...timeouts(tool), retry: infrastructureRetry(tool) }),
    maxProviderAttempts: settings.maxProviderAttempts ?? DEFAULT_TURN_SETTINGS.maxProviderAttempts,
    toolMaxAttempts: settings.maxToolAttempts ?? DEFAULT_TURN_SETTINGS.maxToolAttempts,
    // Output constraints and judges are user code and model calls: a scheduled activity with
    // its own timeout and heartbeat, never a short local one.
    output: ending({ ...timeouts(output), retry: infrastructureRetry(output) }),
    maxOutputAttempts: settings.maxOutputAttempts ?? DEFAULT_TURN_SETTINGS.maxOutputAttempts,
    // Failing a turn is a scheduled activity: the server runs it only for a workflow task it
    // accepted, so a stale task of this run can never fail the turn the live task runs.
    terminal: proxy({ startToCloseTimeout: '1 minute', retry: STORE_OUTAGE_RETRY }),
    // A person's control is authorized by a scheduled activity inside its Update handler: a
    // local one there runs beside the main flow's local activities, and a replay that resolves
    // both markers in one activation can order the Update's completion differently (TMPRL1100,
    // found by the fault suite). The server orders a scheduled activity's result in history.
    controls: proxy({
      startToCloseTimeout: '30 seconds',
      retry: STORE_OUTAGE_RETRY,
    }),
    // Short store transactions are local activities: no task-queue round trip per step
    // (why, with figures: docs/decisions/006-store-steps-local-activities.md).
    store: stamped(
      proxyLocalActivities<TurnActivities>({ startToCloseTimeout: '30 seconds', retry: STORE_OUTAGE_RETRY }),
      storeId,
    ),
  };
}

export type TurnActivityProxies = ReturnType<typeof turnActivities>;

/**
 * The model activity on a queue of its own (a provider's, decision 43), with the tenant's
 * fairness key and the same retries as the turn's own model proxy. No schedule-to-close
 * (decision 56): the time a call waits for the queue's rate limit counts against nothing but
 * the turn's own timeout (whose timer cancels the call, queued or running); each attempt
 * keeps its start-to-close and heartbeat timeouts.
 */
export function routedModelActivities(settings: TurnSettings = {}, taskQueue: string, fairnessKey?: string) {
  const model = { ...DEFAULT_TURN_SETTINGS.model, ...settings.model };
  const { scheduleToCloseTimeout: _queued, ...attempt } = timeouts(model);
  return stamped(
    proxyActivities<TurnActivities>({
      ...attempt,
      retry: infrastructureRetry(model),
      taskQueue,
      ...(fairnessKey ? { priority: { fairnessKey } } : {}),
    }),
    settings.store?.id,
  );
}
