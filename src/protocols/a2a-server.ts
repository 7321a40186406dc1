/**
 * TurnKit's agents as A2A servers (decision 71), JSON-RPC binding of A2A 1.0 through the
 * official SDK's transport handler: each served agent has its Agent Card at
 * `<base>/<agent>/.well-known/agent-card.json` and its endpoint at `POST <base>/<agent>`.
 * A context is a conversation and a task is one of its turns: `SendMessage` without a context
 * starts a run, with one posts to the conversation; `GetTask` reads the store; `CancelTask`
 * cancels the turn; `SubscribeToTask` streams the task again, from a snapshot of its text so
 * far, so that a dropped stream resumes with nothing lost and nothing twice. A call awaiting
 * approval is `input-required`, and the next message on the task decides it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type {
  AgentCard,
  Artifact,
  CancelTaskRequest,
  GetTaskRequest,
  Message,
  Part,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
} from '@a2a-js/sdk';
import {
  AgentCard as AgentCardJson,
  formatSSEErrorEvent,
  formatSSEEvent,
  Role,
  SSE_HEADERS,
  TaskState,
} from '@a2a-js/sdk';
import {
  ExtendedAgentCardNotConfiguredError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import { JsonRpcTransportHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type { PendingApproval } from '../client/controls.js';
import type { RunHandle } from '../client/run-handle.js';
import type { TurnKitClient } from '../client/turnkit-client.js';
import {
  ArgumentError,
  AuthorizationError,
  ControlError,
  ConversationBusyError,
  InputError,
  RecordNotFound,
} from '../errors.js';
import type { Json, TurnRecord } from '../store/types.js';
import type { ProtocolDoorOptions, ProtocolHandler } from './door.js';
import {
  DEFAULT_MAX_BODY_BYTES,
  DoorError,
  ownConversation,
  principalOf,
  reachableTurn,
  readBody,
  servedAgents,
} from './door.js';
import type { ServedRun, ServedState } from './served-run.js';
import { postServedRun, servedRun, startServedRun, stateMessage, taskTextOf } from './served-run.js';
import { followTurn } from './turn-follower.js';

export type A2AHandlerOptions = ProtocolDoorOptions & {
  /** The URL the handler is reached at from outside, e.g. `https://agents.example.com/a2a` (default: from the request's Host). */
  publicUrl?: string;
  /** The cards' `provider` (default: none). */
  provider?: { organization: string; url: string };
};

const CARD_PATH = '.well-known/agent-card.json';
/** How often a blocking `SendMessage` looks at its turn. */
const WAIT_POLL_MS = 200;
const CANCEL_WAIT_MS = 30_000;

const STATES: Record<ServedState, TaskState> = {
  working: TaskState.TASK_STATE_WORKING,
  input_required: TaskState.TASK_STATE_INPUT_REQUIRED,
  completed: TaskState.TASK_STATE_COMPLETED,
  failed: TaskState.TASK_STATE_FAILED,
  cancelled: TaskState.TASK_STATE_CANCELED,
};

/** Creates the A2A handler (mount it at e.g. `/a2a`; each agent at `/a2a/<name>`). */
export function createA2AHandler(options: A2AHandlerOptions): ProtocolHandler {
  const door = new A2ADoor(options);
  return (request, response) => door.handle(request, response);
}

class A2ADoor {
  readonly client: TurnKitClient;
  readonly served: string[];

  constructor(readonly options: A2AHandlerOptions) {
    this.client = options.client;
    this.served = servedAgents(options);
  }

