/**
 * A person in the loop, on the workflow side: the Updates `approve`, `reject`, `pause`,
 * `resume` and `steer`, their validators (what the workflow already knows: the payload, the
 * call, the turn's state), and the control boundaries where the turn pauses or takes steering.
 * Authorization needs the policy and the signing key, which never enter history, so it runs
 * in a scheduled activity inside each handler; a refusal there fails the Update with a typed error.
 * Waiting (for a decision, or paused) is a workflow condition: no worker, no activity held.
 */
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  currentUpdateInfo,
  setHandler,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { ControlAction, ControlRequest } from '../contract/control-request.js';
import { APPROVAL_TIMED_OUT, parseControlRequest } from '../contract/control-request.js';
import type { ApprovalResult, ControlState, TurnContinuation } from './contract.js';
import {
  approveUpdate,
  controlStateQuery,
  pauseUpdate,
  rejectUpdate,
  resumeUpdate,
  steerUpdate,
  TURNKIT_STATUS,
} from './contract.js';
import type { TurnRun } from './turn-run.js';
import { runStoreStep } from './turn-run.js';
import type { ApprovalDecision, Steer } from '../contract/activities.js';
import type { TurnDigest } from '../contract/digests.js';

/** What this run knows of a person's controls. Lives in workflow memory, rebuilt by replay. */
export class TurnControls {
  pauseRequested = false;
  paused = false;
  /** Set once the turn's work is over (ended, or a cancel was accepted): controls are refused. */
  finished = false;
  /**
   * Set when the turn commits to its output (checks and output step): no boundary is left, so
   * a pause or steering is refused (`too_late`) instead of being acknowledged and dropped.
   */
  finishing = false;
  /** Accepted steering, written at the next boundary. */
  steers: Steer[] = [];
  /** Pause and steer Updates accepted and still being authorized: the output waits for them. */
  authorizing = 0;
  /** Decisions by tool-call id, never forgotten (a second decision is refused). */
  readonly decisions = new Map<string, ApprovalDecision>();
  /** Calls whose decision is being authorized right now. */
  readonly deciding = new Set<string>();
  /** Calls of the tools phase being dispatched. */
  phaseCalls = new Set<string>();
  /** Calls known to await a decision, and calls known not to (they ran, or were closed). */
  readonly awaiting = new Set<string>();
  readonly settled = new Set<string>();
  readonly #timers = new Set<string>();
  /** When each approval timeout fires (ms since the epoch): a continued run keeps them. */
  readonly #deadlines = new Map<string, number>();
  /** Calls whose approval timeout fired while a person's decision was being authorized. */
  readonly #expired = new Set<string>();

  /** On a continued run, with what its predecessor accepted and had not applied yet. */
  constructor(continued?: TurnContinuation) {
    if (!continued) return;
    this.pauseRequested = continued.pauseRequested;
    this.steers = [...continued.steers];
    for (const [id, decision] of continued.decisions) this.decisions.set(id, decision);
    for (const [id, at] of continued.approvalDeadlines) this.#deadlines.set(id, at);
  }

