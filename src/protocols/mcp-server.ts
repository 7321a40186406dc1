/**
 * TurnKit's agents as an MCP server over streamable HTTP (decision 69): each served agent is a
 * tool, and a call made as an MCP Task (spec 2025-11-25) is its turn: the task id is the turn
 * id, `tasks/get` reads the store, `tasks/result` waits for the turn's end, `tasks/cancel`
 * cancels the turn. The server keeps no session and no state of its own, so a task outlives
 * the connection, the server process and a worker: it is the turn.
 *
 * A call awaiting approval is `input_required`; the client decides it with the
 * `turnkit_decide` tool (elicitation needs a session this stateless server does not keep).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type {
  CallToolResult,
  Result,
  ServerNotification,
  Task,
  Tool,
} from '@modelcontextprotocol/sdk/types.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { RunHandle } from '../client/run-handle.js';
import type { RunStreamPart } from '../client/run-stream.js';
import type { TurnKitClient } from '../client/turnkit-client.js';
import { ArgumentError, AuthorizationError, ControlError, InputError, RecordNotFound } from '../errors.js';
import type { Json, TurnRecord } from '../store/types.js';
import { TERMINAL_TURN_STATUSES } from '../store/types.js';
import type { ProtocolDoorOptions, ProtocolHandler } from './door.js';
import {
  DEFAULT_MAX_BODY_BYTES,
  DoorError,
  principalOf,
  reachableTurn,
  readBody,
  servedAgents,
} from './door.js';
import type { ServedRun } from './served-run.js';
import {
  errorText,
  outputObject,
  servedRun,
  startServedRun,
  stateMessage,
  taskTextOf,
} from './served-run.js';

export type McpHandlerOptions = ProtocolDoorOptions & {
  /** The server's name in `initialize` (default `turnkit`). */
  name?: string;
  /** How often a client should poll a task, in ms (default 500). */
  pollIntervalMs?: number;
};

/** The control tool a client decides a pending approval with. */
export const DECIDE_TOOL = 'turnkit_decide';

/** How long `tasks/cancel` waits for the cancelled turn to end before answering its state. */
const CANCEL_WAIT_MS = 30_000;

/** Creates the MCP server's request handler (mount it at e.g. `/mcp`, or run `turnkit serve`). */
export function createMcpHandler(options: McpHandlerOptions): ProtocolHandler {
  const door = new McpDoor(options);
  return (request, response) => door.handle(request, response);
}

class McpDoor {
  readonly client: TurnKitClient;
  readonly served: string[];
  readonly pollInterval: number;

  constructor(readonly options: McpHandlerOptions) {
    this.client = options.client;
    this.served = servedAgents(options);
    this.pollInterval = options.pollIntervalMs ?? 500;
  }

