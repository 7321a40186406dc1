/**
 * What an erasure (decision 78) is asked to remove, what it reports, and where it stands: the
 * state its ledger row (`turnkit_erasures`) keeps between the workflow's steps. Types and
 * constants only: the workflow bundle loads nothing from here at run time.
 */
import type { Json } from '../store/types.js';

/** Whose data goes: every conversation of a principal, or one conversation. */
export type ErasureSubject = { principal: Json } | { conversationId: string };

/** The store's row kinds an erasure removes (its report counts each). */
export type ErasedKind =
  | 'conversations'
  | 'messages'
  | 'turns'
  | 'toolExecutions'
  | 'events'
  | 'streamParts'
  | 'deliveries'
  | 'waits'
  | 'scheduleSpend'
  | 'budgetLedger';

export const ERASED_KINDS: readonly ErasedKind[] = [
  'conversations',
  'messages',
  'turns',
  'toolExecutions',
  'events',
  'streamParts',
  'deliveries',
  'waits',
  'scheduleSpend',
  'budgetLedger',
];

export interface ErasureReport {
  /** The erasure's id (its workflow is `turnkit-erase-<id>`); a dry run's is `dry-run`. */
  erasureId: string;
  dryRun: boolean;
  subject: 'principal' | 'conversation';
  /** Store rows removed (a dry run: that would be), by kind. */
  rows: Record<ErasedKind, number>;
  /**
   * Temporal workflow executions removed, by workflow id: turns, lanes and schedule firings
   * (the runs of one id, a continued-as-new chain, count once). Open ones are terminated first.
   */
  workflows: number;
  /** Temporal schedules removed. */
  schedules: number;
}

type ErasurePhase = 'schedules-plan' | 'schedules' | 'find' | 'plan' | 'stop' | 'workflows' | 'rows' | 'done';

/** Where an erasure stands (its ledger row's `state`). Ids only: never a principal. */
export interface ErasureState {
  phase: ErasurePhase;
  /** Rows per delete transaction. */
  batchSize: number;
  /** Counts every saved change: a stale step's save is refused. */
  version: number;
  /** TurnKit schedule ids still to delete (their firings with them). */
  schedules: string[];
  /** Where the walk over conversations stands (`created_at`, `id` of the last one looked at). */
  cursor: { createdAt: string; id: string } | null;
  /** The conversation whose group is being erased. */
  current: string | null;
  /** The group's conversations whose workflows, then rows, are still to remove. */
  workflowMembers: string[];
  rowMembers: string[];
}

export interface ErasureInput {
  erasureId: string;
  /** The store the erasure's ledger row is in: a worker of another store refuses the step. */
  storeId?: string;
  /** Steps one run takes before it continues as new; default 500. */
  stepsPerRun?: number;
}

export type ErasureStepResult = { done: false } | { done: true; report: ErasureReport };

export interface ErasureActivities {
  /** One bounded step of the erasure (idempotent: a retried step redoes nothing twice). */
  eraseStep(input: ErasureInput): Promise<ErasureStepResult>;
}

export function emptyErasureReport(
  erasureId: string,
  subject: ErasureSubject,
  dryRun: boolean,
): ErasureReport {
  return {
    erasureId,
    dryRun,
    subject: 'principal' in subject ? 'principal' : 'conversation',
    rows: Object.fromEntries(ERASED_KINDS.map((kind) => [kind, 0])) as Record<ErasedKind, number>,
    workflows: 0,
    schedules: 0,
  };
}
