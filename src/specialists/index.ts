// Specialists (spec §7.4): factories that return ordinary agents.
export { oracle, readFileTool, READ_FILE_DENY, READ_FILE_MAX_BYTES, ORACLE_INSTRUCTIONS } from './oracle.js';
export type { OracleOptions, ReadFileResult, ReadFileToolOptions } from './oracle.js';
export {
  librarian,
  githubRepositoryTool,
  parseRepository,
  encodeRepositoryPath,
  fetchTransport,
  GITHUB_API,
  GITHUB_OPERATIONS,
  LIBRARIAN_INSTRUCTIONS,
} from './librarian.js';
export type {
  GitHubOperation,
  GitHubReadResult,
  GitHubRequest,
  GitHubResponse,
  GitHubToolOptions,
  GitHubTransport,
  LibrarianOptions,
} from './librarian.js';
export { painter, paintImageTool, PAINTER_INSTRUCTIONS } from './painter.js';
export type { ImagePart, PaintGate, PainterOptions, PaintResult, PaintToolOptions } from './painter.js';
export { readOnlyTool, assertReadOnly } from './read-only.js';
export type { ReadOnlyToolOptions, SpecialistAgentOptions } from './read-only.js';