  async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      if (request.method !== 'POST')
        throw new DoorError(405, 'this MCP server keeps no session: POST each JSON-RPC message');
      const principal = await principalOf(this.options, request);
      const text = await readBody(request, this.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return replyError(response, 400, ErrorCode.ParseError, 'Parse error: the body is not JSON');
      }
      const server = this.#server(principal);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      response.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(request, response, body);
    } catch (error) {
      if (response.headersSent) return void response.destroy();
      if (error instanceof DoorError)
        return replyError(response, error.status, ErrorCode.InvalidRequest, error.message);
      this.options.logger?.error('turnkit mcp: request failed:', error);
      replyError(response, 500, ErrorCode.InternalError, 'the request failed (see the server log)');
    }
  }

  /** One request's server: its tools, and the task store that reads turns as this principal. */
  #server(principal: Json): Server {
    const server = new Server(
      { name: this.options.name ?? 'turnkit', version: '1' },
      {
        capabilities: { tools: {}, tasks: { cancel: {}, requests: { tools: { call: {} } } } },
        taskStore: new TurnTaskStore(this, principal),
        defaultTaskPollInterval: this.pollInterval,
      },
    );
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.#tools() }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name, arguments: args = {} } = request.params;
      try {
        if (name === DECIDE_TOOL) return await this.#decide(args, principal);
        if (!this.served.includes(name))
          throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
        if (args['input'] !== undefined && !this.client.agents.resolve(name).inputSchema)
          throw new ArgumentError(`${name} takes no input: send the task text only`);
        const run = await startServedRun(
          this.client,
          name,
          taskTextOf(args['task']),
          principal,
          'mcp',
          args['input'] as Json | undefined,
        );
        if (request.params.task) return { task: this.taskOf(await servedRun(this.client, await run.turn())) };
        const token = request.params._meta?.progressToken;
        const progress =
          token === undefined
            ? undefined
            : (step: number, message: string) =>
                extra.sendNotification({
                  method: 'notifications/progress',
                  params: { progressToken: token, progress: step, message },
                } as ServerNotification);
        return callResult(await followRun(run, progress));
      } catch (error) {
        throw mcpError(error);
      }
    });
    return server;
  }

  #tools(): Tool[] {
    const agents = this.served.map((name): Tool => {
      const agent = this.client.agents.resolve(name);
      const properties: Record<string, object> = {
        task: { type: 'string', description: 'What the agent is asked to do.' },
      };
      if (agent.inputSchema)
        properties['input'] = z.toJSONSchema(agent.inputSchema, { target: 'draft-7', io: 'input' });
      return {
        name,
        description: agent.description || `Runs the ${name} agent on a task.`,
        inputSchema: {
          type: 'object',
          properties,
          required: agent.inputSchema ? ['task', 'input'] : ['task'],
        },
        execution: { taskSupport: 'optional' },
      };
    });
    const decide: Tool = {
      name: DECIDE_TOOL,
      description:
        'Approves or rejects a tool call a task awaits (a task in input_required): its statusMessage names the call.',
      inputSchema: {
        type: 'object',
        properties: {
          taskId: { type: 'string' },
          toolCallId: { type: 'string', description: 'Default: the one call awaiting approval.' },
          decision: { type: 'string', enum: ['approve', 'reject'] },
          reason: { type: 'string' },
        },
        required: ['taskId', 'decision'],
      },
      execution: { taskSupport: 'forbidden' },
    };
    return [...agents, decide];
  }

  /** `turnkit_decide`: the run's `approve` / `reject`, authorized and signed as the client's are. */
  async #decide(args: Record<string, unknown>, principal: Json): Promise<CallToolResult> {
    const turn = await reachableTurn(this.client, this.served, args['taskId'], principal);
    const decision = args['decision'];
    if (decision !== 'approve' && decision !== 'reject')
      throw new ArgumentError('decision must be "approve" or "reject"');
    const reason = args['reason'];
    if (reason !== undefined && typeof reason !== 'string')
      throw new ArgumentError('reason must be a string');
    const run = await this.client.handle(turn);
    const toolCallId = await chosenCall(run, args['toolCallId']);
    const answer =
      decision === 'approve'
        ? await run.approve(toolCallId, { principal, ...(reason ? { note: reason } : {}) })
        : await run.reject(toolCallId, { principal, ...(reason ? { reason } : {}) });
    return {
      content: [{ type: 'text', text: `${decision}d ${toolCallId}` }],
      structuredContent: { ...answer },
    };
  }

  taskOf(run: ServedRun): Task {
    const message = stateMessage(run);
    return {
      taskId: run.turn.id,
      status: run.state,
      ttl: null,
      createdAt: run.turn.createdAt,
      lastUpdatedAt: run.turn.updatedAt,
      pollInterval: this.pollInterval,
      ...(message !== undefined ? { statusMessage: message } : {}),
    };
  }
}

/** The call to decide: the one named, else the one call the run awaits. */
async function chosenCall(run: RunHandle, given: unknown): Promise<string> {
  if (given !== undefined) {
    if (typeof given !== 'string' || given === '') throw new ArgumentError('toolCallId must be a string');
    return given;
  }
  const pending = await run.pendingApprovals();
  if (pending.length !== 1)
    throw new ArgumentError(
      pending.length === 0
        ? 'the task awaits no approval'
        : `the task awaits ${pending.length} approvals: name one with toolCallId`,
    );
  return pending[0]!.toolCallId;
}

