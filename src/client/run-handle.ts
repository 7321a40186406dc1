import type { Client } from '@temporalio/client';
import { isGrpcServiceError, ServiceError } from '@temporalio/client';
import type { TurnPreview } from '../engine/model/model-request.js';
import { assertNotErased } from '../store/sql/sealed-columns.js';
import type {
  EventRecord,
  Json,
  JsonObject,
  MessageRecord,
  Store,
  ToolExecutionRecord,
  TurnRecord,
  Usage,
} from '../store/types.js';
import type { OutputViolation } from '../agents/output-policy.js';
import type { RunStreamOptions, RunStreamPart } from './run-stream.js';
import { readRunStream } from './run-stream.js';
import type { TurnKitUIMessageChunk } from '../ui/types.js';
import type { UIStreamOptions } from './ui-stream.js';
import { toUIMessageChunks } from './ui-stream.js';
import { TERMINAL_TURN_STATUSES } from '../store/types.js';
import type { ApprovalResult, ControlState } from '../workflows/contract.js';
import { controlStateQuery, turnWorkflowId } from '../workflows/contract.js';
import type { ControlAction } from '../contract/control-request.js';
import type { ApprovalAnswer, PendingApproval } from './controls.js';
import type { RegenerateOptions } from './fork.js';
import { decisionTarget, pendingApprovals } from './controls.js';

export function sumUsage(turns: readonly TurnRecord[]): Usage {
  const total: Usage = {
    input_tokens: 0,
    output_tokens: 0,
    cached_tokens: 0,
    cache_write_tokens: 0,
    thinking_tokens: 0,
    total_tokens: 0,
  };
  for (const turn of turns) {
    if (!turn.usage) continue;
    total.input_tokens += turn.usage.input_tokens ?? 0;
    total.output_tokens += turn.usage.output_tokens ?? 0;
    total.cached_tokens += turn.usage.cached_tokens ?? 0;
    total.cache_write_tokens += turn.usage.cache_write_tokens ?? 0;
    total.thinking_tokens += turn.usage.thinking_tokens ?? 0;
    total.total_tokens += turn.usage.total_tokens ?? 0;
  }
  return total;
}

/** Observed cost in USD of these turns. */
export function sumCost(turns: readonly TurnRecord[]): number {
  return turns.reduce((sum, turn) => sum + (turn.cost ?? 0), 0);
}

export interface RunHandleDeps {
  store: Store;
  temporal: Client;
  start(turnId: string): Promise<void>;
  preview(turnId: string): Promise<TurnPreview>;
  cancel(turnId: string, request: { descendants?: 'retain' | 'cascade'; principal?: Json }): Promise<void>;
  regenerate(turnId: string, options: RegenerateOptions): Promise<RunHandle>;
  waitFor(turnId: string, targets: string[], principal?: Json): Promise<void>;
  /** Sends a person's control as its Update (signed when the client holds the key). */
  control(turnId: string, action: ControlAction, fields: JsonObject): Promise<unknown>;
}

/**
 * A run as the application sees it. Every read is fresh from the store, so any process can
 * build a handle from a turn id; `result()` waits on the turn's workflow.
 */
export class RunHandle {
  constructor(
    readonly turnId: string,
    readonly conversationId: string,
    readonly rootTurnId: string,
    private readonly deps: RunHandleDeps,
  ) {}

  get workflowId(): string {
    return turnWorkflowId(this.turnId);
  }

  turn(): Promise<TurnRecord> {
    return this.deps.store.loadTurn(this.turnId);
  }

  /** Starts the turn's workflow (a prepared run); starting twice runs it once. */
  async start(): Promise<this> {
    await this.deps.start(this.turnId);
    return this;
  }

  /** Cancels the run's turn through its workflow's `cancel` signal. */
  async cancel(request: { descendants?: 'retain' | 'cascade'; principal?: Json } = {}): Promise<this> {
    await this.deps.cancel(this.turnId, request);
    return this;
  }

  /**
   * Runs this run's input again on a fork of its conversation made just before it (decision
   * 47), optionally with another `model`, other `instructions` or other per-turn options.
   * Returns the new run, started unless `start: false`; this run and its conversation are
   * not changed.
   */
  regenerate(options: RegenerateOptions = {}): Promise<RunHandle> {
    return this.deps.regenerate(this.turnId, options);
  }