  async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      const principal = await principalOf(this.options, request);
      const url = new URL(request.url ?? '/', 'http://a2a.invalid');
      const segments = url.pathname.split('/').filter(Boolean);
      const cardAt = url.pathname.endsWith(`/${CARD_PATH}`);
      const agentIndex = cardAt ? segments.length - 3 : segments.length - 1;
      const agent = decodeURIComponent(segments[agentIndex] ?? '');
      if (!this.served.includes(agent)) throw new DoorError(404, `no agent ${agent.slice(0, 100)} here`);
      const base =
        this.options.publicUrl?.replace(/\/+$/, '') ??
        `http://${request.headers.host ?? 'localhost'}/${segments.slice(0, agentIndex).join('/')}`.replace(
          /\/$/,
          '',
        );
      const handler = new TurnTaskHandler(this, agent, principal, `${base}/${encodeURIComponent(agent)}`);
      if (cardAt) {
        if (request.method !== 'GET') throw new DoorError(405, 'an Agent Card is read with GET');
        response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        return void response.end(JSON.stringify(AgentCardJson.toJSON(await handler.getAgentCard())));
      }
      if (request.method !== 'POST') throw new DoorError(405, 'an A2A request is a JSON-RPC POST');
      const text = await readBody(request, this.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return replyRpcError(response, 200, -32700, 'Parse error: the body is not JSON');
      }
      const answer = await new JsonRpcTransportHandler(handler).handle(
        body as Record<string, unknown>,
        new ServerCallContext(),
      );
      if (!(Symbol.asyncIterator in answer)) {
        response.writeHead(200, { 'content-type': 'application/json' });
        return void response.end(JSON.stringify(answer));
      }
      const stop = new AbortController();
      response.on('close', () => stop.abort());
      handler.signal = stop.signal;
      const iterator = answer[Symbol.asyncIterator]();
      const id = (body as { id?: unknown } | null)?.id ?? null;
      const failure = (error: unknown) => ({
        jsonrpc: '2.0',
        id,
        error: JsonRpcTransportHandler.mapToJSONRPCError(error),
      });
      let first: IteratorResult<unknown>;
      try {
        first = await iterator.next();
      } catch (error) {
        // A refusal before the first event is a plain JSON-RPC error, not a stream.
        response.writeHead(200, { 'content-type': 'application/json' });
        return void response.end(JSON.stringify(failure(error)));
      }
      response.writeHead(200, SSE_HEADERS);
      try {
        if (!first.done) response.write(formatSSEEvent(first.value));
        for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
          if (stop.signal.aborted) break;
          response.write(formatSSEEvent(next.value));
        }
      } catch (error) {
        response.write(formatSSEErrorEvent(failure(error)));
      }
      response.end();
    } catch (error) {
      if (response.headersSent) return void response.destroy();
      if (error instanceof DoorError) {
        response.writeHead(error.status, { 'content-type': 'application/json' });
        return void response.end(JSON.stringify({ error: error.message }));
      }
      (this.options.logger ?? console).error('turnkit a2a: request failed:', error);
      replyRpcError(response, 500, -32603, 'the request failed (see the server log)');
    }
  }
}

/** One request's A2A handler: the served agent's turns, as `principal` may reach them. */
class TurnTaskHandler implements A2ARequestHandler {
  signal: AbortSignal = new AbortController().signal;

  constructor(
    private readonly door: A2ADoor,
    private readonly agent: string,
    private readonly principal: Json,
    private readonly url: string,
  ) {}

  getAgentCard(): Promise<AgentCard> {
    const agent = this.door.client.agents.resolve(this.agent);
    const description = agent.description || `The ${agent.name} agent.`;
    return Promise.resolve({
      name: agent.name,
      description,
      supportedInterfaces: [
        { url: this.url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      ],
      provider: this.door.options.provider,
      version: '1',
      capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
      securitySchemes: {},
      securityRequirements: [],
      defaultInputModes: ['text/plain', 'application/json'],
      defaultOutputModes: ['text/plain', 'application/json'],
      skills: [
        {
          id: agent.name,
          name: agent.name,
          description,
          tags: ['turnkit'],
          examples: [],
          inputModes: ['text/plain'],
          outputModes: ['text/plain', 'application/json'],
          securityRequirements: [],
        },
      ],
      signatures: [],
    } as AgentCard);
  }

  getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    return Promise.reject(new ExtendedAgentCardNotConfiguredError('no extended card'));
  }

