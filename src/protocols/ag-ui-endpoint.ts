/**
 * An AG-UI endpoint for TurnKit's agents (decision 70): `POST <base>/<agent>` with a
 * `RunAgentInput` answers the run's AG-UI events, read from the turn's live stream (text, tool
 * calls and results, steps, then `RUN_FINISHED` or `RUN_ERROR`). A call awaiting approval
 * finishes the run with an `interrupt` outcome, one interrupt per call; the next run's
 * `resume` entries decide them (approve, or reject when cancelled or `payload.approved` is
 * false) and stream the same turn on from where the interrupted run stopped.
 *
 * A thread is a conversation: a `threadId` naming one of the principal's conversations with
 * this agent posts the last user message to it; any other starts a new conversation, whose id
 * the run's result carries (`conversationId`) for the front end to use as its next threadId.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BaseEvent, Interrupt, RunAgentInput } from '@ag-ui/core';
import { EventType } from '@ag-ui/core';
import { RunAgentInputSchema } from '@ag-ui/core/schemas';
import { EventEncoder } from '@ag-ui/encoder';
import type { RunHandle } from '../client/run-handle.js';
import type { RunStreamPart } from '../client/run-stream.js';
import type { TurnKitClient } from '../client/turnkit-client.js';
import {
  ArgumentError,
  AuthorizationError,
  ControlError,
  ConversationBusyError,
  InputError,
  RecordNotFound,
  TurnKitError,
} from '../errors.js';
import type { Json } from '../store/types.js';
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
import { errorText, postServedRun, startServedRun, taskTextOf } from './served-run.js';
import type { Followed } from './turn-follower.js';
import { followTurn } from './turn-follower.js';

export type AgUiHandlerOptions = ProtocolDoorOptions;

/** Creates the AG-UI endpoint's request handler (mount it at e.g. `/agui`; agents at `/agui/<name>`). */
export function createAgUiHandler(options: AgUiHandlerOptions): ProtocolHandler {
  const door = new AgUiDoor(options);
  return (request, response) => door.handle(request, response);
}

/** What an interrupt id carries: the turn, the call, and the stream cursor the run stopped at. */
function interruptId(turnId: string, toolCallId: string, cursor: string | undefined): string {
  return [turnId, toolCallId, cursor ?? ''].join('~');
}

function parseInterruptId(id: string): { turnId: string; toolCallId: string; cursor: string | undefined } {
  const [turnId, toolCallId, cursor, ...rest] = id.split('~');
  if (!turnId || !toolCallId || cursor === undefined || rest.length > 0)
    throw new ArgumentError(`resume: ${id.slice(0, 200)} is not an interrupt this endpoint gave`);
  return { turnId, toolCallId, cursor: cursor === '' ? undefined : cursor };
}

/** The run a request streams: from its start, or after the cursor an interrupted run stopped at. */
interface Continuation {
  run: RunHandle;
  after?: string;
  /** Calls this request decided: the run no longer waits on them, whatever the store says yet. */
  decided?: string[];
}

class AgUiDoor {
  readonly client: TurnKitClient;
  readonly served: string[];

  constructor(readonly options: AgUiHandlerOptions) {
    this.client = options.client;
    this.served = servedAgents(options);
  }

