/**
 * Drives one turn through the engine's activity functions in the order the turn workflow
 * calls them (src/workflows/turn-phases.ts, tools-phase.ts, turn-end.ts), in process and
 * without a Temporal server: claim → model step (asking for compaction first, as current
 * runs do) → each tool call, the last one closing the phase (sub-agent child turns driven the
 * same way, the parent suspended meanwhile) → close the phase → output audit
 * when the agent has checks → output step, and a failure or a lost claim as turn-end.ts
 * handles them. Retryable errors are retried at once, as Temporal's retry policy would,
 * without its delays.
 *
 * It does not replace Temporal, and tests of what only Temporal does stay on the dev server:
 * no replay or history, no timers (the root timeout, lane and join back-off), no signals or
 * Updates (cancel, approvals, pause, steer), no child workflows (sub-agents are driven in
 * process; a `wait_for` join or a call awaiting approval suspends the turn and the drive stops
 * with `waiting`; launched agents and lanes to wake are only reported), no continue-as-new.
 *
 * Every engine entry point it calls is imported here, and only here: a rename in src/engine
 * is a one-line fix in this block.
 */
import { claimTurn } from '../../src/engine/claim/claim.js';
import { runCompactionStep } from '../../src/engine/model/compact-step.js';
import { runModelStep } from '../../src/engine/model/model-step.js';
import { runToolCall } from '../../src/engine/tools/tool-call.js';
import { finishToolsPhase, suspendTurn } from '../../src/engine/tools/tools-phase.js';
import { resumeTurn } from '../../src/engine/claim/resume.js';
import { runOutputAudit } from '../../src/engine/output/audit.js';
import { runOutputStep } from '../../src/engine/output/output-step.js';
import { failTurn } from '../../src/engine/end/fail.js';
import type { Runtime } from '../../src/engine/runtime.js';
import { LostClaim, TurnKitError } from '../../src/errors.js';
import type { TurnRecord } from '../../src/store/types.js';
import type { TurnSettings } from '../../src/workflows/contract.js';
import { DEFAULT_TURN_SETTINGS } from '../../src/workflows/contract.js';
import type {
  ClaimDigest,
  ModelStepDigest,
  OwnerInput,
  ToolCallOutcome,
  TurnDigest,
  TurnErrorDigest,
} from '../../src/contract/digests.js';

/** The activities the driver calls, by the names the workflow's summaries give them. */
export type StepName =
  'claim' | 'model' | 'compaction' | 'tool' | 'finishTools' | 'suspend' | 'resume' | 'outputAudit' | 'output';

/** Faults to inject, for tests of idempotency and fencing. */
export interface DriverFaults {
  /** Runs each step named here a second time with the same input (a retried activity whose first attempt committed). */
  repeat?: readonly StepName[];
  /** Sees each step's input before it runs and may replace it (a stale claim token, another step key). */
  input?: (step: StepName, input: OwnerInput) => OwnerInput | void;
}

export interface DriverOptions {
  /** The workflow settings the client would pass (attempt limits). */
  settings?: TurnSettings;
  /** Stands for the workflow's run id: the claim token and the step keys' prefix. */
  runId?: string;
  faults?: DriverFaults;
  /** Attempts of one step before a retryable error fails the turn (Temporal's are unbounded). */
  maxRetries?: number;
}

export interface DrivenTurn {
  /** How the drive ended: the turn's final status, `waiting` (suspended) or `lost` (fenced out). */
  status: string;
  claim: ClaimDigest;
  /** Each digest the workflow would have seen: the claim's, each model step's, each close. */
  digests: TurnDigest[];
  /** Every tool call's outcome, in dispatch order. */
  outcomes: ToolCallOutcome[];
  /** `launch_agent` children and `send_message` lanes the workflow would start or wake. */
  launched: NonNullable<ToolCallOutcome['launched']>[];
  wakeLanes: string[];
  /** The drives of the sub-agent child turns, in the order their calls were dispatched. */
  children: DrivenTurn[];
  /** The turn's row after the drive. */
  turn: TurnRecord;
}

type Driven = Omit<DrivenTurn, 'turn' | 'status'>;

