/**
 * MCP tools: a Model Context Protocol server's tools as TurnKit tools. The server is
 * connected (and its tools listed) when the application boots, through the official
 * TypeScript SDK; each call then runs inside the tool activity like any other tool, under the
 * same timeouts, heartbeats, cancellation (the activity's AbortSignal cancels the MCP request)
 * and one-result rules.
 */
import { createHash } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ArgumentError, ConfigError, ToolError } from '../errors.js';
import type { Json, JsonObject, Store } from '../store/types.js';
import type { Agent } from './agent.js';
import type { AgentRegistry } from './registry.js';
import type { ToolDefinition, ToolRecovery } from './tool.js';
import { buildTool } from './tool.js';
import { defaultServerName, redactText } from './mcp-redact.js';

export type McpServerOptions = (
  | { stdio: { command: string; args?: string[]; env?: Record<string, string>; cwd?: string } }
  | { url: string | URL; headers?: Record<string, string> }
) & {
  /**
   * Names the server in errors and in the store's tool manifest. Default: the command's file
   * name and its arguments, or the URL's origin and path, with credentials (URL userinfo and
   * query, `--token x`, `key=value`, token-like arguments) hidden; give a name when an argument
   * carries a secret in another shape.
   */
  name?: string;
  /** Prefixes every tool name: `<prefix>_<tool>`, to keep clear of other tools. */
  prefix?: string;
  /**
   * The server's tools are idempotent: a call interrupted by a crash may be re-run (recovery
   * `replaySafe`). Otherwise recovery is `unknown` and an interrupted call is never re-run.
   */
  replaySafe?: boolean;
  /** How long connecting and listing may take at boot (default 15 s). */
  connectTimeoutMs?: number;
  /** The longest one call may take on the MCP side (default 10 minutes; the activity's timeout also applies). */
  callTimeoutMs?: number;
};

/** The listed tools, ready for `defineAgent({ tools: [...set] })`. */
export interface McpToolSet extends ReadonlyArray<ToolDefinition> {
  readonly server: string;
  /** Hash of the tool names and input schemas; workers of one store must agree on it. */
  readonly fingerprint: string;
  /** Stops the server process (stdio) or closes the session (HTTP). */
  close(): Promise<void>;
}

interface ListedTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

const TOOL_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
const toolSets = new WeakMap<ToolDefinition, McpToolSet>();
const connections = new WeakMap<McpToolSet, McpConnection>();

function serverName(options: McpServerOptions): string {
  return options.name ? options.name : defaultServerName(options);
}

/** An error's message, credentials hidden: it reaches the model, the store and history. */
function messageOf(error: unknown): string {
  return redactText(error instanceof Error ? error.message : String(error));
}

/**
 * One MCP session, reopened on the next call after the server went away. Running workers hold
 * it: when the last one stops, the session is closed (a later call opens it again).
 */
class McpConnection {
  #client: Promise<Client> | undefined;
  #stderr = '';
  #closed = false;
  #holders = 0;

  constructor(
    readonly name: string,
    readonly options: McpServerOptions,
  ) {}

