/**
 * `turnkit/console`: the web console's request handler, to mount in an application's own
 * server (decision 46, docs/console.md). The CLI serves the same handler: `turnkit console`.
 */
export type { ConsoleAuthHook, ConsoleHandler, ConsoleHandlerOptions } from './console/handler.js';
export { CONSOLE_REQUEST_HEADER, createConsoleHandler } from './console/handler.js';
export { defaultConsoleAssetsDir } from './console/assets.js';
export type { CodecHandler, CodecHandlerOptions } from './codec/codec-server.js';
export { createCodecHandler, DEFAULT_CODEC_ORIGINS } from './codec/codec-server.js';
export type {
  ConsoleApproval,
  ConsoleConversationSummary,
  ConsolePhase,
  ConsoleStep,
  ConsoleTranscriptPage,
  ConsoleTurnPage,
  ConsoleTurnSummary,
} from './console/data.js';
export type { ConsoleWaitReason } from './store/console-reads.js';