/** What one pass over the calls left open (tools-phase.ts `DispatchPass`, without controls). */
interface DispatchPass {
  terminalToolCallId: string | null;
  /** Sub-agent child turns to drive before the next pass. */
  children: string[];
  /** A call waits for a person or a join: the drive stops, the turn suspended. */
  held: boolean;
  lanes: number;
  closed: TurnDigest | null;
}

let runCounter = 0;

/** The error a failed turn records (turn-run.ts `turnError` of what `toFailure` made of it). */
function turnError(error: unknown): TurnErrorDigest {
  if (error instanceof Error) return { class: error.name, message: error.message };
  return { class: 'Error', message: String(error) };
}

export class TurnDriver {
  readonly #runtime: Runtime;
  readonly #options: DriverOptions;

  constructor(runtime: Runtime, options: DriverOptions = {}) {
    this.#runtime = runtime;
    this.#options = options;
  }

  /** Drives a submitted turn as one run of its workflow would, until it ends or suspends. */
  async drive(turnId: string): Promise<DrivenTurn> {
    const runId = this.#options.runId ?? `run${process.pid}x${(runCounter += 1)}`;
    const owner: OwnerInput = { turnId, claimToken: runId };
    const driven: Driven = {
      claim: { claimed: false, reason: 'not_pending', status: 'pending' },
      digests: [],
      outcomes: [],
      launched: [],
      wakeLanes: [],
      children: [],
    };
    let status: string;
    try {
      driven.claim = await this.#step('claim', owner, (input) =>
        claimTurn(this.#runtime, input.turnId, input.claimToken, { supersede: true }),
      );
      status = driven.claim.claimed ? await this.#phases(owner, driven.claim, driven) : driven.claim.status;
    } catch (error) {
      // A run fenced out writes nothing more (turn-workflow.ts: status `lost`).
      if (error instanceof LostClaim) status = 'lost';
      else status = (await failTurn(this.#runtime, { ...owner, error: turnError(error) })).status;
    }
    return { ...driven, status, turn: await this.#runtime.store.loadTurn(turnId) };
  }

  /** turn-phases.ts `runPhases`: model → tools → output until the output step is done. */
  async #phases(owner: OwnerInput, start: TurnDigest, driven: Driven) {
    const settings = this.#options.settings ?? {};
    driven.digests.push(start);
    let digest = start;
    let modelCalls = 0;
    for (;;) {
      if (digest.phase === 'model') {
        modelCalls += 1;
        digest = await this.#modelStep(owner, `${owner.claimToken.slice(0, 12)}:${modelCalls}`);
        driven.digests.push(digest);
      } else if (digest.phase === 'tools') {
        const next = await this.#toolsPhase(owner, digest, driven);
        if (!next) return 'waiting';
        digest = next;
        driven.digests.push(digest);
      } else {
        if (digest.outputChecks) {
          const maxAttempts = settings.maxOutputAttempts ?? DEFAULT_TURN_SETTINGS.maxOutputAttempts;
          await this.#step('outputAudit', owner, (input) =>
            runOutputAudit(this.#runtime, { ...input, maxAttempts }, { signal: this.#signal() }),
          );
        }
        const output = await this.#step('output', owner, (input) => runOutputStep(this.#runtime, input));
        if (output.done) return output.status;
        digest = { ...digest, phase: 'model', toolCalls: [] };
      }
    }
  }

  /** One model call, compaction first when it is due (turn-phases.ts). */
  async #modelStep(owner: OwnerInput, stepKey: string): Promise<ModelStepDigest> {
    const maxProviderAttempts =
      this.#options.settings?.maxProviderAttempts ?? DEFAULT_TURN_SETTINGS.maxProviderAttempts;
    const call = (compaction: boolean) =>
      this.#step('model', owner, (input, attempt) =>
        runModelStep(
          this.#runtime,
          { ...input, step: stepKey, maxProviderAttempts, ...(compaction ? { compaction } : {}) },
          { signal: this.#signal(), heartbeat: () => undefined, retry: attempt > 1 },
        ),
      );
    const digest = await call(true);
    if (!digest.compactionDue) return digest;
    await this.#step('compaction', owner, (input) =>
      runCompactionStep(
        this.#runtime,
        { ...input, step: stepKey },
        { signal: this.#signal(), heartbeat: () => undefined },
      ),
    );
    return call(false);
  }

  /**
   * tools-phase.ts `runToolsPhase`: dispatch; while sub-agents are open, suspend the turn,
   * drive each child turn here (in parallel, as child workflows run), resume and dispatch
   * again. Null: the turn waits for what only a workflow can wait for (a join, a person).
   */
  async #toolsPhase(owner: OwnerInput, start: TurnDigest, driven: Driven): Promise<TurnDigest | null> {
    for (let digest = start; ;) {
      const pass = await this.#dispatch(owner, digest, driven);
      if (pass.closed) return pass.closed;
      if (pass.children.length === 0 && !pass.held)
        return this.#step('finishTools', owner, (input) =>
          finishToolsPhase(this.#runtime, { ...input, terminalToolCallId: pass.terminalToolCallId }),
        );
      await this.#step('suspend', owner, (input) => suspendTurn(this.#runtime, input));
      if (pass.held) return null;
      // Each child is its own workflow run: its own token, the same settings and faults.
      const { runId: _parentRun, ...childOptions } = this.#options;
      const children = await Promise.all(
        pass.children.map((turnId) => new TurnDriver(this.#runtime, childOptions).drive(turnId)),
      );
      driven.children.push(...children);
      digest = await this.#step('resume', owner, (input) => resumeTurn(this.#runtime, input));
      driven.digests.push(digest);
    }
  }

  /**
   * tools-phase.ts `dispatchCalls`: calls in order until one must be waited on. A contiguous
   * group of sub-agent calls fans out (results deferred after the first), nothing else jumps
   * ahead of it, and a completed terminal call ends the pass.
   */
  async #dispatch(owner: OwnerInput, digest: TurnDigest, driven: Driven): Promise<DispatchPass> {
    const maxAttempts = this.#options.settings?.maxToolAttempts ?? DEFAULT_TURN_SETTINGS.maxToolAttempts;
    const pass: DispatchPass = {
      terminalToolCallId: null,
      children: [],
      held: false,
      lanes: 0,
      closed: null,
    };
    const lastCall = digest.toolCalls[digest.toolCalls.length - 1];
    for (const call of digest.toolCalls) {
      const deferResult = pass.children.length > 0;
      if (deferResult && call.kind !== 'subAgent') break;
      // Lanes to wake are left to the workflow: while any are pending, no call closes the phase.
      const close = !deferResult && pass.lanes === 0 ? { close: { last: call === lastCall } } : {};
      const outcome = await this.#step('tool', owner, (input) =>
        runToolCall(
          this.#runtime,
          { ...input, toolCallId: call.id, deferResult, approvals: true, ...close },
          { signal: this.#signal(), heartbeat: () => undefined, maxAttempts },
        ),
      );
      driven.outcomes.push(outcome);
      if (outcome.launched) driven.launched.push(outcome.launched);
      driven.wakeLanes.push(...(outcome.wakeLanes ?? []));
      pass.lanes += outcome.wakeLanes?.length ?? 0;
      if (outcome.waiting && outcome.childTurnId) {
        pass.children.push(outcome.childTurnId);
      } else if (outcome.awaitingApproval || outcome.waiting) {
        // A person's decision or a `wait_for` join: only a workflow can wait for those.
        pass.held = true;
        break;
      } else if (outcome.terminal) {
        pass.terminalToolCallId = call.id;
        pass.closed = outcome.closed ?? null;
        break;
      } else if (outcome.closed) {
        pass.closed = outcome.closed;
      }
    }
    return pass;
  }

  /** One activity: faults applied, retried at once while its error says a retry could help. */
  async #step<T>(name: StepName, owner: OwnerInput, run: (input: OwnerInput, attempt: number) => Promise<T>) {
    const input = this.#options.faults?.input?.(name, owner) ?? owner;
    const limit = this.#options.maxRetries ?? 20;
    for (let attempt = 1; ; attempt += 1) {
      try {
        const result = await run(input, attempt);
        if (!this.#options.faults?.repeat?.includes(name)) return result;
        return await run(input, attempt + 1);
      } catch (error) {
        const retryable = error instanceof TurnKitError ? error.retryable : true;
        if (!retryable || attempt >= limit) throw error;
      }
    }
  }

  #signal(): AbortSignal {
    return new AbortController().signal;
  }
}
