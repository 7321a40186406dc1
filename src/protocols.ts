/**
 * `turnkit/protocols`: TurnKit's agents served to any client, as web handlers to mount in an
 * application's own server (docs/protocols.md): an MCP server whose task calls are durable MCP
 * Tasks, an A2A server per agent, and an AG-UI endpoint whose approvals are interrupts. The CLI serves the same handlers: `turnkit serve`.
 */
export type { ProtocolAuthHook, ProtocolDoorOptions, ProtocolHandler } from './protocols/door.js';
export type { McpHandlerOptions } from './protocols/mcp-server.js';
export { createMcpHandler, DECIDE_TOOL } from './protocols/mcp-server.js';
export type { AgUiHandlerOptions } from './protocols/ag-ui-endpoint.js';
export { createAgUiHandler } from './protocols/ag-ui-endpoint.js';
export type { A2AHandlerOptions } from './protocols/a2a-server.js';
export { createA2AHandler } from './protocols/a2a-server.js';