  /** What the next run needs of these controls (continue-as-new). */
  handOver(): Pick<TurnContinuation, 'pauseRequested' | 'steers' | 'decisions' | 'approvalDeadlines'> {
    const open = (id: string) => this.awaiting.has(id) && !this.decisions.has(id);
    return {
      pauseRequested: this.pauseRequested,
      steers: [...this.steers],
      decisions: [...this.decisions].filter(([id]) => this.awaiting.has(id)),
      approvalDeadlines: [...this.#deadlines].filter(([id]) => open(id)),
    };
  }

  state(): ControlState {
    return {
      pauseRequested: this.pauseRequested,
      paused: this.paused,
      awaitingApproval: [...this.awaiting].filter((id) => !this.decisions.has(id)),
      pendingSteers: this.steers.length,
      finishing: this.finishing,
      finished: this.finished,
    };
  }

  /** The dispatch of `id` came back awaiting a decision; the approval timeout starts once. */
  noteAwaiting(id: string, timeoutMs: number | null | undefined): void {
    this.awaiting.add(id);
    if (!timeoutMs || this.#timers.has(id)) return;
    this.#timers.add(id);
    // A deadline handed over by the run this one continued stands: the wait does not restart.
    const at = this.#deadlines.get(id) ?? Date.now() + timeoutMs;
    this.#deadlines.set(id, at);
    const left = Math.max(at - Date.now(), 1);
    // A durable timer; cancelled with the turn's scope (then nothing is decided). A decision
    // accepted before it fired and still being authorized goes first: its event is already
    // written, so the timeout applies only if that decision is refused (`decisionDone`).
    sleep(left).then(
      () => {
        if (this.deciding.has(id)) this.#expired.add(id);
        else this.#timeOut(id);
      },
      () => undefined,
    );
  }

  #timeOut(id: string): void {
    if (this.decisions.has(id)) return;
    this.decisions.set(id, {
      decision: 'rejected',
      principal: null,
      reason: APPROVAL_TIMED_OUT,
      timedOut: true,
    });
  }

  /** A person's decision on `id` was set, or refused: a timeout that fired meanwhile applies now. */
  decisionDone(id: string): void {
    this.deciding.delete(id);
    if (this.#expired.delete(id)) this.#timeOut(id);
  }

  noteSettled(id: string): void {
    this.awaiting.delete(id);
    this.settled.add(id);
  }
}

function refuse(
  type: 'ArgumentError' | 'ControlError' | 'AuthorizationError',
  message: string,
  code: string,
): never {
  throw ApplicationFailure.create({ type, message, nonRetryable: true, details: [{ code }] });
}

/** Registers the Updates and the `controlState` query on this run. */
export function registerControls(run: TurnRun, controls: TurnControls, shield?: CancellationScope): void {
  // On 0.5 runs a handler runs shielded from Temporal's own cancellation, which the cancel
  // policy may refuse (turn-workflow.ts): the turn then goes on, and so do its controls.
  const shielded =
    <R>(handler: (payload: unknown) => Promise<R>) =>
    (payload: unknown): Promise<R> =>
      shield ? shield.run(() => handler(payload)) : handler(payload);
  const parse = (action: ControlAction, payload: unknown): ControlRequest => {
    const parsed = parseControlRequest(action, payload);
    if (!parsed.ok) refuse('ArgumentError', parsed.reason, 'malformed');
    if (controls.finished) refuse('ControlError', `turn ${run.turnId} is finished`, 'finished');
    return parsed.value;
  };
  const authorize = async (request: ControlRequest) => {
    const verdict = await CancellationScope.nonCancellable(() =>
      run.activities.controls.authorizeControl.executeWithOptions(
        { summary: `authorize ${request.action}` },
        [{ turnId: run.turnId, request }],
      ),
    );
    if (!verdict.allowed)
      refuse('AuthorizationError', verdict.reason ?? `not authorized to ${request.action}`, 'denied');
    return verdict;
  };

  const checkCall = (request: ControlRequest) => {
    const id = request.toolCallId!;
    if (controls.decisions.has(id) || controls.deciding.has(id))
      refuse('ControlError', `tool call ${id} is already decided`, 'decided');
    if (controls.settled.has(id))
      refuse('ControlError', `tool call ${id} is not awaiting approval`, 'not_awaiting');
    if (!controls.phaseCalls.has(id))
      refuse('ControlError', `turn ${run.turnId} has no tool call ${id} awaiting approval`, 'unknown_call');
    return id;
  };
  const decide =
    (decision: 'approved' | 'rejected') =>
    async (payload: unknown): Promise<ApprovalResult> => {
      const request = parse(decision === 'approved' ? 'approve' : 'reject', payload);
      const id = checkCall(request);
      controls.deciding.add(id);
      try {
        // Its dispatch may still be on its way back: wait until the workflow knows the call's state.
        await condition(
          () =>
            controls.awaiting.has(id) ||
            controls.settled.has(id) ||
            controls.finished ||
            !controls.phaseCalls.has(id),
        );
        if (controls.finished) refuse('ControlError', `turn ${run.turnId} is finished`, 'finished');
        if (!controls.awaiting.has(id))
          refuse('ControlError', `tool call ${id} is not awaiting approval`, 'not_awaiting');
        const verdict = await authorize(request);
        // Nothing else decides the call while it is in `deciding` (the approval timeout waits).
        controls.decisions.set(id, {
          decision,
          principal: request.principal,
          ...(request.note !== undefined ? { note: request.note } : {}),
          ...(request.reason !== undefined ? { reason: request.reason } : {}),
        });
        return { toolCallId: id, decision, verified: verdict.verified };
      } finally {
        controls.decisionDone(id);
      }
    };
  setHandler(approveUpdate, shielded(decide('approved')), {
    validator: (payload) => void checkCall(parse('approve', payload)),
  });
  setHandler(rejectUpdate, shielded(decide('rejected')), {
    validator: (payload) => void checkCall(parse('reject', payload)),
  });

  // Pause and steer act at a boundary; once the turn committed to its output there is none.
  const tooLate = (action: ControlAction) => {
    if (controls.finishing)
      refuse('ControlError', `turn ${run.turnId} is finishing: too late to ${action}`, 'too_late');
  };
  /** Authorizes a pause or steer; the output waits until every one accepted before it is done. */
  const authorizeBoundary = async (request: ControlRequest) => {
    tooLate(request.action);
    controls.authorizing += 1;
    try {
      await authorize(request);
    } finally {
      controls.authorizing -= 1;
    }
    if (controls.finished) refuse('ControlError', `turn ${run.turnId} is finished`, 'finished');
    tooLate(request.action);
  };
  const notPaused = () => refuse('ControlError', `turn ${run.turnId} is not paused`, 'not_paused');
  const alreadyPaused = () =>
    refuse('ControlError', `turn ${run.turnId} is already paused`, 'already_paused');
  setHandler(
    pauseUpdate,
    shielded(async (payload) => {
      await authorizeBoundary(parse('pause', payload));
      if (controls.pauseRequested) alreadyPaused();
      controls.pauseRequested = true;
      return controls.state();
    }),
    {
      validator: (payload) => {
        parse('pause', payload);
        tooLate('pause');
        if (controls.pauseRequested) alreadyPaused();
      },
    },
  );
  setHandler(
    resumeUpdate,
    shielded(async (payload) => {
      await authorize(parse('resume', payload));
      if (!controls.pauseRequested) notPaused();
      controls.pauseRequested = false;
      return controls.state();
    }),
    {
      validator: (payload) => {
        parse('resume', payload);
        if (!controls.pauseRequested) notPaused();
      },
    },
  );
  setHandler(
    steerUpdate,
    shielded(async (payload) => {
      const request = parse('steer', payload);
      const id = currentUpdateInfo()?.id ?? `steer-${controls.steers.length}`;
      await authorizeBoundary(request);
      controls.steers.push({ id, text: request.text!, principal: request.principal });
      return controls.state();
    }),
    {
      validator: (payload) => {
        parse('steer', payload);
        tooLate('steer');
      },
    },
  );
  setHandler(controlStateQuery, () => controls.state());
}

/**
 * A control boundary (before a model call, before a tool call): a requested pause stops the
 * turn here, `paused` with its claim cleared, until `resume` (or a cancel, or the root
 * timeout). Returns the digest it resumed from, or null when there was no pause.
 */
export async function pauseAtBoundary(run: TurnRun): Promise<TurnDigest | null> {
  const controls = run.controls;
  if (!controls?.pauseRequested) return null;
  const { store } = run.activities;
  await runStoreStep(() => store.pauseTurn.executeWithOptions({ summary: 'pause' }, [run.owner()]));
  controls.paused = true;
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'paused' }]);
  run.console.update({ status: 'paused', lastStep: 'paused by a person' });
  await condition(() => !controls.pauseRequested);
  controls.paused = false;
  const digest = await runStoreStep(() =>
    store.resumePausedTurn.executeWithOptions({ summary: 'resume' }, [run.owner()]),
  );
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'running' }]);
  run.console.digest(digest);
  run.console.update({ lastStep: 'resumed' });
  return digest;
}