  /** The server's last stderr lines, credentials hidden (only boot errors show them). */
  stderrTail(): string {
    return redactText(this.#stderr.trim().split('\n').slice(-5).join('\n'));
  }

  connect(): Promise<Client> {
    if (this.#closed) return Promise.reject(new ToolError(`MCP server ${this.name} is closed`));
    if (this.#client) return this.#client;
    const opening = this.#open(() => {
      // The session is gone (server exited, connection lost): the next call opens a new one.
      if (this.#client === opening) this.#client = undefined;
    });
    this.#client = opening;
    opening.catch(() => {
      if (this.#client === opening) this.#client = undefined;
    });
    return opening;
  }

  async #open(onClose: () => void): Promise<Client> {
    const client = new Client({ name: 'turnkit', version: '0.2.0' });
    const options = this.options;
    let transport;
    if ('stdio' in options) {
      const stdio = new StdioClientTransport({
        command: options.stdio.command,
        args: options.stdio.args ?? [],
        env: { ...getDefaultEnvironment(), ...options.stdio.env },
        ...(options.stdio.cwd ? { cwd: options.stdio.cwd } : {}),
        stderr: 'pipe',
      });
      stdio.stderr?.on(
        'data',
        (chunk: Buffer) => (this.#stderr = (this.#stderr + chunk.toString()).slice(-4_000)),
      );
      transport = stdio;
    } else {
      transport = new StreamableHTTPClientTransport(new URL(String(options.url)), {
        requestInit: { headers: options.headers ?? {} },
      });
    }
    client.onclose = onClose;
    await client.connect(transport, { timeout: options.connectTimeoutMs ?? 15_000 });
    return client;
  }

  hold(): void {
    this.#holders += 1;
  }

  /** The last holder gone, the session closes (the stdio server process exits). */
  async release(): Promise<void> {
    this.#holders -= 1;
    if (this.#holders === 0) await this.#disconnect();
  }

  async #disconnect(): Promise<void> {
    const client = await this.#client?.catch(() => undefined);
    this.#client = undefined;
    await client?.close();
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#disconnect();
  }
}

/** A JSON Schema property as zod, for TurnKit's argument checks (the model sees the original). */
function inputOf(tool: ListedTool): z.ZodObject {
  const properties = (tool.inputSchema['properties'] ?? {}) as Record<string, unknown>;
  const required = new Set((tool.inputSchema['required'] ?? []) as string[]);
  const shape: Record<string, z.ZodType> = {};
  for (const [key, schema] of Object.entries(properties)) {
    let property: z.ZodType;
    try {
      property = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
    } catch {
      property = z.unknown();
    }
    shape[key] = required.has(key) ? property : property.optional();
  }
  return z.object(shape);
}

/** An MCP tool result as TurnKit's payload; `isError` and a malformed result fail the call. */
function payloadOf(server: string, tool: string, result: unknown): Json {
  const record = result as { content?: unknown; structuredContent?: unknown; isError?: unknown } | null;
  if (!record || typeof record !== 'object' || !Array.isArray(record.content ?? []))
    throw new ToolError(`MCP server ${server} returned an invalid result for ${tool}`);
  const content = (record.content ?? []) as { type?: unknown; text?: unknown }[];
  const text = content
    .filter((part) => part?.type === 'text' && typeof part.text === 'string')
    .map((part) => part.text as string)
    .join('\n');
  if (record.isError === true) throw new ToolError(text || `${tool} failed on MCP server ${server}`);
  if (record.structuredContent && typeof record.structuredContent === 'object')
    return record.structuredContent as JsonObject;
  if (content.every((part) => part?.type === 'text')) return { result: text };
  return { content: JSON.parse(JSON.stringify(content)) as Json[] };
}

/**
 * What a failed `tools/call` becomes: an answer that is not a valid tool result or an error the
 * server sent is a known failure (ToolError); a session that broke mid-call has an unknown
 * outcome (a replay-safe tool's plain Error is retried by Temporal under the same key).
 */
function callFailure(server: string, tool: string, recovery: ToolRecovery, error: unknown): Error {
  const message = messageOf(error);
  const mcp = error instanceof McpError;
  const broken =
    mcp &&
    (error.code === Number(ErrorCode.ConnectionClosed) || error.code === Number(ErrorCode.RequestTimeout));
  const transport = /closed|terminated|EPIPE|ECONN|fetch failed/i.test(message);
  if (/invalid [\w/]* ?result/i.test(message) || (!mcp && !transport))
    return new ToolError(`MCP server ${server} returned an invalid result for ${tool}: ${message}`);
  if (mcp && !broken) return new ToolError(`MCP server ${server}: ${tool} failed: ${message}`);
  if (recovery === 'replaySafe') return new Error(`MCP call ${tool} on ${server} failed: ${message}`);
  return new ToolError(`MCP call ${tool} on ${server} failed (outcome unknown): ${message}`);
}

function toTool(connection: McpConnection, listed: ListedTool, options: McpServerOptions): ToolDefinition {
  const name = options.prefix ? `${options.prefix}_${listed.name}` : listed.name;
  if (!TOOL_NAME.test(name)) {
    throw new ConfigError(
      `MCP server ${connection.name} advertises tool ${JSON.stringify(listed.name)}, which is not a valid tool name; pass a prefix or rename it on the server`,
    );
  }
  const recovery: ToolRecovery = options.replaySafe ? 'replaySafe' : 'unknown';
  const tool = buildTool(
    {
      name,
      description: listed.description ?? '',
      input: inputOf(listed),
      recovery,
      execute: async (args, context) => {
        let client: Client;
        try {
          client = await connection.connect();
        } catch (error) {
          // No stderr here: what a server prints is for its operator, not for the model.
          throw new ToolError(`MCP server ${connection.name} is not available: ${messageOf(error)}`);
        }
        let result: unknown;
        try {
          result = await client.callTool(
            { name: listed.name, arguments: args as Record<string, unknown> },
            undefined,
            {
              signal: context.signal,
              timeout: options.callTimeoutMs ?? 600_000,
              resetTimeoutOnProgress: true,
              onprogress: () => context.heartbeat(),
            },
          );
        } catch (error) {
          if (context.signal.aborted) throw error;
          throw callFailure(connection.name, listed.name, recovery, error);
        }
        return payloadOf(connection.name, listed.name, result);
      },
    },
    'ordinary',
  );
  // The model sees the server's own JSON Schema, not a round trip through zod.
  const schema = { ...listed.inputSchema } as JsonObject;
  delete schema['$schema'];
  return Object.freeze({ ...tool, jsonSchema: schema });
}

/**
 * Connects to an MCP server (a stdio command or a streamable-HTTP URL), lists its tools and
 * returns them as TurnKit tools. A server that does not start or cannot be listed is a
 * ConfigError here, at boot; a failure during a call is a failed tool result the model reads.
 */
export async function mcpTools(options: McpServerOptions): Promise<McpToolSet> {
  if (!options || typeof options !== 'object' || (!('stdio' in options) && !('url' in options)))
    throw new ArgumentError('mcpTools needs { stdio: { command, args } } or { url }');
  const name = serverName(options);
  const connection = new McpConnection(name, options);
  let listed: ListedTool[];
  try {
    const client = await connection.connect();
    listed = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined, {
        timeout: options.connectTimeoutMs ?? 15_000,
      });
      listed.push(...(page.tools as ListedTool[]));
      cursor = page.nextCursor;
    } while (cursor);
  } catch (error) {
    await connection.close().catch(() => undefined);
    const tail = connection.stderrTail();
    throw new ConfigError(
      `MCP server ${name} did not start or list its tools: ${messageOf(error)}${tail ? `\n${tail}` : ''}`,
      { details: { server: name } },
    );
  }
  let tools: ToolDefinition[];
  try {
    tools = listed.map((tool) => toTool(connection, tool, options));
    const seen = new Set<string>();
    for (const tool of tools) {
      if (seen.has(tool.name)) throw new ConfigError(`MCP server ${name} lists tool ${tool.name} twice`);
      seen.add(tool.name);
    }
  } catch (error) {
    await connection.close().catch(() => undefined);
    throw error;
  }
  const fingerprint = createHash('sha256')
    .update(JSON.stringify(tools.map((tool) => [tool.name, tool.jsonSchema]).sort()))
    .digest('hex')
    .slice(0, 16);
  const set = Object.assign([...tools], {
    server: name,
    fingerprint,
    close: () => connection.close(),
  }) as unknown as McpToolSet;
  for (const tool of tools) toolSets.set(tool, set);
  connections.set(set, connection);
  return Object.freeze(set);
}

/** The MCP tool sets the registry's agents use. */
export function mcpToolSetsOf(agents: AgentRegistry): McpToolSet[] {
  const sets = new Set<McpToolSet>();
  for (const agentName of agents.names) {
    const agent: Agent = agents.resolve(agentName);
    for (const tool of agent.effectiveTools) {
      const set = toolSets.get(tool);
      if (set) sets.add(set);
    }
  }
  return [...sets];
}

/**
 * A running worker holds the MCP sessions of its agents' tools; the release (when the worker
 * has stopped, its calls all done) closes each session no other running worker holds, so a
 * stdio server exits with the last worker that used it and the process can end. The tool set
 * stays usable: a worker started later opens the session again on its first call.
 */
export function holdMcpSessions(
  agents: AgentRegistry,
  logger: Pick<Console, 'warn'> = console,
): () => Promise<void> {
  const held = mcpToolSetsOf(agents).flatMap((set) => connections.get(set) ?? []);
  for (const connection of held) connection.hold();
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    await Promise.all(
      held.map((connection) =>
        connection.release().catch((error: unknown) => {
          logger.warn(`turnkit: MCP server ${connection.name} did not close cleanly:`, error);
        }),
      ),
    );
  };
}

