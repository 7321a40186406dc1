/**
 * `turnkit/console`: the web console's request handler, to mount in an application's own
 * server (decision 46, docs/console.md). The CLI serves the same handler: `turnkit console`.
 */
export type { ConsoleAuthHook, ConsoleHandler, ConsoleHandlerOptions } from './console/handler.js';
export { CONSOLE_REQUEST_HEADER, createConsoleHandler, defaultConsoleAssetsDir } from './console/handler.js';
export type {
  ConsoleApproval,
  ConsoleConversationSummary,
  ConsolePhase,
  ConsoleStep,
  ConsoleTurnPage,
  ConsoleTurnSummary,
} from './console/data.js';
