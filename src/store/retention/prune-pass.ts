/**
 * One prune pass: what it deleted (or, dry, would delete) and how it deleted it, a batch per
 * transaction. Every retention walk goes through `deleteBatch`, so no transaction of a pass
 * deletes more than the policy's batch size.
 */
import type { LockKey } from '../sql/driver.js';
import type { SqlStatements } from '../sql/sql-store.js';
import { TERMINAL_TURN_STATUSES } from '../types.js';

export type PrunedKind =
  | 'streamParts'
  | 'events'
  | 'conversations'
  | 'messages'
  | 'turns'
  | 'toolExecutions'
  | 'deliveries'
  | 'waits';

export interface PruneReport {
  dryRun: boolean;
  /** Rows deleted by kind (a dry run: rows that would be). */
  deleted: Record<PrunedKind, number>;
  /**
   * Conversations the policy would remove but that stay: a turn of theirs is unfinished, or
   * a turn tree they hold reaches into another conversation.
   */
  keptConversations: number;
  /** Transactions that deleted rows, and the most rows one of them deleted. */
  batches: number;
  largestBatch: number;
  /** The longest a batch's statements ran inside its transaction (the write lock held), in ms. */
  longestBatchMs: number;
  /** The tables the pass vacuumed (PostgreSQL, with the policy's `vacuum`). */
  vacuumed: string[];
}

/** The statuses in which a turn has ended, as an SQL list (constants, never input). */
export const ENDED = TERMINAL_TURN_STATUSES.map((status) => `'${status}'`).join(', ');

export class PrunePass {
  readonly report: PruneReport;
  /** Where this pass's stream-part and event walks stop (epoch ms), null when they do not run. */
  readonly cutoffs: { streamParts: number | null; events: number | null } = {
    streamParts: null,
    events: null,
  };

  constructor(
    readonly sql: SqlStatements,
    readonly batchSize: number,
    dryRun: boolean,
    private readonly onBatch: (report: PruneReport) => void = () => undefined,
  ) {
    this.report = {
      dryRun,
      deleted: {
        streamParts: 0,
        events: 0,
        conversations: 0,
        messages: 0,
        turns: 0,
        toolExecutions: 0,
        deliveries: 0,
        waits: 0,
      },
      keptConversations: 0,
      batches: 0,
      largestBatch: 0,
      longestBatchMs: 0,
      vacuumed: [],
    };
  }

  get dryRun(): boolean {
    return this.report.dryRun;
  }

  /** `LIMIT n` with the pass's batch size (an integer the policy checked). */
  get limit(): string {
    return ` LIMIT ${this.batchSize}`;
  }

  /** What a dry run counted. */
  counted(kind: PrunedKind, rows: number): void {
    this.report.deleted[kind] += rows;
  }

  /**
   * Runs one `DELETE … RETURNING` of at most a batch in a transaction of its own holding
   * `keys`; `check` runs first inside it and may refuse (returns false: nothing deleted).
   * Returns the rows deleted, or null when `check` refused.
   */
  async deleteBatch(
    kind: PrunedKind,
    keys: readonly LockKey[],
    statement: string,
    params: readonly unknown[],
    check?: (query: (sql: string, params: readonly unknown[]) => Promise<unknown[]>) => Promise<boolean>,
  ): Promise<number | null> {
    let heldMs = 0;
    const deleted = await this.sql.batch(keys, async (connection) => {
      const started = performance.now();
      try {
        if (check && !(await check((sql, p) => connection.query(sql, p)))) return null;
        return (await connection.query(statement, params)).length;
      } finally {
        heldMs = performance.now() - started;
      }
    });
    this.report.longestBatchMs = Math.max(this.report.longestBatchMs, Math.round(heldMs * 10) / 10);
    if (deleted === null) return null;
    if (deleted > 0) {
      this.report.deleted[kind] += deleted;
      this.report.batches++;
      this.report.largestBatch = Math.max(this.report.largestBatch, deleted);
      this.onBatch(this.report);
    }
    return deleted;
  }

  /** A time as the dialect's parameter expects it. */
  time(ms: number): string {
    return new Date(ms).toISOString();
  }

  get timeParam(): string {
    return this.sql.dialect.param('time');
  }
}

/** A row's time column as epoch milliseconds (SQLite: ISO text; PostgreSQL: a Date). */
export function epochOf(value: unknown): number {
  return value instanceof Date ? value.getTime() : new Date(String(value)).getTime();
}
