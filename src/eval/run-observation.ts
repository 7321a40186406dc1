/**
 * What one run did, read from the store: output, tool calls, cost and latency. The same
 * shape for a recorded run (the baseline) and an evaluated one.
 */
import type { Json, JsonObject, Store, TurnStatus } from '../store/types.js';

export interface ObservedToolCall {
  name: string;
  arguments: JsonObject;
  status: string;
  /** Set when a replayed call matched no recorded call. */
  divergence?: string;
}

export interface RunObservation {
  turnId: string;
  status: TurnStatus;
  output: string | null;
  outputData: Json;
  error: string | null;
  toolCalls: ObservedToolCall[];
  /** USD over the run's whole tree. */
  cost: number;
  tokens: number;
  /** From the claim to the end (queueing excluded), in milliseconds. */
  latencyMs: number | null;
}

export async function observeRun(store: Store, turnId: string): Promise<RunObservation> {
  const turn = await store.loadTurn(turnId);
  const tree = await store.listTurns({ rootTurnId: turn.rootTurnId });
  const executions = await store.listToolExecutions({ turnId });
  executions.sort((a, b) => (a.id < b.id ? -1 : 1));
  const started = Date.parse(turn.startedAt ?? turn.createdAt);
  const ended = turn.completedAt ? Date.parse(turn.completedAt) : NaN;
  return {
    turnId,
    status: turn.status,
    output: turn.outputText,
    outputData: turn.outputData ?? null,
    error: turn.error?.message ?? null,
    toolCalls: executions.map((row) => ({
      name: row.toolName,
      arguments: row.arguments,
      status: row.status,
      ...(row.error?.details?.['replay_divergence'] === true ? { divergence: row.error.message } : {}),
    })),
    cost: tree.reduce((sum, row) => sum + Number(row.cost ?? 0), 0),
    tokens: tree.reduce((sum, row) => sum + (row.usage?.total_tokens ?? 0), 0),
    latencyMs: Number.isNaN(ended) ? null : Math.max(0, ended - started),
  };
}
