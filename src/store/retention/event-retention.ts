/**
 * Events leave at the age the application chose, once their turn has ended (decision 64): a
 * turn still running keeps its whole log, and its next event's sequence stays above every
 * earlier one. The walk pages the events older than the cutoff by the index on
 * (created_at, turn_id, sequence); each page is one delete.
 */
import type { PrunePass } from './prune-pass.js';
import { ENDED } from './prune-pass.js';

interface EventKey {
  createdAt: string;
  turnId: string;
  sequence: number;
}

export async function pruneEvents(pass: PrunePass, cutoffMs: number): Promise<void> {
  const cutoff = pass.time(cutoffMs);
  const { param } = pass.sql.dialect;
  const key = `(created_at, turn_id, sequence)`;
  const keyParams = `(${param('time')}, ${param('text')}, ${param('int')})`;
  const turnEnded = `NOT EXISTS (SELECT 1 FROM turnkit_turns t
      WHERE t.id = turnkit_events.turn_id AND t.status NOT IN (${ENDED}))`;
  let after: EventKey | null = null;
  for (;;) {
    const from = after ? ` AND ${key} > ${keyParams}` : '';
    const fromParams = after ? [after.createdAt, after.turnId, after.sequence] : [];
    const page = await pass.sql.read(
      `SELECT created_at, turn_id, sequence FROM turnkit_events
        WHERE created_at < ${pass.timeParam}${from} ORDER BY created_at, turn_id, sequence${pass.limit}`,
      [cutoff, ...fromParams],
    );
    if (page.length === 0) return;
    const lastRow = page[page.length - 1]!;
    const last: EventKey = {
      createdAt: pass.time(new Date(lastRow['created_at'] as string | Date).getTime()),
      turnId: String(lastRow['turn_id']),
      sequence: Number(lastRow['sequence']),
    };
    // Times travel back in milliseconds: a walk that cannot move past a key stops here.
    if (
      after &&
      after.createdAt === last.createdAt &&
      after.turnId === last.turnId &&
      after.sequence === last.sequence
    )
      return;
    const where = `created_at < ${pass.timeParam}${from} AND ${key} <= ${keyParams} AND ${turnEnded}`;
    const params = [cutoff, ...fromParams, last.createdAt, last.turnId, last.sequence];
    if (pass.dryRun) {
      const [row] = await pass.sql.read(`SELECT COUNT(*) AS n FROM turnkit_events WHERE ${where}`, params);
      pass.counted('events', Number(row?.['n'] ?? 0));
    } else {
      await pass.deleteBatch(
        'events',
        [],
        `DELETE FROM turnkit_events WHERE ${where} RETURNING turn_id`,
        params,
      );
    }
    if (page.length < pass.batchSize) return;
    after = last;
  }
}
