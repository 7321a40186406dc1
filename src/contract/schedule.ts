/**
 * Scheduled agents (issue 31): what a Temporal Schedule's action carries to its firing
 * workflow, what the firing's activity returns, and the overlap policies. Types and constants
 * only: the workflow bundle loads this.
 */
import type { Json } from '../store/types.js';
import type { TurnSettings } from '../workflows/contract.js';

/**
 * What a firing does while the schedule's previous firing still works (its turn is not
 * finished): Temporal's SKIP, BUFFER_ONE, CANCEL_OTHER and ALLOW_ALL.
 */
export const SCHEDULE_OVERLAPS = ['skip', 'buffer_one', 'cancel_other', 'allow_all'] as const;
export type ScheduleOverlap = (typeof SCHEDULE_OVERLAPS)[number];

/**
 * A schedule's budget: each limit caps every run (the tighter of it and the agent's own);
 * `maxSpendPerDay` caps what the schedule's runs spend in one UTC day: a firing on a day
 * whose spend has reached it runs nothing, and a run's `maxSpend` is at most what is left.
 */
export interface ScheduleBudget {
  maxSpend?: number;
  maxIterations?: number;
  maxToolExecutions?: number;
  /** Seconds of wall clock from submission. */
  timeout?: number;
  maxSpendPerDay?: number;
}

/**
 * The schedule's definition as its action's argument: every firing gets it. Signed (`mac`)
 * by a client that holds the signing key, so that a worker holding it runs only definitions
 * a client wrote, never one edited through Temporal.
 */
export interface ScheduledTurnInput {
  /** The TurnKit schedule id (Temporal's is `turnkit-schedule-<id>`). */
  scheduleId: string;
  agent: string;
  task: string;
  /** An existing conversation every firing posts into, or null: a new one per firing. */
  conversationId: string | null;
  principal: Json;
  budget?: ScheduleBudget;
  settings?: TurnSettings;
  /** The timing as the client was given it, for `describe` (Temporal keeps a cron compiled). */
  timing?: { cron: string } | { everyMs: number };
  /** HMAC-SHA256 (base64url) of the definition with the signing key; null when unsigned. */
  mac: string | null;
}

/** The firing's activity input: the definition and who fires (the workflow's id and start). */
export interface PrepareScheduledTurnInput {
  definition: ScheduledTurnInput;
  /**
   * The firing workflow's id (Temporal appends the firing's time to the schedule's) and its
   * first run's id: the identity the turn's ids derive from.
   */
  firingId: string;
  firstRunId: string;
  /** When the firing workflow started (ms since the epoch): the day its spend counts on. */
  firedAt: number;
}

/** What the firing's activity wrote (or found, on a retry), or why it wrote nothing. */
export type ScheduledTurnDigest =
  | {
      skipped: false;
      turnId: string;
      conversationId: string;
      rootTurnId: string;
      agentName: string;
      status: string;
    }
  | { skipped: true; reason: string };

/** What a firing workflow returns: its turn and how it ended, or why nothing ran. */
export interface ScheduledTurnResult {
  turnId: string | null;
  status: string;
  skipped?: string;
}
