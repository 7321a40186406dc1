import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Registered by temporal-dev.sh; register them on any other cluster the same way. */
export const TURNKIT_AGENT = defineSearchAttributeKey('TurnKitAgent', SearchAttributeType.KEYWORD);
export const TURNKIT_CONVERSATION_ID = defineSearchAttributeKey(
  'TurnKitConversationId',
  SearchAttributeType.KEYWORD,
);
export const TURNKIT_ROOT_TURN_ID = defineSearchAttributeKey(
  'TurnKitRootTurnId',
  SearchAttributeType.KEYWORD,
);
export const TURNKIT_STATUS = defineSearchAttributeKey('TurnKitStatus', SearchAttributeType.KEYWORD);

export const TURN_WORKFLOW_ID_PREFIX = 'turnkit-turn-';

export function turnWorkflowId(turnId: string): string {
  return `${TURN_WORKFLOW_ID_PREFIX}${turnId}`;
}

/**
 * The claim token of a turn-workflow run: its run id without dashes. A reset, a re-run or any
 * other run has another one, so the store fences every write of the run it superseded.
 */
export function claimTokenOf(runId: string): string {
  return runId.replace(/-/g, '');
}

export const LANE_WORKFLOW_ID_PREFIX = 'turnkit-lane-';

/** One lane workflow per conversation: it delivers messages and starts the next turn. */
export function laneWorkflowId(conversationId: string): string {
  return `${LANE_WORKFLOW_ID_PREFIX}${conversationId}`;
}

/** Signal names, shared by workflows, activities and the client. */
export const SIGNALS = {
  cancel: 'cancel',
  /** To a turn waiting for its conversation's lane: it may be free now. */
  laneFree: 'laneFree',
  /** To a turn waiting on others: one of its targets finished. */
  targetFinished: 'targetFinished',
  /** To a conversation's lane: look at deliveries and queued turns. */
  wake: 'wake',
} as const;