  async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      if (request.method !== 'POST') throw new DoorError(405, 'an AG-UI run is a POST of RunAgentInput');
      const principal = await principalOf(this.options, request);
      const path = new URL(request.url ?? '/', 'http://agui.invalid').pathname;
      const agent = decodeURIComponent(path.split('/').filter(Boolean).at(-1) ?? '');
      if (!this.served.includes(agent)) throw new DoorError(404, `no agent ${agent.slice(0, 100)} here`);
      const input = parseInput(await readBody(request, this.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES));
      const {
        run,
        after,
        decided = [],
      } = input.resume?.length
        ? await this.#resume(input, principal)
        : await this.#start(agent, input, principal);
      // Server-sent events whatever the Accept: the protobuf encoding is not served.
      const encoder = new EventEncoder();
      response.writeHead(200, { 'content-type': encoder.getContentType(), 'cache-control': 'no-store' });
      const stop = new AbortController();
      response.on('close', () => stop.abort());
      const send = (event: BaseEvent) => {
        if (!stop.signal.aborted) response.write(encoder.encodeSSE(event));
      };
      await streamRun(this.client, { run, after, decided }, input, send, stop.signal);
      response.end();
    } catch (error) {
      if (response.headersSent) return void response.destroy();
      const [status, message] = statusOf(error, this.options.logger);
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: message }));
    }
  }

  /** A new run: on the thread's conversation when it is one of the principal's, else a new one. */
  async #start(agent: string, input: RunAgentInput, principal: Json): Promise<Continuation> {
    const last = input.messages.at(-1);
    if (last?.role !== 'user') throw new ArgumentError('a run needs a last message from the user');
    const text = taskTextOf(
      typeof last.content === 'string'
        ? last.content
        : last.content
            .map((part) => (part.type === 'text' ? part.text : ''))
            .join('\n')
            .trim(),
    );
    const conversation = await ownConversation(this.client, input.threadId, agent, principal);
    if (!conversation) return { run: await startServedRun(this.client, agent, text, principal, 'ag-ui') };
    return { run: await postServedRun(this.client, conversation, text, principal, `ag-ui-${input.runId}`) };
  }

  /** A resume: each entry decides its call; the run goes on streaming the same turn. */
  async #resume(input: RunAgentInput, principal: Json): Promise<Continuation> {
    const entries = input.resume!.map((entry) => ({ entry, ...parseInterruptId(entry.interruptId) }));
    const turnIds = new Set(entries.map((e) => e.turnId));
    if (turnIds.size !== 1) throw new ArgumentError('resume: every entry must answer the same run');
    const turn = await reachableTurn(this.client, this.served, entries[0]!.turnId, principal);
    const run = await this.client.handle(turn);
    for (const { entry, toolCallId } of entries) {
      const payload = (entry.payload ?? {}) as { approved?: unknown; reason?: unknown };
      const reason = typeof payload.reason === 'string' ? payload.reason : undefined;
      if (entry.status === 'resolved' && payload.approved !== false)
        await run.approve(toolCallId, { principal, ...(reason ? { note: reason } : {}) });
      else
        await run.reject(toolCallId, {
          principal,
          reason: reason ?? (entry.status === 'cancelled' ? 'the interrupt was abandoned' : 'rejected'),
        });
    }
    const after = entries[0]!.cursor;
    const decided = entries.map((e) => e.toolCallId);
    return after === undefined ? { run, decided } : { run, after, decided };
  }
}

