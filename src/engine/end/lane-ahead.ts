import { BUSY_TURN_STATUSES, LANE_TURN_STATUSES } from '../../store/types.js';
import type { RepairContext, RepairFinding } from './repair.js';
import { repairTurns } from './repair.js';
import { wakeLane } from './workflow-start.js';

/**
 * A claim of `turnId` was refused `lane_busy`: the turns ahead of it (those that hold the lane,
 * and the oldest submitted pending one) are checked and repaired. When no turn holds the
 * lane and another pending turn heads it, the lane is woken, so that head is started or
 * nudged (it may be waiting for a wake that never came).
 */
export async function checkLaneAhead(context: RepairContext, turnId: string): Promise<RepairFinding[]> {
  const store = context.runtime.store;
  const turn = await store.loadTurn(turnId);
  if (turn.submittedAt === null) return [];
  const lane = await store.listTurns({
    conversationId: turn.conversationId,
    status: [...LANE_TURN_STATUSES],
  });
  const busy = lane.filter((other) => other.id !== turnId && BUSY_TURN_STATUSES.includes(other.status));
  const head = lane.find((other) => other.status === 'pending' && other.submittedAt !== null);
  const ahead = head && head.id !== turnId ? [...busy, head] : busy;
  const findings = await repairTurns(context, ahead);
  if (busy.length === 0 && head && head.id !== turnId && !findings.some((f) => f.done)) {
    await wakeLane(context, turn.conversationId);
  }
  return findings;
}