/**
 * The boundary before the output (its checks and the output step), the last one of a turn.
 * Pause and steer Updates accepted before it and still being authorized are waited for, then
 * a pause stops the turn here; with steering to apply it returns true (the caller applies it
 * and the model answers again). Otherwise the turn commits to its output: from here on pause
 * and steer are refused (`too_late`) by their validators, so none is acknowledged and dropped.
 */
export async function commitToOutput(run: TurnRun): Promise<boolean> {
  const controls = run.controls;
  if (!controls) return false;
  for (;;) {
    if (controls.authorizing > 0) await condition(() => controls.authorizing === 0);
    // While paused, more controls may arrive: look again after the resume.
    if (!(await pauseAtBoundary(run))) break;
  }
  if (controls.steers.length > 0) return true;
  controls.finishing = true;
  return false;
}

/** The output step went back to the model (a revision): pause and steer apply again. */
export function reopenControls(run: TurnRun): void {
  if (run.controls) run.controls.finishing = false;
}

/** Steering accepted and not yet written: it applies at this boundary (back to the model). */
export async function steerAtBoundary(run: TurnRun): Promise<TurnDigest | null> {
  const controls = run.controls;
  if (!controls || controls.steers.length === 0) return null;
  const steers = [...controls.steers];
  const digest = await runStoreStep(() =>
    run.activities.store.steerTurn.executeWithOptions({ summary: 'steer' }, [{ ...run.owner(), steers }]),
  );
  controls.steers = controls.steers.slice(steers.length);
  controls.phaseCalls = new Set();
  run.console.digest(digest);
  run.console.update({ lastStep: 'steered by a person' });
  return digest;
}
