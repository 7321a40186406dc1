/**
 * Keys of a turn's `options` that one part of the engine writes and another reads: here, so
 * neither imports the other (the lane builds a turn, the tools phase reads it).
 */

/** The turn option's key: `{ turn_id }` of the recorded turn whose executions answer the calls. */
export const TOOL_REPLAY_OPTION = 'tool_replay';
