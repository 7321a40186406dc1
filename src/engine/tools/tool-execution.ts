import type { Agent } from '../../agents/agent.js';
import type { ToolDefinition } from '../../agents/tool.js';
import { storedErrorClass } from '../../errors.js';
import { nowIso } from '../../store/records.js';
import type { Json, JsonObject, Store, ToolExecutionRecord, TurnRecord } from '../../store/types.js';
import type { ToolCallOutcome } from '../../contract/digests.js';
import type { Runtime } from '../runtime.js';
import type { toolCallParts } from '../step/turn-state.js';
import type { TurnEvent } from '../step/events.js';
import { messageCreated, turnEvent } from '../step/events.js';
import type { TurnStep, TurnTx } from '../step/turn-step.js';
import { findToolExecution } from './execution-lookup.js';
import { appendToolResultOnce } from './tool-results.js';

export type ToolCall = ReturnType<typeof toolCallParts>[number];

export interface ToolCallHooks {
  signal: AbortSignal;
  heartbeat: (details?: unknown) => void;
  /** Runs a replay-safe tool that throws may have (`maxToolAttempts`), counted in the store. */
  maxAttempts: number;
}

/** The stored class of what a call threw, with the details its failure records. */
export function errorDetails(error: unknown, extra: JsonObject = {}): JsonObject {
  return { class: storedErrorClass(error instanceof Error ? error.name : 'Error'), ...extra };
}

/**
 * One tool call of the turn being run, in its activity's `TurnStep`: what it runs against, and
 * how its execution row is finished (compare-and-set, then its one result, in one block).
 */
export class ToolExecution {
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

  /** Fenced: the coordination tools and `ToolContext.store` write through it. */
  get store(): Store {
    return this.step.fencedStore();
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

  /** The call's one result, in the block's transaction (none while deferred). */
  async appendResult(
    tx: TurnTx,
    execution: ToolExecutionRecord,
    payload: Json,
    error: boolean,
  ): Promise<void> {
    if (this.deferResult) return;
    const message = await appendToolResultOnce(tx.store, tx.turn, this.call, execution.id, payload, error);
    if (message) tx.emit(messageCreated(message));
  }

  /**
   * CAS from the row's current status, and only then append its result (spec §4.4), in the
   * caller's block. Null when someone else (cancel, recovery) closed the row meanwhile.
   */
  async close(
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
    await this.appendResult(tx, row, payload, status !== 'completed');
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

  /** `close` in a block of its own; the late outcome of a row closed meanwhile is dropped. */
  async finish(
    execution: ToolExecutionRecord,
    status: 'completed' | 'failed' | 'interrupted',
    payload: JsonObject,
    before: readonly TurnEvent[] = [],
  ): Promise<ToolExecutionRecord> {
    const row = await this.step.write(async (tx) => {
      tx.emit(...before);
      return this.close(tx, execution, status, payload);
    });
    return row ?? this.step.store.loadToolExecution(execution.id);
  }

  fail(
    execution: ToolExecutionRecord,
    message: string,
    details?: JsonObject,
    before: readonly TurnEvent[] = [],
  ): Promise<ToolExecutionRecord> {
    return this.finish(execution, 'failed', details ? { message, details } : { message }, before);
  }
}
