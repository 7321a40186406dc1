/**
 * The inputs of the turn's activities and what some of them return, beside the digests
 * (digests.ts). Types only: the workflow bundle loads nothing from here at run time.
 */
import type { Json } from '../store/types.js';
import type { OutputStepDigest, OwnerInput } from './digests.js';

export interface ModelStepInput {
  turnId: string;
  claimToken: string;
  /**
   * The step key, unique per workflow run and model call (`<run>:<n>`): the unit of
   * idempotency of this activity, so a retry reuses the reservation and the stored response,
   * and a reset run never mistakes an older run's step for its own.
   */
  step: string;
  /** Provider errors this step may see before it fails the turn (default 5). */
  maxProviderAttempts?: number;
  /**
   * The workflow routes the step's models to their own queues (decision 43): a model that has
   * used up its attempts ends the activity with `ModelFallback` (its details name the next
   * model's index), and the workflow schedules the step again on that model's queue.
   */
  routed?: boolean;
  /** Check the compaction trigger first; when due, return `compactionDue` without calling the model. */
  compaction?: boolean;
  /** Release 0.6: ending in the output phase with nothing to check, the step finishes the turn. */
  finish?: FinishRequest;
}

/**
 * Release 0.6 (decision 82): the step that ends the turn's last phase makes its terminal write
 * when nothing is left to check (no output constraints or judges). `controls` is how many
 * pauses and steerings the workflow has seen authorized: when the store counted more, one was
 * authorized while the step ran and waits for the output's boundary, so the step leaves the
 * output to the workflow (`done` absent).
 */
export interface FinishRequest {
  controls: number;
}

export interface ToolCallInput {
  turnId: string;
  claimToken: string;
  toolCallId: string;
  /** A sub-agent call behind a still-waiting one: its result is appended later, in order. */
  deferResult?: boolean;
  /** A person's decision on this call, which awaits approval (from the workflow's history). */
  approval?: ApprovalDecision;
  /**
   * Whether the workflow run can wait for approvals (false for runs started before they
   * existed): without it, a call that needs approval fails unrun rather than run unapproved.
   */
  approvals?: boolean;
  /**
   * Close the tools phase in this activity when the call settles plainly and nothing can
   * follow it (decision 28): `last`, it is the response's last call; otherwise only a
   * completed terminal tool closes. Given by runs that have it (release 0.4), and only when
   * no earlier call of the pass left work for the workflow (children, joins, approvals, lanes).
   */
  close?: { last: boolean };
  /** Release 0.6: with `close`, a call that closes the phase into the output finishes the turn. */
  finish?: FinishRequest;
}

/** What a person decided on a call awaiting approval (or the approval timeout did). */
export interface ApprovalDecision {
  decision: 'approved' | 'rejected';
  principal: Json;
  note?: string;
  reason?: string;
  /** Rejected by the approval timeout, nobody having decided. */
  timedOut?: boolean;
}

export interface CompactionStepInput extends OwnerInput {
  step: string;
}

export interface CompactionDigest {
  compacted: boolean;
  /** The summary message, when one was written. */
  messageId: string | null;
}

export interface OutputAuditDigest {
  /** False when the turn was not in its output phase (nothing to audit). */
  audited: boolean;
  clean: boolean;
  violationCount: number;
  /** Release 0.6, asked with `finish`: the output step ran in this activity (decision 82). */
  done?: OutputStepDigest;
}

export interface ControlVerdict {
  allowed: boolean;
  /** The signature checked out: the principal is who the client says. */
  verified: boolean;
  reason?: string;
  /** The turn is finished already: too late for a pause or steering. */
  finished?: boolean;
  /** An allowed pause or steering: the store's count of them with this one (decision 82). */
  boundaryControls?: number;
}

export interface Steer {
  /** The Update's id: a retried step never appends the same message twice. */
  id: string;
  text: string;
  principal: Json;
}