function parseInput(text: string): RunAgentInput {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new InputError('the body is not JSON: an AG-UI run is a RunAgentInput');
  }
  const parsed = RunAgentInputSchema.safeParse(body);
  if (!parsed.success)
    throw new InputError(
      `not a RunAgentInput: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(input)'}: ${i.message}`).join('; ')}`,
    );
  return parsed.data as RunAgentInput;
}

/**
 * The run's events: its stream's parts of its own turn, until it finishes, or until a call
 * awaits approval (then the run finishes with interrupts). A sub-agent's parts stay inside it.
 */
async function streamRun(
  client: TurnKitClient,
  { run, after, decided = [] }: Continuation,
  input: RunAgentInput,
  send: (event: BaseEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  const { threadId, runId } = input;
  send({ type: EventType.RUN_STARTED, threadId, runId });
  const text = new TextMessages(run.turnId, send);
  let end: Exclude<Followed, { type: 'part' }> | null = null;
  for await (const followed of followTurn(client, run, { after, decided, signal })) {
    if (followed.type === 'part') eventsOf(followed.part, text, send);
    else end = followed;
  }
  text.close();
  if (end === null) return;
  if (end.type === 'input_required') {
    const interrupts: Interrupt[] = end.approvals.map((approval) => ({
      id: interruptId(run.turnId, approval.toolCallId, end.cursor),
      reason: 'tool_approval',
      message: `${approval.agentName} wants to call ${approval.toolName}: approve or reject`,
      toolCallId: approval.toolCallId,
      responseSchema: {
        type: 'object',
        properties: { approved: { type: 'boolean' }, reason: { type: 'string' } },
        required: ['approved'],
      },
      metadata: { toolName: approval.toolName, arguments: approval.arguments, turnId: approval.turnId },
    }));
    send({ type: EventType.RUN_FINISHED, threadId, runId, outcome: { type: 'interrupt', interrupts } });
    return;
  }
  const turn = end.turn;
  if (turn.status === 'completed')
    send({
      type: EventType.RUN_FINISHED,
      threadId,
      runId,
      result: {
        conversationId: turn.conversationId,
        turnId: turn.id,
        text: turn.outputText,
        data: turn.outputData,
      },
    });
  else if (turn.status === 'cancelled')
    send({ type: EventType.RUN_FINISHED, threadId, runId, outcome: { type: 'cancelled' } });
  else send({ type: EventType.RUN_ERROR, message: errorText(turn), code: turn.error?.class ?? turn.status });
}

/** The assistant's text messages of one turn: one per model step, closed when the step ends. */
class TextMessages {
  #open: string | null = null;
  #restarts = 0;

  constructor(
    private readonly turnId: string,
    private readonly send: (event: BaseEvent) => void,
  ) {}

  delta(step: string | null, delta: string): void {
    if (delta === '') return;
    if (this.#open === null) {
      this.#open = `${this.turnId}-${step ?? 'step'}${this.#restarts ? `-${this.#restarts}` : ''}`;
      this.send({ type: EventType.TEXT_MESSAGE_START, messageId: this.#open, role: 'assistant' });
    }
    this.send({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: this.#open, delta });
  }

  readonly #steps = new Set<string>();

  /** Whether `name` opens a step: a step re-run after its worker died is already open. */
  openStep(name: string): boolean {
    if (this.#steps.has(name)) return false;
    this.#steps.add(name);
    return true;
  }

  /** Whether `name` closes an open step. */
  closeStep(name: string): boolean {
    return this.#steps.delete(name);
  }

  /** The step's streamed text is void (an attempt died): its message ends, the retry opens another. */
  restart(): void {
    this.close();
    this.#restarts += 1;
  }

  close(): void {
    if (this.#open === null) return;
    this.send({ type: EventType.TEXT_MESSAGE_END, messageId: this.#open });
    this.#open = null;
  }
}

function eventsOf(part: RunStreamPart, text: TextMessages, send: (event: BaseEvent) => void): void {
  switch (part.type) {
    case 'text.delta':
      return text.delta(part.step, part.text);
    case 'step.started': {
      const stepName = `model step ${part.step ?? ''}`.trim();
      return text.openStep(stepName) ? send({ type: EventType.STEP_STARTED, stepName }) : undefined;
    }
    case 'step.restarted':
      return text.restart();
    case 'step.finished': {
      text.close();
      const stepName = `model step ${part.step ?? ''}`.trim();
      return text.closeStep(stepName) ? send({ type: EventType.STEP_FINISHED, stepName }) : undefined;
    }
    case 'tool.call':
      text.close();
      send({ type: EventType.TOOL_CALL_START, toolCallId: part.toolCallId, toolCallName: part.toolName });
      send({
        type: EventType.TOOL_CALL_ARGS,
        toolCallId: part.toolCallId,
        delta: JSON.stringify(part.arguments),
      });
      return send({ type: EventType.TOOL_CALL_END, toolCallId: part.toolCallId });
    case 'tool.result':
      return send({
        type: EventType.TOOL_CALL_RESULT,
        messageId: `${part.toolCallId}-result`,
        toolCallId: part.toolCallId,
        role: 'tool',
        content: JSON.stringify(
          part.status === 'completed' ? part.output : { status: part.status, error: part.error },
        ),
      });
    default:
      return;
  }
}

/** The HTTP status and the message a caller may see; anything unexpected is logged, not shown. */
function statusOf(error: unknown, logger: Pick<Console, 'error'> | undefined): [number, string] {
  if (error instanceof DoorError) return [error.status, error.message];
  if (error instanceof RecordNotFound) return [404, 'not found'];
  if (error instanceof AuthorizationError) return [403, error.message];
  if (error instanceof ArgumentError || error instanceof InputError) return [400, error.message];
  if (error instanceof ControlError || error instanceof ConversationBusyError) return [409, error.message];
  if (error instanceof TurnKitError) return [500, `${error.name}: ${error.message}`];
  (logger ?? console).error('turnkit ag-ui: request failed:', error);
  return [500, 'the request failed (see the server log)'];
}