  /**
   * The tool calls awaiting a person's decision in this run's turn and in every sub-agent turn
   * below it, oldest first; each names its turn (`turnId`, `agentName`).
   */
  async pendingApprovals(): Promise<PendingApproval[]> {
    return pendingApprovals(this.deps.store, await this.turn());
  }

  /**
   * Approves a call awaiting approval (the Update `approve`): it runs next. The call may be a
   * sub-agent's: the Update goes to the turn where it awaits (`turnId` says which, when two
   * turns share the call id). Refused with a ControlError (unknown or decided call, finished
   * turn), an AuthorizationError (the policy, action `approve`) or an ArgumentError; nothing
   * is written then.
   */
  approve(
    toolCallId: string,
    options: { principal?: Json; note?: string; turnId?: string } = {},
  ): Promise<ApprovalAnswer> {
    return this.#decide('approve', toolCallId, options);
  }

  /**
   * Rejects a call awaiting approval (the Update `reject`), routed as `approve` is: its one
   * result, "rejected by <who>: <reason>".
   */
  reject(
    toolCallId: string,
    options: { principal?: Json; reason?: string; turnId?: string } = {},
  ): Promise<ApprovalAnswer> {
    return this.#decide('reject', toolCallId, options);
  }

  async #decide(
    action: 'approve' | 'reject',
    toolCallId: string,
    { turnId, ...options }: { turnId?: string } & Record<string, unknown>,
  ): Promise<ApprovalAnswer> {
    const target = await decisionTarget(this.deps.store, await this.turn(), toolCallId, turnId);
    const answer = (await this.#control(action, { toolCallId, ...options }, target)) as ApprovalResult;
    return { ...answer, turnId: target };
  }

  /** Stops the turn at its next control boundary (before a model or tool call), status `paused`. */
  pause(options: { principal?: Json } = {}): Promise<ControlState> {
    return this.#control('pause', options) as Promise<ControlState>;
  }

  /** Lets a paused turn (or one asked to pause) go on; a ControlError if it is not paused. */
  resume(options: { principal?: Json } = {}): Promise<ControlState> {
    return this.#control('resume', options) as Promise<ControlState>;
  }

  /**
   * Appends a person's message at the next control boundary; tool calls not started by then
   * are closed as cancelled, "superseded by human steering". The next model call reads it.
   */
  steer(text: string, options: { principal?: Json } = {}): Promise<ControlState> {
    return this.#control('steer', { text, ...options }) as Promise<ControlState>;
  }

  /** Pause, approvals awaiting, steering queued: the workflow's `controlState` query. */
  async controlState(): Promise<ControlState & { status: TurnRecord['status'] }> {
    const turn = await this.turn();
    const finished = {
      pauseRequested: false,
      paused: false,
      pendingSteers: 0,
      finishing: false,
      finished: true,
    };
    if (TERMINAL_TURN_STATUSES.includes(turn.status))
      return { ...finished, awaitingApproval: [], status: turn.status };
    const state = await this.deps.temporal.workflow.getHandle(this.workflowId).query(controlStateQuery);
    return { ...state, status: (await this.turn()).status };
  }

  #control(action: ControlAction, fields: Record<string, unknown>, turnId = this.turnId): Promise<unknown> {
    const defined = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
    return this.deps.control(turnId, action, defined as JsonObject);
  }

  /**
   * Makes this prepared run wait for other runs before it starts; their results reach it
   * as a `wait_results` message before its first model call.
   */
  async waitFor(...targets: (RunHandle | string)[]): Promise<this> {
    await this.deps.waitFor(
      this.turnId,
      targets.map((target) => (typeof target === 'string' ? target : target.turnId)),
    );
    return this;
  }

  /**
   * Waits for the turn's workflow to finish, then returns the stored turn. The turn goes on
   * while the Temporal frontend is unreachable (a restart, a failover), so the wait does too:
   * it retries with backoff until the frontend has been unreachable for `unavailableForMs` in
   * all (default 5 minutes), then throws the client's last error.
   */
  async result(options: { unavailableForMs?: number } = {}): Promise<TurnRecord> {
    const limit = options.unavailableForMs ?? 5 * 60_000;
    let since: number | null = null;
    for (let wait = 250; ; wait = Math.min(wait * 2, 5_000)) {
      try {
        await this.deps.temporal.workflow.getHandle(this.workflowId).result();
        return await this.#content();
      } catch (error) {
        if (!unavailable(error)) throw error;
        since ??= Date.now();
        if (Date.now() - since >= limit) throw error;
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  async status(): Promise<TurnRecord['status']> {
    return (await this.turn()).status;
  }

  async outputText(): Promise<string | null> {
    return (await this.#content()).outputText;
  }

  async outputData(): Promise<Json> {
    return (await this.#content()).outputData;
  }

  /** The turn, for a door that hands its content out: ContentErasedError when it was erased (decision 80). */
  async #content(): Promise<TurnRecord> {
    const turn = await this.turn();
    assertNotErased(turn);
    return turn;
  }

  async error(): Promise<TurnRecord['error']> {
    return (await this.turn()).error;
  }

  /**
   * The audit of the turn's final output check, `{clean, violations: [{rule, message,
   * metadata?}]}`, or null when the agent has no output checks (or the turn has not ended).
   */
  async policyAudit(): Promise<{ clean: boolean; violations: OutputViolation[] } | null> {
    const options = (await this.turn()).options;
    const state = options['state'];
    const audit =
      (state && typeof state === 'object' && !Array.isArray(state) ? state['policy_audit'] : undefined) ??
      options['policy_audit'];
    return audit && typeof audit === 'object' && !Array.isArray(audit)
      ? (audit as unknown as { clean: boolean; violations: OutputViolation[] })
      : null;
  }

  /** True unless the final output check found violations (no checks: clean). */
  async policyClean(): Promise<boolean> {
    return (await this.policyAudit())?.clean ?? true;
  }

  /** Every turn of the run's tree, root first. */
  turns(): Promise<TurnRecord[]> {
    return this.deps.store.listTurns({ rootTurnId: this.rootTurnId });
  }

  /** Messages of every conversation in the tree, conversation by conversation. */
  async transcript(): Promise<MessageRecord[]> {
    const conversations = [...new Set((await this.turns()).map((turn) => turn.conversationId))];
    const messages = await Promise.all(conversations.map((id) => this.deps.store.listMessages(id)));
    return messages.flat();
  }

  async toolExecutions(): Promise<ToolExecutionRecord[]> {
    const turns = await this.turns();
    return this.deps.store.listToolExecutions({ turnIds: turns.map((turn) => turn.id) });
  }

  async usage(): Promise<Usage> {
    return sumUsage(await this.turns());
  }

  /** Observed cost in USD over the whole tree. */
  async cost(): Promise<number> {
    return sumCost(await this.turns());
  }

  events(): Promise<EventRecord[]> {
    return this.deps.store.listEvents(this.turnId);
  }

  /**
   * The run's live stream over its turn and every turn below it (a handle on a sub-agent, or
   * on a run attached with `parentRun`, sees its own subtree, never the rest of the root's
   * tree): text and reasoning deltas as the model answers, tool calls and results, steps,
   * statuses, and a last `finish` part once the run's own turn is terminal. Each part has a
   * cursor; `after: cursor` resumes with exactly the parts after it. A cursor this run's tree
   * never gave is a StreamCursorError.
   */
  stream(options: RunStreamOptions = {}): AsyncIterable<RunStreamPart> {
    return {
      [Symbol.asyncIterator]: () => readRunStream(this.deps.store, this.rootTurnId, options, this.turnId),
    };
  }

  /** The live stream as the AI SDK's UI message chunks (`useChat`'s format). */
  toUIMessageStream(options: UIStreamOptions = {}): ReadableStream<TurnKitUIMessageChunk> {
    return toUIMessageChunks(this, options);
  }

  /** The request the next model call would send, without calling the model. */
  preview(): Promise<TurnPreview> {
    return this.deps.preview(this.turnId);
  }
}

/** The Temporal frontend did not answer (gRPC UNAVAILABLE), directly or as a ServiceError's cause. */
function unavailable(error: unknown): boolean {
  const cause = error instanceof ServiceError ? error.cause : error;
  return isGrpcServiceError(cause) && cause.code === GRPC_UNAVAILABLE;
}
const GRPC_UNAVAILABLE = 14;
