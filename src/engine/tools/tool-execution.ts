/**
 * One tool call of the turn being run, in its activity's `TurnStep`: the `CallView` its
 * decisions read, and the one writer of its execution row. Every write of the row the
 * pipeline makes (create and reserve, start, close, skip, the result reported again) is a
 * method here, each one block (one transaction).
 */
import type { Agent } from '../../agents/agent.js';
import type { ToolDefinition } from '../../agents/tool.js';
import { BudgetError, StoreError } from '../../errors.js';
import type { ModelMessage } from '../../models/types.js';
import { nowIso } from '../../store/records.js';
import type { Json, JsonObject, Store, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import { isOpenToolExecution } from '../../store/types.js';
import type { ToolCallOutcome } from '../../contract/digests.js';
import type { Runtime } from '../runtime.js';
import { Budget } from '../step/budget.js';
import type { TurnEvent } from '../step/events.js';
import { messageCreated, turnEvent } from '../step/events.js';
import type { TurnStep, TurnTx } from '../step/turn-step.js';
import type { TurnState } from '../step/turn-state.js';
import { callHistory } from '../model/call-history.js';
import { toolForTurn } from '../model/skills.js';
import { findToolExecution } from '../step/execution-lookup.js';
import { appendToolResult, appendToolResultOnce, closeUnrun, resultOf } from '../step/tool-results.js';
import type { CallView, Closing, ToolCall } from './verdict.js';
import { errorDetails } from './verdict.js';

export interface ToolCallHooks {
  signal: AbortSignal;
  heartbeat: (details?: unknown) => void;
  /** Runs a replay-safe tool that throws may have (`maxToolAttempts`), counted in the store. */
  maxAttempts: number;
}

export class ToolExecution implements CallView {
  /** Messages the tool asked for after the results; stored with its completion. */
  readonly afterResults: JsonObject[] = [];
  /** The row as this call's own block closed it, if it did. */
  closedRow: ToolExecutionRecord | undefined;
  /** The turn as the activity opened it: what the tool and the policy see. */
  readonly turn: TurnRecord;

  constructor(
    readonly step: TurnStep,
    readonly call: ToolCall,
    readonly tool: ToolDefinition | undefined,
    readonly deferResult: boolean,
  ) {
    this.turn = step.turn;
  }

  get runtime(): Runtime {
    return this.step.runtime;
  }

  get agent(): Agent {
    return this.step.agent;
  }

  get state(): TurnState {
    return this.step.state;
  }

  /** Fenced: the coordination tools and `ToolContext.store` write through it. */
  get store(): Store {
    return this.step.fencedStore();
  }

  history(): Promise<ModelMessage[]> {
    return callHistory(this.store, this.turn, this.call.id);
  }

  toolFor(name: string): Promise<ToolDefinition | undefined> {
    return toolForTurn(this.step.store, this.agent, this.turn, name);
  }

  executionOf(callId: string): Promise<ToolExecutionRecord | undefined> {
    return findToolExecution(this.step.store, this.turn.id, callId);
  }

  executionsOf(turnId: string, toolName: string): Promise<ToolExecutionRecord[]> {
    return this.step.store.listToolExecutions({ turnId, toolName });
  }

  warn(message: string): void {
    this.runtime.logger.warn(message);
  }

  findExecution(store: Store = this.step.store): Promise<ToolExecutionRecord | undefined> {
    return findToolExecution(store, this.turn.id, this.call.id);
  }

  outcome(execution: ToolExecutionRecord): ToolCallOutcome {
    return {
      toolCallId: this.call.id,
      executionId: execution.id,
      status: execution.status,
      terminal: execution.status === 'completed' && (this.tool?.terminal ?? false),
      waiting: false,
    };
  }

  /**
   * Creates the row and reserves it in the root's budget, in one transaction, closed there
   * already when `closing` says how the call ends before it runs (a policy block, a call that
   * cannot run); a denial fails the row and raises the BudgetError (the turn fails). A row
   * another attempt created meanwhile is returned as it is.
   */
  async create({
    status,
    closing,
  }: {
    status: 'awaiting_approval' | 'pending' | 'running';
    closing?: Closing;
  }) {
    const { turn, call } = this;
    let denied: BudgetError | undefined;
    const execution = await this.step.write(async (tx) => {
      let row: ToolExecutionRecord;
      try {
        row = await tx.store.createToolExecution({
          turnId: turn.id,
          toolCallId: call.id,
          toolName: call.name,
          arguments: call.arguments,
          status,
          startedAt: status === 'running' ? nowIso() : null,
        });
      } catch (error) {
        // The call has a row already: a second one is refused (a StoreError, which leaves the
        // transaction usable), and the row is looked for only then (decision 89). Any other
        // failure is raised as it was.
        const again =
          error instanceof StoreError ? await this.findExecution(tx.store).catch(() => undefined) : undefined;
        if (!again) throw error;
        return { row: again, created: false };
      }
      // The block's store answers a root's own row from the block's read.
      const budget = await Budget.load(tx.store, turn.rootTurnId, this.agent.limits, { excluding: row });
      try {
        budget.reserveToolExecution(call.name);
      } catch (error) {
        if (!(error instanceof BudgetError)) throw error;
        denied = error;
        const failed = { message: error.message, details: errorDetails(error, { budget_denied: true }) };
        return { row: (await this.close(tx, row, 'failed', failed)) ?? row, created: true };
      }
      return { row: closing ? ((await this.closeIn(tx, row, closing)) ?? row) : row, created: true };
    });
    if (denied) throw denied;
    return execution;
  }

  /**
   * The row becomes running (from pending, or awaiting approval once approved), `events`
   * with it. Null when someone else (cancel, steering) closed it meanwhile.
   */
  start(
    execution: ToolExecutionRecord,
    events: readonly TurnEvent[] = [],
  ): Promise<ToolExecutionRecord | null> {
    return this.step.write(async (tx) => {
      const from = execution.status as 'pending' | 'awaiting_approval';
      const row = await tx.store.claimToolExecution(execution.id, {
        from,
        to: 'running',
        startedAt: nowIso(),
      });
      if (row) tx.emit(...events);
      return row;
    });
  }

  /**
   * Closes the call as `closing` says, in a block of its own: the row's compare-and-set, its
   * one result, and what commits with them (`andThen`, when the compare-and-set succeeded). The row as it stands when someone else (cancel,
   * recovery) closed it meanwhile: the late outcome is dropped.
   */
  async settle(
    execution: ToolExecutionRecord | undefined,
    closing: Closing,
    andThen?: (tx: TurnTx) => Promise<void>,
  ): Promise<ToolExecutionRecord> {
    const row = await this.step.write(async (tx) => {
      const closed = await this.closeIn(tx, execution, closing);
      // What else commits with the close, only when this block closed the row.
      if (closed && andThen) await andThen(tx);
      return closed;
    });
    if (row) return row;
    return execution ? this.step.store.loadToolExecution(execution.id) : (await this.findExecution())!;
  }

  /** A finished row, dispatched again: it is never re-run; its one result is made sure of. */
  async reportAgain(existing: ToolExecutionRecord): Promise<void> {
    const { payload, error } = resultOf(existing);
    if (!this.deferResult) await this.step.write((tx) => this.appendResult(tx, existing, payload, error));
  }

  /** One more run of this execution threw: the count lives in the turn's state. */
  countRun(execution: ToolExecutionRecord): Promise<number> {
    return this.step.write(async (tx) => {
      const errors = tx.state.tool_errors ?? {};
      const runs = (errors[execution.id] ?? 0) + 1;
      tx.patchState({ tool_errors: { ...errors, [execution.id]: runs } });
      return runs;
    });
  }

  /** `closing` in the caller's block; a call that never ran (`cancelled`) may have no row yet. */
  private async closeIn(
    tx: TurnTx,
    execution: ToolExecutionRecord | undefined,
    closing: Closing,
  ): Promise<ToolExecutionRecord | null> {
    if (closing.patch) tx.patchState(closing.patch);
    tx.emit(...(closing.events ?? []));
    if (closing.status === 'cancelled') return this.skip(tx, execution, String(closing.payload['message']));
    return this.close(tx, execution!, closing.status, closing.payload);
  }

  /** Closes a call that has not run with its skipped result (see `closeUnrun`). */
  private async skip(
    tx: TurnTx,
    execution: ToolExecutionRecord | undefined,
    message: string,
  ): Promise<ToolExecutionRecord | null> {
    const row = execution ?? (await this.findExecution(tx.store));
    const done = await closeUnrun(tx.store, tx.turn, this.call, row, message, this.deferResult);
    if (!done) return null;
    const { id, name } = this.call;
    tx.emit(
      ...(done.message ? [messageCreated(done.message)] : []),
      turnEvent('tool_call.skipped', { id, name }),
    );
    return done.row;
  }

  /**
   * The call's one result, in the block's transaction (none while deferred). `opened`: the
   * block's compare-and-set just closed the row from an open status, so no result reports it
   * yet and none is looked for.
   */
  private async appendResult(
    tx: TurnTx,
    execution: ToolExecutionRecord,
    payload: Json,
    error: boolean,
    opened = false,
  ): Promise<void> {
    if (this.deferResult) return;
    const message = opened
      ? await appendToolResult(tx.store, tx.turn, this.call, execution.id, payload, error)
      : await appendToolResultOnce(tx.store, tx.turn, this.call, execution.id, payload, error);
    if (message) tx.emit(messageCreated(message));
  }

  /**
   * CAS from the row's current status, and only then append its result (spec §4.4), in the
   * caller's block. Null when someone else (cancel, recovery) closed the row meanwhile.
   */
  private async close(
    tx: TurnTx,
    execution: ToolExecutionRecord,
    status: 'completed' | 'failed' | 'interrupted',
    payload: JsonObject,
  ): Promise<ToolExecutionRecord | null> {
    const row = await tx.store.claimToolExecution(execution.id, {
      from: execution.status,
      to: status,
      ...(status === 'completed' ? { result: payload } : { error: payload as { message: string } }),
      completedAt: nowIso(),
    });
    if (!row) return null;
    this.closedRow = row;
    await this.appendResult(tx, row, payload, status !== 'completed', isOpenToolExecution(execution));
    if (status === 'completed' && this.afterResults.length > 0)
      tx.patchState({ after_results: [...(tx.state.after_results ?? []), ...this.afterResults] });
    const { id, name } = this.call;
    const result_chars = JSON.stringify(payload).length;
    tx.emit(
      status === 'completed'
        ? turnEvent('tool_call.completed', { id, name, result_chars })
        : turnEvent('tool_call.failed', { id, name, error: payload, result_chars }),
    );
    return row;
  }
}
