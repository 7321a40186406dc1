/**
 * The statuses a turn ends in, in one list that the workflow, the engine, the store and
 * clients share. Values only of the store's `TurnStatus`; the workflow bundle may load it.
 */
import type { TurnStatus } from '../store/types.js';

/** `stale` is deliberately not terminal (spec §2.7); no Temporal turn ever becomes stale. */
export const TERMINAL_TURN_STATUSES: readonly TurnStatus[] = ['completed', 'failed', 'cancelled'];
