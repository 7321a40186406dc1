/**
 * `turnkit/ui`: what a browser needs of a run's UI message stream (`useChat<TurnKitUIMessage>()`):
 * its types, part guards, and helpers for status, usage, cost, sub-agents and stored messages.
 * Nothing here imports Node or the TurnKit runtime (a test bundles it for the browser).
 */
export type {
  SubAgentUIData,
  SubAgentUIPart,
  TurnKitMessageMetadata,
  TurnKitUIMessage,
  TurnKitUIMessageChunk,
  TurnStatus,
  Usage,
} from './ui/types.js';
export type { StoredMessageLike, SubAgentDataPart } from './ui/parts.js';
export {
  formatCost,
  isReasoningPart,
  isRunCancelled,
  isRunFailed,
  isRunFinished,
  isStepStartPart,
  isSubAgentPart,
  isTextPart,
  isToolPart,
  messageText,
  runCostOf,
  runErrorOf,
  runStatusOf,
  runUsageOf,
  subAgentOfTool,
  subAgentsOf,
  toolNameOf,
  userTextOf,
} from './ui/parts.js';