  async sendMessage(params: SendMessageRequest): Promise<Message | Task> {
    const run = await this.#accept(params).catch(rethrow);
    if (!params.configuration?.returnImmediately) {
      let state = await this.#state(run);
      while (state.state === 'working') {
        await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
        state = await this.#state(run);
      }
      return a2aTask(state);
    }
    return a2aTask(await this.#state(run));
  }

  async *sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const { run, decided, after } = await this.#acceptWithDecisions(params).catch(rethrow);
    const task = a2aTask(await this.#state(run));
    yield { payload: { $case: 'task', value: task } };
    yield* this.#follow(run, after, decided);
  }

  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const turn = await this.#turn(params.id);
    const run = await this.door.client.handle(turn);
    const { text, cursor } = await streamSnapshot(this.door.client, turn);
    const state = await servedRun(this.door.client, await run.turn());
    const task = a2aTask(state);
    if (state.state === 'working' && text !== '') task.artifacts = [textArtifact(turn.id, text)];
    yield { payload: { $case: 'task', value: task } };
    if (state.state === 'working') yield* this.#follow(run, cursor, []);
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    return a2aTask(await servedRun(this.door.client, await this.#turn(params.id)));
  }

  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    const turn = await this.#turn(params.id);
    const state = await servedRun(this.door.client, turn);
    if (!['working', 'input_required'].includes(state.state))
      throw new TaskNotCancelableError(`task ${turn.id} is ${state.state}`);
    const run = await this.door.client.handle(turn);
    await run.cancel({ principal: this.principal }).catch(rethrow);
    const ended = run.result().catch(() => undefined);
    await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, CANCEL_WAIT_MS).unref())]);
    return a2aTask(await this.#state(run));
  }

  createTaskPushNotificationConfig(): Promise<never> {
    return Promise.reject(new PushNotificationNotSupportedError('push notifications are not served'));
  }
  getTaskPushNotificationConfig(): Promise<never> {
    return this.createTaskPushNotificationConfig();
  }
  listTaskPushNotificationConfigs(): Promise<never> {
    return this.createTaskPushNotificationConfig();
  }
  deleteTaskPushNotificationConfig(): Promise<never> {
    return this.createTaskPushNotificationConfig();
  }
  listTasks(): Promise<never> {
    return Promise.reject(new UnsupportedOperationError('ListTasks is not served: a task id is the handle'));
  }

  async #state(run: RunHandle): Promise<ServedRun> {
    return servedRun(this.door.client, await run.turn());
  }

  async #turn(id: string): Promise<TurnRecord> {
    try {
      const turn = await reachableTurn(this.door.client, this.door.served, id, this.principal);
      if (turn.agentName !== this.agent) throw new RecordNotFound('turn', id);
      return turn;
    } catch (error) {
      if (error instanceof RecordNotFound) throw new TaskNotFoundError(`task ${id.slice(0, 128)} not found`);
      throw error;
    }
  }

  #accept(params: SendMessageRequest): Promise<RunHandle> {
    return this.#acceptWithDecisions(params).then(({ run }) => run);
  }

  /**
   * What a message does: on a task awaiting approval, decides its calls; in a context, posts
   * to that conversation; otherwise starts a run on a new one.
   */
  async #acceptWithDecisions(
    params: SendMessageRequest,
  ): Promise<{ run: RunHandle; decided: string[]; after?: string | undefined }> {
    const message = params.message;
    if (!message) throw new RequestMalformedError('SendMessage needs a message');
    if (message.taskId) {
      const turn = await this.#turn(message.taskId);
      const state = await servedRun(this.door.client, turn);
      if (state.state !== 'input_required')
        throw new UnsupportedOperationError(
          `task ${turn.id} is ${state.state}: only a task in input-required takes a message (send a new one in its context)`,
        );
      const run = await this.door.client.handle(turn);
      // Where the stream stands before the decision: the answer's stream goes on from there.
      const { cursor } = await streamSnapshot(this.door.client, turn);
      return { run, decided: await this.#decide(run, state.approvals, message), after: cursor };
    }
    const text = taskTextOf(textOf(message.parts));
    if (message.contextId) {
      const conversation = await ownConversation(
        this.door.client,
        message.contextId,
        this.agent,
        this.principal,
      );
      if (!conversation) throw new RequestMalformedError(`no context ${message.contextId.slice(0, 128)}`);
      const run = await postServedRun(
        this.door.client,
        conversation,
        text,
        this.principal,
        `a2a-${message.messageId}`,
      );
      return { run, decided: [] };
    }
    return {
      run: await startServedRun(this.door.client, this.agent, text, this.principal, 'a2a'),
      decided: [],
    };
  }

  /**
   * The answer to `input-required`: a data part `{ decision: "approve" | "reject", reason? }`,
   * or text that starts with "approve" or "yes"; anything else rejects, with the text as the
   * reason. It decides every call the task awaits.
   */
  async #decide(run: RunHandle, approvals: PendingApproval[], message: Message): Promise<string[]> {
    const data = message.parts.find((part) => part.content?.$case === 'data')?.content?.value as
      { decision?: unknown; reason?: unknown } | undefined;
    const text = textOf(message.parts).trim();
    const approve = data ? data.decision === 'approve' : /^(approve|yes)\b/i.test(text);
    const reason = typeof data?.reason === 'string' ? data.reason : text || 'rejected';
    for (const approval of approvals) {
      const options = { principal: this.principal, turnId: approval.turnId };
      await (
        approve
          ? run.approve(approval.toolCallId, options)
          : run.reject(approval.toolCallId, { ...options, reason })
      ).catch(rethrow);
    }
    return approvals.map((a) => a.toolCallId);
  }

  /** The task's updates: its text as appended artifact chunks, then its state where it stops. */
  async *#follow(
    run: RunHandle,
    after: string | undefined,
    decided: string[],
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const ids = { taskId: run.turnId, contextId: run.conversationId };
    for await (const followed of followTurn(this.door.client, run, { after, decided, signal: this.signal })) {
      if (followed.type === 'part') {
        const { part } = followed;
        if (part.type !== 'text.delta' || part.text === '') continue;
        const artifact = textArtifact(run.turnId, part.text);
        artifact.metadata = { cursor: part.cursor };
        yield {
          payload: {
            $case: 'artifactUpdate',
            value: { ...ids, artifact, append: true, lastChunk: false, metadata: undefined },
          },
        };
        continue;
      }
      const state = followed.type === 'finished' ? await servedRun(this.door.client, followed.turn) : null;
      const task = state
        ? a2aTask(state)
        : a2aTask({
            turn: await run.turn(),
            state: 'input_required',
            approvals: followed.type === 'input_required' ? followed.approvals : [],
          });
      yield {
        payload: { $case: 'statusUpdate', value: { ...ids, status: task.status, metadata: undefined } },
      };
    }
  }
}

