/**
 * Per-turn figures from the statements bench/turn-store-bench.ts logged: totals for the worker
 * (the activities) and the client (submit and result read), reads of the turn's own row by
 * activity and by phase of the turn, and statements by kind.
 */
import type { Statement } from './statement-counter.js';

export interface TurnStoreFigures {
  summary: {
    statements: number;
    worker_statements: number;
    client_statements: number;
    other_statements: number;
    transactions: number;
    worker_row_loads: number;
    client_row_loads: number;
    /** The fewest and most statements one turn sent: equal when the counts are deterministic. */
    statements_min: number;
    statements_max: number;
  };
  byLabel: Record<string, { statements: number; rowLoads: number }>;
  rowLoadsByPhase: Record<string, number>;
  byKind: Record<string, number>;
}

/** The phases of "One turn" in docs/architecture.md, by the activity that runs them. */
const PHASE: Record<string, string> = {
  claimTurn: 'claim',
  modelStep: 'model',
  compactStep: 'model',
  toolCall: 'tool',
  finishTools: 'tool',
  outputAudit: 'output',
  outputStep: 'output',
};

const WORKER_EXCLUDED = new Set(['client', 'other']);

function kindOf(sql: string): string {
  if (/pg_advisory_xact_lock/i.test(sql)) return 'LOCK';
  if (/pg_notify/i.test(sql)) return 'NOTIFY';
  return (/^\s*(\w+)/.exec(sql)?.[1] ?? '?').toUpperCase();
}

const perTurn = (count: number, turns: number) => Math.round((count / turns) * 10) / 10;

function tally<K extends string>(counts: Record<K, number>, key: K, by = 1): void {
  counts[key] = (counts[key] ?? 0) + by;
}

export function summarizeTurns(measured: { turnId: string; statements: Statement[] }[]): TurnStoreFigures {
  const n = measured.length;
  const byLabel: Record<string, { statements: number; rowLoads: number }> = {};
  const rowLoadsByPhase: Record<string, number> = {};
  const byKind: Record<string, number> = {};
  const sizes = measured.map((turn) => turn.statements.length);
  for (const { turnId, statements } of measured) {
    for (const statement of statements) {
      const counts = (byLabel[statement.label] ??= { statements: 0, rowLoads: 0 });
      counts.statements++;
      tally(byKind, kindOf(statement.sql));
      if (statement.turnRowId !== turnId) continue;
      counts.rowLoads++;
      tally(rowLoadsByPhase, PHASE[statement.label] ?? statement.label);
    }
  }
  const sum = (pick: (label: string) => boolean, field: 'statements' | 'rowLoads') =>
    Object.entries(byLabel).reduce((total, [label, counts]) => total + (pick(label) ? counts[field] : 0), 0);
  const worker = (label: string) => !WORKER_EXCLUDED.has(label);
  const only = (name: string) => (label: string) => label === name;
  const average = <T extends Record<string, number>>(counts: T) =>
    Object.fromEntries(Object.entries(counts).map(([key, count]) => [key, perTurn(count, n)]));
  return {
    summary: {
      statements: perTurn(
        sizes.reduce((a, b) => a + b, 0),
        n,
      ),
      worker_statements: perTurn(sum(worker, 'statements'), n),
      client_statements: perTurn(sum(only('client'), 'statements'), n),
      other_statements: perTurn(sum(only('other'), 'statements'), n),
      transactions: perTurn(byKind['BEGIN'] ?? 0, n),
      worker_row_loads: perTurn(sum(worker, 'rowLoads'), n),
      client_row_loads: perTurn(sum(only('client'), 'rowLoads'), n),
      statements_min: Math.min(...sizes),
      statements_max: Math.max(...sizes),
    },
    byLabel: Object.fromEntries(
      Object.entries(byLabel).map(([label, counts]) => [
        label,
        { statements: perTurn(counts.statements, n), rowLoads: perTurn(counts.rowLoads, n) },
      ]),
    ),
    rowLoadsByPhase: average(rowLoadsByPhase),
    byKind: average(byKind),
  };
}
