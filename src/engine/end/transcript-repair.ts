import type { Json, MessageRecord, Store, TurnRecord } from '../../store/types.js';
import { appendAfterResultsTo } from '../step/after-results.js';
import { appendToolResultOnce } from '../step/tool-results.js';
import { outcomeUnknown } from '../step/result-texts.js';
import { toolCallParts } from '../step/turn-state.js';

/**
 * Gives every tool call of the turn exactly one result message (architecture §4.2): a
 * finished execution's real result, an interrupted one's "outcome unknown", and a call that
 * never ran a "not executed" error naming why.
 */
export async function repairTranscript(
  store: Store,
  turn: TurnRecord,
  reason: string,
): Promise<MessageRecord[]> {
  const messages = await store.listMessages(turn.conversationId, { throughSequence: 0, turnId: turn.id });
  const answered = new Set(
    messages.flatMap((message) =>
      message.kind === 'tool_result'
        ? message.content.flatMap((p) => (p.type === 'tool_result' ? [p.tool_call_id] : []))
        : [],
    ),
  );
  const executions = await store.listToolExecutions({ turnId: turn.id });
  const appended: MessageRecord[] = [];
  for (const message of messages) {
    if (message.kind !== 'tool_call') continue;
    for (const call of toolCallParts(message.content)) {
      if (answered.has(call.id)) continue;
      const execution = executions.find((row) => row.toolCallId === call.id);
      let payload: Json;
      let error = true;
      let interrupted = false;
      if (execution && (execution.status === 'completed' || execution.status === 'cancelled')) {
        payload = execution.result;
        error = false;
      } else if (execution && execution.status === 'failed') {
        payload = execution.error as unknown as Json;
      } else if (execution) {
        // What stopped it, as its row records it (the interrupting write's reason).
        payload =
          execution.status === 'interrupted' && execution.error
            ? (execution.error as unknown as Json)
            : { message: outcomeUnknown(reason) };
        interrupted = true;
      } else {
        payload = { message: `not executed: ${reason}` };
      }
      const row = await appendToolResultOnce(store, turn, call, execution?.id ?? null, payload, error, {
        interrupted,
      });
      if (row) appended.push(row);
      answered.add(call.id);
    }
  }
  // Every call has its result now: an image or analysis a finished call produced goes after them.
  return [...appended, ...(await appendAfterResultsTo(store, turn.id))];
}
