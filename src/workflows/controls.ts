/**
 * A person in the loop, on the workflow side: the Updates `approve`, `reject`, `pause`,
 * `resume` and `steer`, their validators (what the workflow already knows: the payload, the
 * call, the turn's state), and the state the control boundaries (control-boundaries.ts) read.
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
} from '@temporalio/workflow';
import type { UpdateDefinition } from '@temporalio/common';
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
} from './contract.js';
import type { TurnRun } from './turn-run.js';
import type { ApprovalDecision, ControlVerdict, Steer } from '../contract/activities.js';

function refuse(
  type: 'ArgumentError' | 'ControlError' | 'AuthorizationError',
  message: string,
  code: string,
): never {
  throw ApplicationFailure.create({ type, message, nonRetryable: true, details: [{ code }] });
}

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
  /**
   * The store's count of the turn's pauses and steerings put to authorization, as the latest
   * verdict this run heard said it: a step that may finish the turn is given it (decision 82). Null
   * once a verdict came without it (a worker of an earlier release authorized it), and on a
   * run continued from one that had none: then no step finishes the turn.
   */
  boundaryAuthorized: number | null = 0;
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
  /** The run the handlers serve and the scope that shields them: set by `register`. */
  #run!: TurnRun;
  #shield: CancellationScope | undefined;

  /** Calls of the phase that a run before this one saw decided and settled: decided for good. */
  readonly #decidedBefore = new Set<string>();

  /**
   * On a continued run, with what its predecessor accepted and had not applied yet, and what
   * it knew of the tools phase's calls (decision 58): a decision that arrives before this run
   * dispatches them again is taken, a second one is refused as it was before the switch.
   */
  constructor(continued?: TurnContinuation) {
    if (!continued) return;
    this.boundaryAuthorized = continued.boundaryControls ?? null;
    this.pauseRequested = continued.pauseRequested;
    this.steers = [...continued.steers];
    for (const [id, decision] of continued.decisions) this.decisions.set(id, decision);
    for (const [id, at] of continued.approvalDeadlines) this.#deadlines.set(id, at);
    const calls = continued.calls;
    if (!calls) return;
    this.phaseCalls = new Set(calls.phase);
    for (const id of calls.awaiting) this.awaiting.add(id);
    for (const id of calls.settled) this.settled.add(id);
    for (const id of calls.decided) this.#decidedBefore.add(id);
  }

  /** What the next run needs of these controls (continue-as-new). */
  handOver(): Pick<
    TurnContinuation,
    'pauseRequested' | 'steers' | 'decisions' | 'approvalDeadlines' | 'calls' | 'boundaryControls'
  > {
    const open = (id: string) => this.awaiting.has(id) && !this.decisions.has(id);
    // The current phase's calls only: what is carried stays as small as one phase.
    const phase = [...this.phaseCalls];
    const settled = phase.filter((id) => this.settled.has(id));
    return {
      pauseRequested: this.pauseRequested,
      steers: [...this.steers],
      decisions: [...this.decisions].filter(([id]) => this.awaiting.has(id)),
      approvalDeadlines: [...this.#deadlines].filter(([id]) => open(id)),
      calls: {
        phase,
        awaiting: phase.filter((id) => this.awaiting.has(id)),
        settled,
        decided: settled.filter((id) => this.decisions.has(id) || this.#decidedBefore.has(id)),
      },
      ...(this.boundaryAuthorized !== null ? { boundaryControls: this.boundaryAuthorized } : {}),
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

  /** Registers the Updates and the `controlState` query on this run, one line each. */
  register(run: TurnRun, shield?: CancellationScope): void {
    this.#run = run;
    this.#shield = shield;
    this.#on(approveUpdate, this.approve, this.validateApprove);
    this.#on(rejectUpdate, this.reject, this.validateReject);
    this.#on(pauseUpdate, this.pause, this.validatePause);
    this.#on(resumeUpdate, this.resume, this.validateResume);
    this.#on(steerUpdate, this.steer, this.validateSteer);
    setHandler(controlStateQuery, () => this.state());
  }

  /** One Update: its handler and validator, both methods of this class. */
  #on<R>(
    update: UpdateDefinition<R, [unknown]>,
    handler: (payload: unknown) => Promise<R>,
    validator: (payload: unknown) => void,
  ): void {
    // On 0.5 runs a handler runs shielded from Temporal's own cancellation, which the cancel
    // policy may refuse (turn-cancel.ts): the turn then goes on, and so do its controls.
    const handle = (payload: unknown) => {
      const run = () => handler.call(this, payload);
      return this.#shield ? this.#shield.run(run) : run();
    };
    setHandler(update, handle, { validator: (payload) => validator.call(this, payload) });
  }

  approve(payload: unknown): Promise<ApprovalResult> {
    return this.#decide('approved', payload);
  }
  validateApprove(payload: unknown): void {
    this.#checkCall(this.#parse('approve', payload));
  }

  reject(payload: unknown): Promise<ApprovalResult> {
    return this.#decide('rejected', payload);
  }
  validateReject(payload: unknown): void {
    this.#checkCall(this.#parse('reject', payload));
  }

  async pause(payload: unknown): Promise<ControlState> {
    await this.#authorizeBoundary(this.#parse('pause', payload));
    if (this.pauseRequested) this.#refuseTurn('is already paused', 'already_paused');
    this.pauseRequested = true;
    return this.state();
  }
  validatePause(payload: unknown): void {
    this.#parse('pause', payload);
    this.#tooLate('pause');
    if (this.pauseRequested) this.#refuseTurn('is already paused', 'already_paused');
  }

  async resume(payload: unknown): Promise<ControlState> {
    await this.#authorize(this.#parse('resume', payload));
    if (!this.pauseRequested) this.#refuseTurn('is not paused', 'not_paused');
    this.pauseRequested = false;
    return this.state();
  }
  validateResume(payload: unknown): void {
    this.#parse('resume', payload);
    if (!this.pauseRequested) this.#refuseTurn('is not paused', 'not_paused');
  }

  async steer(payload: unknown): Promise<ControlState> {
    const request = this.#parse('steer', payload);
    const id = currentUpdateInfo()?.id ?? `steer-${this.steers.length}`;
    await this.#authorizeBoundary(request);
    this.steers.push({ id, text: request.text!, principal: request.principal });
    return this.state();
  }
  validateSteer(payload: unknown): void {
    this.#parse('steer', payload);
    this.#tooLate('steer');
  }

  #parse(action: ControlAction, payload: unknown): ControlRequest {
    const parsed = parseControlRequest(action, payload);
    if (!parsed.ok) refuse('ArgumentError', parsed.reason, 'malformed');
    if (this.finished) this.#refuseTurn('is finished', 'finished');
    return parsed.value;
  }

  #refuseTurn(what: string, code: string): never {
    refuse('ControlError', `turn ${this.#run.turnId} ${what}`, code);
  }

  async #authorize(request: ControlRequest): Promise<ControlVerdict> {
    const run = this.#run;
    const verdict = await CancellationScope.nonCancellable(() =>
      run.activities.controls.authorizeControl.executeWithOptions(
        { summary: `authorize ${request.action}` },
        [{ turnId: run.turnId, request }],
      ),
    );
    if (request.action === 'pause' || request.action === 'steer') this.#counted(verdict.boundaryControls);
    // The step that ended the turn's last phase finished it before this was authorized.
    if (verdict.finished) this.#refuseTurn('is finished', 'finished');
    if (!verdict.allowed)
      refuse('AuthorizationError', verdict.reason ?? `not authorized to ${request.action}`, 'denied');
    return verdict;
  }

  /** A pause's or steering's verdict came back: the store's count as it said it. */
  #counted(boundaryControls: number | undefined): void {
    this.boundaryAuthorized =
      boundaryControls === undefined || this.boundaryAuthorized === null
        ? null
        : Math.max(this.boundaryAuthorized, boundaryControls);
  }

  #checkCall(request: ControlRequest): string {
    const id = request.toolCallId!;
    if (this.decisions.has(id) || this.deciding.has(id) || this.#decidedBefore.has(id))
      refuse('ControlError', `tool call ${id} is already decided`, 'decided');
    if (this.settled.has(id))
      refuse('ControlError', `tool call ${id} is not awaiting approval`, 'not_awaiting');
    if (!this.phaseCalls.has(id))
      this.#refuseTurn(`has no tool call ${id} awaiting approval`, 'unknown_call');
    return id;
  }

  async #decide(decision: 'approved' | 'rejected', payload: unknown): Promise<ApprovalResult> {
    const request = this.#parse(decision === 'approved' ? 'approve' : 'reject', payload);
    const id = this.#checkCall(request);
    this.deciding.add(id);
    try {
      // Its dispatch may still be on its way back: wait until the workflow knows the call's state.
      await condition(
        () => this.awaiting.has(id) || this.settled.has(id) || this.finished || !this.phaseCalls.has(id),
      );
      if (this.finished) this.#refuseTurn('is finished', 'finished');
      if (!this.awaiting.has(id))
        refuse('ControlError', `tool call ${id} is not awaiting approval`, 'not_awaiting');
      const verdict = await this.#authorize(request);
      // Nothing else decides the call while it is in `deciding` (the approval timeout waits).
      this.decisions.set(id, {
        decision,
        principal: request.principal,
        ...(request.note !== undefined ? { note: request.note } : {}),
        ...(request.reason !== undefined ? { reason: request.reason } : {}),
      });
      return { toolCallId: id, decision, verified: verdict.verified };
    } finally {
      this.decisionDone(id);
    }
  }

  // Pause and steer act at a boundary; once the turn committed to its output there is none.
  #tooLate(action: ControlAction): void {
    if (this.finishing) this.#refuseTurn(`is finishing: too late to ${action}`, 'too_late');
  }

  /** Authorizes a pause or steer; the output waits until every one accepted before it is done. */
  async #authorizeBoundary(request: ControlRequest): Promise<void> {
    this.#tooLate(request.action);
    this.authorizing += 1;
    try {
      await this.#authorize(request);
    } finally {
      this.authorizing -= 1;
    }
    if (this.finished) this.#refuseTurn('is finished', 'finished');
    this.#tooLate(request.action);
  }
}
