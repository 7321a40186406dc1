import type { Agent } from '../../agents/agent.js';
import type { ToolDefinition } from '../../agents/tool.js';
import { storedErrorClass } from '../../errors.js';
import { nowIso } from '../../store/records.js';
import type {
  Json,
  JsonObject,
  MessageRecord,
  Store,
  ToolExecutionRecord,
  TurnRecord,
} from '../../store/types.js';
import type { ToolCallOutcome } from '../../contract/digests.js';
import type { Runtime } from '../runtime.js';
import type { toolCallParts } from '../step/turn-state.js';
import { turnState, updateState } from '../step/turn-state.js';
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
 * One tool call of the turn being run: what it runs against, and how its execution row is
 * finished (compare-and-set, then its one result). Events wait for `flushEvents`.
 */
export class ToolExecution {
  readonly events: Array<[string, JsonObject]> = [];
  /** Messages the tool asked for after the results; stored with its completion. */
  readonly afterResults: JsonObject[] = [];

  constructor(
    readonly runtime: Runtime,
    readonly store: Store,
    readonly turn: TurnRecord,
    readonly agent: Agent,
    readonly call: ToolCall,
    readonly tool: ToolDefinition | undefined,
    readonly deferResult: boolean,
  ) {}

  async findExecution(): Promise<ToolExecutionRecord | undefined> {
    return findToolExecution(this.store, this.turn.id, this.call.id);
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

  async appendResult(
    execution: ToolExecutionRecord,
    payload: Json,
    error: boolean,
  ): Promise<MessageRecord | null> {
    if (this.deferResult) return null;
    return appendToolResultOnce(this.store, this.turn, this.call, execution.id, payload, error);
  }

  resultCreated(message: MessageRecord | null): void {
    if (message)
      this.events.push(['message.created', { message_id: message.id, role: 'tool', kind: 'tool_result' }]);
  }

  /** CAS from the row's current status, and only then append its result (spec §4.4). */
  async finish(
    execution: ToolExecutionRecord,
    status: 'completed' | 'failed' | 'interrupted',
    payload: JsonObject,
  ): Promise<ToolExecutionRecord> {
    const { row, message } = await this.store.atomic(null, async () => {
      const row = await this.store.claimToolExecution(execution.id, {
        from: execution.status,
        to: status,
        ...(status === 'completed' ? { result: payload } : { error: payload as { message: string } }),
        completedAt: nowIso(),
      });
      const message = row ? await this.appendResult(row, payload, status !== 'completed') : null;
      if (row && status === 'completed' && this.afterResults.length > 0) {
        const fresh = await this.store.loadTurn(this.turn.id);
        await updateState(this.store, this.turn.id, {
          after_results: [...(turnState(fresh).after_results ?? []), ...this.afterResults],
        });
      }
      return { row, message };
    });
    // Someone else (cancel, recovery) closed the row while the tool ran: the late outcome is dropped.
    if (!row) return this.store.loadToolExecution(execution.id);
    this.resultCreated(message);
    const chars = JSON.stringify(payload).length;
    this.events.push(
      status === 'completed'
        ? ['tool_call.completed', { id: this.call.id, name: this.call.name, result_chars: chars }]
        : [
            'tool_call.failed',
            { id: this.call.id, name: this.call.name, error: payload, result_chars: chars },
          ],
    );
    return row;
  }

  fail(execution: ToolExecutionRecord, message: string, details?: JsonObject): Promise<ToolExecutionRecord> {
    return this.finish(execution, 'failed', details ? { message, details } : { message });
  }

  async flushEvents(): Promise<void> {
    await this.runtime.emitAll(this.turn, this.events.splice(0));
  }
}
