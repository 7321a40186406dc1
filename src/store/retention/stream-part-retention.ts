/**
 * Stream parts leave once every turn of their run's tree has ended, a grace window ago
 * (decision 64): a client that reconnects within the window still resumes from its cursor.
 * The walk goes by sequence, oldest first, a batch at a time, and stops at the first part
 * written after the cutoff: a run that ended before the cutoff wrote every part before it.
 * So a pass reads what it deletes plus the parts of runs still live, never the whole table.
 */
import type { PrunePass } from './prune-pass.js';
import { ENDED, epochOf } from './prune-pass.js';

export async function pruneStreamParts(pass: PrunePass, cutoffMs: number): Promise<void> {
  const cutoff = pass.time(cutoffMs);
  // No turn of the part's tree is unfinished or ended after the cutoff (a part whose run has
  // no turn row left is an orphan, and goes too).
  const runEnded = `NOT EXISTS (SELECT 1 FROM turnkit_turns u
      WHERE u.root_turn_id = turnkit_stream_parts.root_turn_id
        AND (u.status NOT IN (${ENDED}) OR u.completed_at IS NULL OR u.completed_at >= ${pass.timeParam}))`;
  const inWindow = `sequence > ? AND sequence <= ? AND ${runEnded}`;
  let after = 0;
  for (;;) {
    const window = await pass.sql.read(
      `SELECT sequence, created_at FROM turnkit_stream_parts WHERE sequence > ? ORDER BY sequence${pass.limit}`,
      [after],
    );
    const young = window.findIndex((row) => epochOf(row['created_at']) >= cutoffMs);
    const old = young === -1 ? window : window.slice(0, young);
    if (old.length > 0) {
      const last = Number(old[old.length - 1]!['sequence']);
      if (pass.dryRun) {
        const [row] = await pass.sql.read(
          `SELECT COUNT(*) AS n FROM turnkit_stream_parts WHERE ${inWindow}`,
          [after, last, cutoff],
        );
        pass.counted('streamParts', Number(row?.['n'] ?? 0));
      } else {
        await pass.deleteBatch(
          'streamParts',
          [],
          `DELETE FROM turnkit_stream_parts WHERE ${inWindow} RETURNING sequence`,
          [after, last, cutoff],
        );
      }
      after = last;
    }
    if (young !== -1 || window.length < pass.batchSize) return;
  }
}
