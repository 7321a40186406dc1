/**
 * Metadata an application passes in (`say(text, metadata)`, a run's or a conversation's
 * `metadata`) may come from its end users: the keys the engine writes and decides on are
 * refused, so nobody can forge a delivered message (which wakes the lane), a steering
 * message, a wait result, a task, a principal, a sub-agent's lineage or a schedule's firing.
 */
import { ArgumentError } from '../errors.js';
import type { JsonObject } from '../store/types.js';

/** Keys of a message's metadata that only the engine writes. */
export const RESERVED_MESSAGE_METADATA: readonly string[] = [
  'delivery_id',
  'source_conversation_id',
  'source_turn_id',
  'steer_id',
  'steered_by',
  'wait_results',
  'task',
  'source',
  'attempt',
  'compaction',
  'tool_name',
  'tool_call_id',
  'interrupted',
  'renamed_tool_call_ids',
  'output_data',
  'parent_conversation_id',
  'parent_turn_id',
  'parent_tool_execution_id',
  'principal',
  'request_id',
  'posted_by',
  'schedule_id',
  'forked_from_message_id',
  'forked_from_turn_id',
  'regenerated_from_turn_id',
];

/** Keys of a conversation's metadata that only the engine writes (from the options that name them). */
export const RESERVED_CONVERSATION_METADATA: readonly string[] = [
  'principal',
  'turnkit_context',
  'turnkit_subject_prompt',
  'turnkit_schedule_id',
  'parent_conversation_id',
  'parent_turn_id',
  'parent_tool_execution_id',
];

/** ArgumentError when `metadata` is not an object or holds a key the engine reserves. */
export function checkCallerMetadata(
  metadata: unknown,
  reserved: readonly string[],
  where: string,
): JsonObject {
  if (metadata === undefined) return {};
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))
    throw new ArgumentError(`${where}: metadata must be an object`);
  const taken = Object.keys(metadata).filter((key) => reserved.includes(key));
  if (taken.length > 0)
    throw new ArgumentError(
      `${where}: metadata key(s) ${taken.join(', ')} are reserved by the engine; use other names`,
      { details: { reserved: taken } },
    );
  return metadata as JsonObject;
}
