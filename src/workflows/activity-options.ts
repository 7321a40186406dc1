/**
 * How the turn workflow calls its activities: one proxy per kind, with its timeouts and
 * retries. Whether a failure is retried is decided by the activity (`toFailure`: an error's
 * `retryable` flag), never here.
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { TurnActivities, TurnSettings } from './contract.js';
import { DEFAULT_TURN_SETTINGS } from './contract.js';

/** Store steps wait out a store outage of about five minutes (a restart or failover). */
const STORE_OUTAGE_RETRY = {
  maximumAttempts: 40,
  initialInterval: '200 milliseconds',
  maximumInterval: '10 seconds',
} as const;

export function turnActivities(settings: TurnSettings = {}) {
  const model = { ...DEFAULT_TURN_SETTINGS.model, ...settings.model };
  const tool = { ...DEFAULT_TURN_SETTINGS.tool, ...settings.tool };
  const output = { ...DEFAULT_TURN_SETTINGS.output, ...settings.output };
  return {
    model: proxyActivities<TurnActivities>({
      startToCloseTimeout: model.startToCloseTimeout,
      heartbeatTimeout: model.heartbeatTimeout,
      retry: {
        maximumAttempts: model.maximumAttempts,
        initialInterval: '1 second',
        maximumInterval: '30 seconds',
      },
    }),
    tool: proxyActivities<TurnActivities>({
      startToCloseTimeout: tool.startToCloseTimeout,
      heartbeatTimeout: tool.heartbeatTimeout,
      retry: { maximumAttempts: tool.maximumAttempts, initialInterval: '1 second' },
    }),
    toolMaxAttempts: tool.maximumAttempts,
    // Output constraints and judges are user code and model calls: a scheduled activity with
    // its own timeout and heartbeat, never a short local one.
    output: proxyActivities<TurnActivities>({
      startToCloseTimeout: output.startToCloseTimeout,
      heartbeatTimeout: output.heartbeatTimeout,
      retry: { maximumAttempts: output.maximumAttempts, initialInterval: '1 second' },
    }),
    // Failing a turn is a scheduled activity: the server runs it only for a workflow task it
    // accepted, so a stale task of this run can never fail the turn the live task runs.
    terminal: proxyActivities<TurnActivities>({ startToCloseTimeout: '1 minute', retry: STORE_OUTAGE_RETRY }),
    // Short store transactions are local activities: no task-queue round trip per step
    // (why, with figures: docs/architecture.md, decision 6).
    store: proxyLocalActivities<TurnActivities>({
      startToCloseTimeout: '30 seconds',
      retry: STORE_OUTAGE_RETRY,
    }),
  };
}

export type TurnActivityProxies = ReturnType<typeof turnActivities>;
