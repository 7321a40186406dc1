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