const manifestId = (server: string) =>
  `conv_mcp${createHash('sha256').update(server).digest('hex').slice(0, 21)}`;

/**
 * Boot-time check that every worker of a store lists the same tools for an MCP server: the
 * first worker records the server's tool manifest in the store (a conversation row of the
 * pseudo-agent `turnkit:mcp`); a worker listing different tools under the same server name
 * is refused with a ConfigError naming the difference. To roll out a changed tool list, give
 * the server a new `name`.
 */
export async function checkMcpManifests(store: Store, agents: AgentRegistry): Promise<void> {
  for (const set of mcpToolSetsOf(agents)) {
    const tools = Object.fromEntries(
      set.map((tool) => [
        tool.name,
        createHash('sha256').update(JSON.stringify(tool.jsonSchema)).digest('hex').slice(0, 16),
      ]),
    );
    const id = manifestId(set.server);
    let recorded: JsonObject | undefined;
    try {
      recorded = (await store.loadConversation(id)).metadata;
    } catch {
      try {
        await store.createConversation({
          id,
          agentName: 'turnkit:mcp',
          metadata: { mcp_server: set.server, fingerprint: set.fingerprint, tools },
        });
        continue;
      } catch {
        recorded = (await store.loadConversation(id)).metadata; // another worker won the race
      }
    }
    if (recorded['fingerprint'] === set.fingerprint) continue;
    const theirs = (recorded['tools'] ?? {}) as Record<string, string>;
    const differences = [
      ...Object.keys(tools)
        .filter((tool) => !(tool in theirs))
        .map((tool) => `+${tool}`),
      ...Object.keys(theirs)
        .filter((tool) => !(tool in tools))
        .map((tool) => `-${tool}`),
      ...Object.keys(tools)
        .filter((tool) => tool in theirs && theirs[tool] !== tools[tool])
        .map((tool) => `~${tool} (input schema)`),
    ];
    throw new ConfigError(
      `MCP server ${set.server}: this worker's tool list differs from the one other workers of this store registered ` +
        `(${differences.join(', ') || 'different schemas'}); run the same server everywhere, or give the changed server a new name`,
      { details: { server: set.server, differences } },
    );
  }
}
