/**
 * `turnkit`: what an application defines (agents, tools, model clients, specialists) and the
 * client it starts and watches runs with. The worker is `turnkit/worker`, stores and migrations
 * are `turnkit/store`, the scripted models are `turnkit/testing`, the browser's types are
 * `turnkit/ui`; internals are not exported.
 *
 * @packageDocumentation
 * @module turnkit
 */
import { SIGNALS as ALL_SIGNALS } from './workflows/contract.js';

export { defineAgent, DEFAULT_LIMITS } from './agents/agent.js';
export type {
  Agent,
  AgentOptions,
  BudgetLimits,
  OutputConstraint,
  OutputViolation,
  PromptMode,
} from './agents/agent.js';
export {
  outputPolicy,
  outputPolicyFromFile,
  requireImage,
  requireMediaAnalysis,
} from './agents/output-policy.js';
export type {
  ConstraintContext,
  ConstraintResult,
  OutputCheck,
  OutputPolicy,
  OutputPolicyKind,
  OutputPolicyOption,
  OutputPolicyOptions,
} from './agents/output-policy.js';
export { checkOutputPolicy } from './engine/output/check-output-policy.js';
export type { CheckOutputPolicyOptions } from './engine/output/check-output-policy.js';
export type { OutputAudit } from './engine/output/violations.js';
export { defineTool } from './agents/tool.js';
export { aiSdkTools } from './agents/ai-sdk-tools.js';
export type {
  AiSdkToolExecutionOptions,
  AiSdkToolOptions,
  AiSdkToolsOptions,
} from './agents/ai-sdk-tools.js';
export type { ToolInputSchema } from './agents/tool-input.js';
export { imageTool, IMAGE_MAX_BYTES } from './agents/image-tool.js';
export { viewMediaTool } from './agents/view-media-tool.js';
export type { MediaFetch, ViewMediaResult, ViewMediaToolOptions } from './agents/view-media-tool.js';
export type { ImageGate, ImageToolOptions, ImageToolResult } from './agents/image-tool.js';
export { launchAgentTool, sendMessageTool, waitForTool } from './agents/coordination.js';
export type { LaunchAgentTool } from './agents/coordination.js';
export type {
  AfterResultsMessage,
  CallHistory,
  ToolContext,
  ToolDefinition,
  ToolOptions,
  NeedsApproval,
  ApprovalContext,
  ToolRecovery,
} from './agents/tool.js';
export type {
  ToolPolicy,
  ToolPolicyCall,
  ToolPolicyContext,
  ToolPolicyDecision,
} from './agents/tool-policy.js';
export { AgentRegistry } from './agents/registry.js';
export { mcpTools } from './agents/mcp.js';
export type { McpServerOptions, McpToolSet } from './agents/mcp.js';
export type {
  AuthorizationAction,
  AuthorizationPolicy,
  AuthorizationRequest,
  EventListener,
  RuntimeOptions,
} from './engine/runtime.js';
export type { TurnPreview, PromptReport } from './engine/model/model-request.js';
export type { TracingOptions } from './engine/telemetry/tracing.js';
export { TurnKitClient, ConversationHandle } from './client/turnkit-client.js';
export type {
  TurnKitClientOptions,
  RunOptions,
  ConversationOptions,
  SendMessageOptions,
} from './client/turnkit-client.js';
export { RunHandle } from './client/run-handle.js';
export { ScheduleHandle } from './client/schedules.js';
export type { RetentionScheduleOptions } from './client/retention-schedule.js';
export type { EraseOptions, ErasedKind, ErasureReport, ErasureSubject } from './client/erase.js';
export type { PruneReport, RetentionPolicy } from './store/index.js';
export type {
  ScheduleBudget,
  ScheduleChanges,
  ScheduleInfo,
  ScheduleOptions,
  ScheduleOverlap,
  ScheduleSummary,
} from './client/schedules.js';
export type { RunStreamOptions, RunStreamPart, SubAgentOrigin } from './client/run-stream.js';
export { runSseHandler, toUIMessageStreamResponse } from './client/ui-stream.js';
export type { RunSseOptions, StreamErrorLogger, StreamableRun, UIStreamOptions } from './client/ui-stream.js';
export type {
  SubAgentUIData,
  SubAgentUIPart,
  TurnKitMessageMetadata,
  TurnKitUIMessage,
  TurnKitUIMessageChunk,
} from './ui/types.js';
export { laneWorkflowId, turnWorkflowId, UPDATES } from './workflows/contract.js';
export type { ApprovalResult, ControlState } from './workflows/contract.js';
export type { ApprovalAnswer, PendingApproval } from './client/controls.js';
export type { InputStatus, MessagesAfter, PostOptions } from './client/post.js';
export type { ForkOptions, RegenerateOptions } from './client/fork.js';
export { POST_POLICIES } from './contract/post-request.js';
export type { PostDisposition, PostPolicy, PostReceipt } from './contract/post-request.js';
export {
  ArgumentError,
  AuthorizationError,
  BudgetError,
  CodecKeyError,
  CompactionError,
  ConfigError,
  ContentErasedError,
  ControlError,
  ConversationBusyError,
  ForkError,
  InputError,
  ModelAccessError,
  ModelError,
  PostConflictError,
  RecordNotFound,
  StoreError,
  StoreMismatchError,
  StreamCursorError,
  ToolError,
  ToolValidationError,
  TurnKitError,
  WorkflowClosed,
  WorkflowStartError,
} from './errors.js';
export { EncryptionCodec, ENCRYPTED_ENCODING, KEY_ID_METADATA } from './codec/encryption-codec.js';
export type { CodecKey } from './codec/encryption-codec.js';
export { CODEC_KEYS_ENV, parseCodecKeys, payloadCodecsFromEnv } from './codec/codec-keys.js';
export { TERMINAL_TURN_STATUSES, TURN_STATUSES, TOOL_EXECUTION_STATUSES } from './store/types.js';
export type {
  ModelCallOptions,
  ModelClient,
  ModelMessage,
  ModelRequest,
  ModelResult,
  ModelToolSpec,
  ModelUsage,
  Thinking,
} from './models/types.js';
export { AiSdkModel } from './models/ai-sdk-model.js';
export type { AiSdkModelOptions } from './models/ai-sdk-model.js';
export { createModelClient, modelClientFromEnv } from './models/providers.js';
export type { ProviderConfig } from './models/providers.js';
export { ProviderRegistryModel } from './models/provider-registry.js';
export type { ProviderMap, ProviderRegistryModelOptions } from './models/provider-registry.js';
export type { Cost, CostConfig, CostRates } from './models/cost.js';
export type { ModelChoice } from './models/model-chain.js';
export { AiSdkImageModel } from './models/image.js';
export type {
  AiSdkImageModelOptions,
  GeneratedImage,
  ImageCallOptions,
  ImageModel,
  ImageRequest,
  ImageResult,
  ImageUsage,
} from './models/image.js';
export { FILE_MIME_TYPES, IMAGE_MIME_TYPES, MEDIA_MAX_BYTES, mediaPart } from './models/media.js';
export type { MediaInput, MediaLimits, MediaPart, ModelMedia } from './models/media.js';
// Specialists (spec §7.4): factories that return ordinary agents.
export {
  oracle,
  readFileTool,
  READ_FILE_DENY,
  READ_FILE_MAX_BYTES,
  ORACLE_INSTRUCTIONS,
} from './specialists/oracle.js';
export type { OracleOptions, ReadFileResult, ReadFileToolOptions } from './specialists/oracle.js';
export { librarian, githubRepositoryTool, LIBRARIAN_INSTRUCTIONS } from './specialists/librarian.js';
export type {
  GitHubOperation,
  GitHubReadResult,
  GitHubRequest,
  GitHubResponse,
  GitHubToolOptions,
  GitHubTransport,
  LibrarianOptions,
} from './specialists/librarian.js';
export { painter, paintImageTool, PAINTER_INSTRUCTIONS } from './specialists/painter.js';
export type {
  ImagePart,
  PaintGate,
  PainterOptions,
  PaintResult,
  PaintToolOptions,
} from './specialists/painter.js';
export { readOnlyTool, assertReadOnly } from './specialists/read-only.js';
export type { ReadOnlyToolOptions, SpecialistAgentOptions } from './specialists/read-only.js';
export { configure } from './config.js';
export type { TurnKitConfiguration, TurnKitDefaults } from './config.js';
export { DEFAULT_PROMPT_SECTIONS } from './agents/prompt.js';
export type {
  ContextContribution,
  ContextContributor,
  ContributorContext,
  CustomPromptSection,
  PromptSectionEntry,
  PromptSectionName,
  SystemPromptOption,
  SystemPromptView,
} from './agents/prompt.js';
export type { SubjectInput, TurnOptions } from './client/turnkit-client.js';
export { defineSkill, skillFromFile, skillsFromDirectory } from './agents/skill.js';
export type { Skill, SkillOptions } from './agents/skill.js';
export { DEFAULT_COMPACTION } from './agents/compaction-policy.js';
export type { CompactionPolicy, CompactionSetting } from './agents/compaction-policy.js';
export type { ManualCompactionOptions } from './engine/model/compaction.js';
export { evaluate } from './eval/evaluate.js';
export type { EvaluateOptions, EvalVariant } from './eval/evaluate.js';
export { readEvalCases, recordedCases } from './eval/eval-case.js';
export type { EvalCase, RecordedSelection } from './eval/eval-case.js';
export type {
  BaselineRun,
  CaseChanges,
  EvalCaseResult,
  EvalReport,
  VariantSummary,
} from './eval/eval-report.js';
export type { ObservedToolCall, RunObservation } from './eval/run-observation.js';
export {
  costScorer,
  exactMatch,
  jsonSchemaScorer,
  latencyScorer,
  policyScorer,
  regexMatch,
} from './eval/scorers.js';
export type { ScoreOutcome, ScoredRun, Scorer, ScorerInput, ScoreResult } from './eval/scorers.js';
export { renderHtmlReport } from './eval/html-report.js';

/** The signal names an application sends (`temporal workflow signal --name …`); the rest are TurnKit's own. */
export const SIGNALS = { cancel: ALL_SIGNALS.cancel } as const;