/**
 * The task store the SDK's `tasks/*` handlers read: the turns themselves. Nothing is kept
 * here, so any server process answers for any task, after any restart.
 */
class TurnTaskStore implements TaskStore {
  constructor(
    private readonly door: McpDoor,
    private readonly principal: Json,
  ) {}

  createTask(): Promise<Task> {
    return Promise.reject(new McpError(ErrorCode.InvalidRequest, 'a task is created by tools/call'));
  }

  async getTask(taskId: string): Promise<Task | null> {
    const turn = await this.#turn(taskId);
    return turn ? this.door.taskOf(await servedRun(this.door.client, turn)) : null;
  }

  async getTaskResult(taskId: string): Promise<Result> {
    const turn = await this.#turn(taskId);
    if (!turn) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
    return callResult(turn);
  }

  storeTaskResult(): Promise<void> {
    return Promise.reject(new McpError(ErrorCode.InvalidRequest, "a task's result is its turn's"));
  }

  /** Only `cancelled` comes from a client (`tasks/cancel`): the turn's cancel, as the client's. */
  async updateTaskStatus(taskId: string, status: Task['status']): Promise<void> {
    if (status !== 'cancelled') return;
    const turn = await this.#turn(taskId);
    if (!turn) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
    const run = await this.door.client.handle(turn);
    try {
      await run.cancel({ principal: this.principal });
    } catch (error) {
      throw mcpError(error);
    }
    const ended = run.result().catch(() => undefined);
    await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, CANCEL_WAIT_MS).unref())]);
  }

  listTasks(): Promise<{ tasks: Task[] }> {
    return Promise.reject(new Error('tasks/list is not served: a task id is the handle the call returned'));
  }

  async #turn(taskId: string): Promise<TurnRecord | null> {
    try {
      return await reachableTurn(this.door.client, this.door.served, taskId, this.principal);
    } catch (error) {
      if (error instanceof RecordNotFound) return null;
      throw error;
    }
  }
}

/**
 * A synchronous call: the run's stream, as progress notifications of its steps and tool
 * calls when the client asked for them, until the turn ends.
 */
async function followRun(
  run: RunHandle,
  progress: ((step: number, message: string) => Promise<void>) | undefined,
): Promise<TurnRecord> {
  if (progress) {
    let count = 0;
    for await (const part of run.stream()) {
      const message = progressMessage(part);
      if (message !== null) await progress(++count, message).catch(() => undefined);
    }
  }
  const turn = await run.result();
  return TERMINAL_TURN_STATUSES.includes(turn.status) ? turn : run.turn();
}

function progressMessage(part: RunStreamPart): string | null {
  switch (part.type) {
    case 'step.started':
      return `model step ${part.step ?? ''}`.trim();
    case 'tool.call':
      return `calling ${part.toolName}`;
    case 'tool.result':
      return `${part.toolName ?? 'tool'} ${part.status}`;
    case 'status':
      return part.subAgent ? `${part.subAgent.agentName} ${part.status}` : part.status;
    default:
      return null;
  }
}

/** A finished turn as a tool's result; a failed or cancelled one is an error result. */
function callResult(turn: TurnRecord): CallToolResult {
  if (turn.status === 'completed') {
    const data = outputObject(turn);
    return {
      content: [{ type: 'text', text: turn.outputText ?? JSON.stringify(turn.outputData) }],
      ...(data ? { structuredContent: data } : {}),
    };
  }
  const text = turn.status === 'cancelled' ? 'the run was cancelled' : errorText(turn);
  return { content: [{ type: 'text', text }], isError: true };
}

/** TurnKit's typed errors as the JSON-RPC errors a client acts on. */
function mcpError(error: unknown): unknown {
  if (error instanceof McpError) return error;
  if (error instanceof RecordNotFound) return new McpError(ErrorCode.InvalidParams, 'Task not found');
  if (error instanceof ArgumentError || error instanceof InputError)
    return new McpError(ErrorCode.InvalidParams, error.message);
  if (error instanceof AuthorizationError || error instanceof ControlError)
    return new McpError(ErrorCode.InvalidRequest, error.message);
  return error;
}

function replyError(response: ServerResponse, status: number, code: number, message: string): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}
