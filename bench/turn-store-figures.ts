/**
 * Per-turn figures from the statements bench/turn-store-bench.ts logged: totals for the worker
 * (the activities) and the client (submit and result read), reads of the turn's own row by
 * activity and by phase of the turn, and statements by kind.
 *
 * A statement is anything the store sends but a transaction's BEGIN, COMMIT or ROLLBACK: those
 * are counted as transactions, as decision 31's profile counted them apart (its 82 statements
 * per turn). On PostgreSQL, advisory locks, savepoints and NOTIFY are statements: each is a
 * round trip. `round_trips` is everything, BEGIN and COMMIT included. A BEGIN sent with the
 * transaction's first lock (`BEGIN; SELECT pg_advisory_xact_lock(…)`, decision 86), and its
 * first statement with them (decision 88), is one round trip: a transaction, and a statement
 * for each statement in it.
 */
import type { Statement } from './statement-counter.js';

interface Counts {
  statements: number;
  transactions: number;
  rowLoads: number;
}

export interface TurnStoreFigures {
  summary: {
    statements: number;
    worker_statements: number;
    client_statements: number;
    other_statements: number;
    transactions: number;
    round_trips: number;
    worker_row_loads: number;
    client_row_loads: number;
    /** The fewest and most statements one turn sent: equal when the counts are deterministic. */
    statements_min: number;
    statements_max: number;
  };
  byLabel: Record<string, Counts>;
  rowLoadsByPhase: Record<string, number>;
  byKind: Record<string, number>;
}

/** The phases of "One turn" in docs/architecture.md, by the activity that runs them. */
const PHASE: Record<string, string> = {
  claimTurn: 'claim',
  claimStep: 'model',
  modelStep: 'model',
  compactStep: 'model',
  toolCall: 'tool',
  finishTools: 'tool',
  outputAudit: 'output',
  outputStep: 'output',
};

const NOT_WORKER = new Set(['client', 'other']);

function kindOf(sql: string): string {
  if (/pg_advisory_xact_lock/i.test(sql)) return 'LOCK';
  if (/pg_notify/i.test(sql)) return 'NOTIFY';
  return (/^\s*(\w+)/.exec(sql)?.[1] ?? '?').toUpperCase();
}

/**
 * The kinds of what one round trip sent: one statement, or a simple query of several (BEGIN,
 * locks and the statement after them, or COMMIT; decision 88), split at `;` (the store's SQL
 * has no `;` of its own; a value sent as a literal is in dollar quotes, left out first).
 */
function kindsOf(sql: string): string[] {
  const unquoted = sql.replace(/\$(tk\d*)\$[\s\S]*?\$\1\$/g, "''");
  return unquoted
    .split(';')
    .filter((part) => part.trim() !== '')
    .map(kindOf);
}

const isControl = (kind: string) => kind === 'BEGIN' || kind === 'COMMIT' || kind === 'ROLLBACK';

const perTurn = (count: number, turns: number) => Math.round((count / turns) * 10) / 10;

export function summarizeTurns(measured: { turnId: string; statements: Statement[] }[]): TurnStoreFigures {
  const n = measured.length;
  const byLabel: Record<string, Counts> = {};
  const rowLoadsByPhase: Record<string, number> = {};
  const byKind: Record<string, number> = {};
  const sizes = measured.map(
    (turn) => turn.statements.flatMap((s) => kindsOf(s.sql)).filter((kind) => !isControl(kind)).length,
  );
  for (const { turnId, statements } of measured) {
    for (const statement of statements) {
      const counts = (byLabel[statement.label] ??= { statements: 0, transactions: 0, rowLoads: 0 });
      for (const kind of kindsOf(statement.sql)) {
        byKind[kind] = (byKind[kind] ?? 0) + 1;
        if (kind === 'BEGIN') counts.transactions++;
        if (!isControl(kind)) counts.statements++;
      }
      if (statement.turnRowId !== turnId) continue;
      counts.rowLoads++;
      const phase = PHASE[statement.label] ?? statement.label;
      rowLoadsByPhase[phase] = (rowLoadsByPhase[phase] ?? 0) + 1;
    }
  }
  const sum = (pick: (label: string) => boolean, field: keyof Counts) =>
    perTurn(
      Object.entries(byLabel).reduce(
        (total, [label, counts]) => total + (pick(label) ? counts[field] : 0),
        0,
      ),
      n,
    );
  const worker = (label: string) => !NOT_WORKER.has(label);
  const only = (name: string) => (label: string) => label === name;
  const any = () => true;
  const average = (counts: Record<string, number>) =>
    Object.fromEntries(Object.entries(counts).map(([key, count]) => [key, perTurn(count, n)]));
  return {
    summary: {
      statements: sum(any, 'statements'),
      worker_statements: sum(worker, 'statements'),
      client_statements: sum(only('client'), 'statements'),
      other_statements: sum(only('other'), 'statements'),
      transactions: sum(any, 'transactions'),
      round_trips: perTurn(
        measured.reduce((total, turn) => total + turn.statements.length, 0),
        n,
      ),
      worker_row_loads: sum(worker, 'rowLoads'),
      client_row_loads: sum(only('client'), 'rowLoads'),
      statements_min: Math.min(...sizes),
      statements_max: Math.max(...sizes),
    },
    byLabel: Object.fromEntries(
      Object.entries(byLabel).map(([label, counts]) => [label, average({ ...counts }) as unknown as Counts]),
    ),
    rowLoadsByPhase: average(rowLoadsByPhase),
    byKind: average(byKind),
  };
}