/** The text a turn streamed so far, and the cursor of the run's last part, read page by page. */
async function streamSnapshot(
  client: TurnKitClient,
  turn: TurnRecord,
): Promise<{ text: string; cursor: string | undefined }> {
  let text = '';
  let cursor: string | undefined;
  for (let after = 0; ;) {
    const rows = await client.store.listStreamParts(turn.rootTurnId, { afterSequence: after, limit: 256 });
    for (const row of rows) {
      cursor = String(row.sequence);
      if (row.type === 'text.delta' && row.turnId === turn.id && typeof row.payload['text'] === 'string')
        text += row.payload['text'];
    }
    if (rows.length < 256) return { text, cursor };
    after = rows.at(-1)!.sequence;
  }
}

function textPart(text: string): Part {
  return {
    content: { $case: 'text', value: text },
    metadata: undefined,
    filename: '',
    mediaType: 'text/plain',
  };
}

function textOf(parts: readonly Part[]): string {
  return parts
    .map((part) => (part.content?.$case === 'text' ? part.content.value : ''))
    .join('\n')
    .trim();
}

function textArtifact(turnId: string, text: string): Artifact {
  return {
    artifactId: `${turnId}-text`,
    name: 'answer',
    description: '',
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
  };
}

/** A turn as an A2A task: its state, what it asks of the caller, and its output once done. */
function a2aTask(run: ServedRun): Task {
  const { turn } = run;
  const said = stateMessage(run);
  const message: Message | undefined =
    said === undefined
      ? undefined
      : {
          messageId: `${turn.id}-${run.state}`,
          contextId: turn.conversationId,
          taskId: turn.id,
          role: Role.ROLE_AGENT,
          parts: [
            textPart(said),
            ...(run.approvals.length > 0
              ? [
                  {
                    content: {
                      $case: 'data' as const,
                      value: {
                        approvals: run.approvals.map((a) => ({
                          toolCallId: a.toolCallId,
                          toolName: a.toolName,
                          arguments: a.arguments,
                        })),
                      },
                    },
                    metadata: undefined,
                    filename: '',
                    mediaType: 'application/json',
                  },
                ]
              : []),
          ],
          metadata: undefined,
          extensions: [],
          referenceTaskIds: [],
        };
  const artifacts: Artifact[] = [];
  if (run.state === 'completed' && turn.outputText) artifacts.push(textArtifact(turn.id, turn.outputText));
  return {
    id: turn.id,
    contextId: turn.conversationId,
    status: { state: STATES[run.state], message, timestamp: turn.updatedAt },
    artifacts,
    history: [],
    metadata: { agent: turn.agentName },
  };
}

/** TurnKit's typed errors as the A2A errors the SDK maps to JSON-RPC codes. */
function rethrow(error: unknown): never {
  if (error instanceof ArgumentError || error instanceof InputError)
    throw new RequestMalformedError(error.message);
  if (error instanceof AuthorizationError) throw new UnsupportedOperationError(error.message);
  if (error instanceof ControlError || error instanceof ConversationBusyError)
    throw new UnsupportedOperationError(error.message);
  throw error;
}

function replyRpcError(response: ServerResponse, status: number, code: number, message: string): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}
