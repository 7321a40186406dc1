import {
  Client,
  Connection,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
} from '@temporalio/client';
import type { ScheduleHandle as TemporalScheduleHandle } from '@temporalio/client';
import type { z } from 'zod';
import type { Agent, BudgetLimits, PromptMode } from '../agents/agent.js';
import type { ModelClient, Thinking } from '../models/types.js';
import type { ModelChoice } from '../models/model-chain.js';
import type { ManualCompactionOptions } from '../engine/model/compaction.js';
import { compactConversation } from '../engine/model/compaction.js';
import type { MediaInput, MediaPart } from '../models/media.js';
import { mediaPart } from '../models/media.js';
import type { PayloadCodec } from '@temporalio/common';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import type { AgentRegistry } from '../agents/registry.js';
import { checkApprovalFits } from '../agents/approval-fit.js';
import { resolveTaskQueue } from '../store/store-identity.js';
import { buildModelRequest } from '../engine/model/model-request.js';
import type { TurnPreview } from '../engine/model/model-request.js';
import { Runtime } from '../engine/runtime.js';
import { depthOf } from '../engine/step/turn-state.js';
import type { TracingOptions } from '../engine/telemetry/tracing.js';
import { turnAttributes } from '../engine/telemetry/genai-spans.js';
import {
  ArgumentError,
  AuthorizationError,
  InputError,
  RecordNotFound,
  WorkflowStartError,
} from '../errors.js';
import type { RepairFinding, RepairOptions } from '../engine/end/repair.js';
import { repairStore } from '../engine/end/repair.js';
import { authorizeCancel, cancelTurn } from '../engine/end/cancel.js';
import { newId } from '../ids.js';
import { canonicalJson, jsonCopy, nowIso } from '../store/records.js';
import { TERMINAL_TURN_STATUSES } from '../store/types.js';
import type {
  ConversationRecord,
  DeliveryRecord,
  Json,
  JsonObject,
  MessageRecord,
  NewConversation,
  Store,
  Subject,
  TurnRecord,
  Usage,
} from '../store/types.js';
import type { CancelDescendants } from '../contract/cancel-request.js';
import { parseCancelRequest, signedCancelParams } from '../contract/cancel-request.js';
import {
  checkCallerMetadata,
  RESERVED_CONVERSATION_METADATA,
  RESERVED_MESSAGE_METADATA,
} from './caller-metadata.js';
import type { TurnSettings } from '../workflows/contract.js';
import {
  cancelSignal,
  laneStartOptions,
  targetFinishedSignal,
  turnStartOptions,
  turnWorkflowId,
} from '../workflows/contract.js';
import type { laneWorkflow } from '../workflows/lane-workflow.js';
import type { turnWorkflow } from '../workflows/turn-workflow.js';
import { RunHandle, sumCost, sumUsage } from './run-handle.js';
import type { InputStatus, MessagesAfter, PostOptions } from './post.js';
import { inputStatus, messagesAfter, postToConversation } from './post.js';
import type { PostReceipt } from '../contract/post-request.js';
import { sendControl } from './controls.js';
import type { ForkOptions, RegenerateOptions } from './fork.js';
import { forkConversation, regenerateTurn } from './fork.js';
import type { ScheduleDeps, ScheduleOptions, ScheduleSummary } from './schedules.js';
import { createSchedule, listSchedules, ScheduleHandle } from './schedules.js';
import type { RetentionScheduleOptions } from './retention-schedule.js';
import { createRetentionSchedule } from './retention-schedule.js';
import { checkScheduleId } from '../engine/schedule/definition.js';
import { asSent, signPrincipal } from '../engine/controls/principal-signature.js';
import type { BuildTurnOptions } from '../engine/lane/build-turn.js';
import { buildTurn } from '../engine/lane/build-turn.js';
import { taskOf } from '../engine/end/workflow-start.js';
import { taskText, writeTurnRows } from '../engine/lane/turn-rows.js';
import { sendMessage } from '../engine/lane/send-message.js';
import type { AuthorizationAction, AuthorizationPolicy } from '../engine/runtime.js';
import type { EraseOptions, ErasureReport, ErasureSubject } from './erase.js';
import { erase } from './erase.js';
import { rootConversationId } from '../store/tree.js';
import { addWaits, waitsReady } from '../store/wait-graph.js';
import { temporalConnectConfig } from '../temporal-config.js';

export interface TurnKitClientOptions {
  store: Store;
  agents: AgentRegistry;
  /** An existing Temporal client; otherwise `connect` opens one through Temporal's env config. */
  temporal?: Client;
  /** Temporal frontend for `connect`; otherwise TEMPORAL_ADDRESS, else the profile's, else 127.0.0.1:7233. */
  address?: string;
  /** Temporal namespace for `connect`; otherwise TEMPORAL_NAMESPACE, else the profile's, else `default`. */
  namespace?: string;
  /** A profile of Temporal's config file for `connect`; default TEMPORAL_PROFILE, else `default`. */
  profile?: string;
  taskQueue?: string;
  defaultModel?: ModelChoice;
  /** Activity timeouts and retries of every turn this client starts. */
  turnSettings?: TurnSettings;
  /** The same policy the workers use: checked before this client writes anything. */
  authorization?: AuthorizationPolicy;
  /** Model client for work done in this process: `conversation.compact()`. */
  model?: ModelClient;
  /**
   * OpenTelemetry, opt-in: `run` opens an `invoke_agent` span and Temporal's client
   * interceptor carries its context into the turn's workflow and activities.
   */
  tracing?: TracingOptions;
  /**
   * The key this client signs principals with (the workers hold the same one, never Temporal):
   * cancels and controls it sends reach the policy with `verified: true`.
   */
  signingKey?: string | Buffer;
  /**
   * Temporal payload codecs for `connect`'s client, the workers' list (decision 75); with
   * `temporal`, configure that client's `dataConverter` instead.
   */
  payloadCodecs?: PayloadCodec[];
}

/**
 * What a run or conversation is about. Stored as `{type, id}`; its prompt (`prompt`, or what
 * `toPrompt()` returns) is snapshotted when the conversation is created and rendered to the
 * model as untrusted data, so a worker never needs the application's object (BG-04).
 */
export type SubjectInput = Subject & { prompt?: string; toPrompt?: () => string };

/** Options persisted on the turn a run, `prepare` or `ask` builds (spec §3.1). */
export interface TurnOptions {
  /** Thinking for this turn; `null` turns the agent's thinking off. */
  thinking?: Thinking | null;
  /** Structured output for this turn: a zod schema or a JSON Schema object. */
  outputSchema?: z.ZodType | JsonObject;
  /** `full`, `minimal`, `task` or `none`. `run` defaults to `task`; `null` uses the agent's mode. */
  promptMode?: PromptMode | null;
  /** `true` forces compaction before the model phase, `false` disables it for this turn. */
  compact?: boolean;
}

export interface RunOptions extends TurnOptions {
  /** Structured input, validated against the agent's `inputSchema` before anything is written. */
  input?: Json;
  /**
   * Images and files for the model, stored as parts of the task message and sent as real
   * image / file content (an unsupported type or an oversized one is an InputError).
   */
  media?: readonly MediaInput[];
  /** The application's identity for authorization; the model can never set it. */
  principal?: Json;
  /** Run context, copied on write, rendered to the model as untrusted data. */
  context?: JsonObject;
  /** This run's model, or fallback chain (the first is stored as the turn's `model`). */
  model?: ModelChoice;
  subject?: SubjectInput;
  metadata?: JsonObject;
  /** Attach this run to another run's tree: shared budget, usage and cost (CORE-07). */
  parentRun?: RunHandle | string;
  /** The same, by root turn id. */
  rootTurnId?: string;
  /**
   * A conversation that receives this run's result as a message when it finishes (a
   * completion callback, authorized as `callback` before anything is written).
   */
  callback?: string;
  /**
   * Replays tools: each tool call is answered with the result of the same call (name and
   * arguments) in this recorded turn, and a call it never made fails as a divergence; no tool
   * runs (decision 48). Evaluations use it; absent, tools run.
   */
  toolReplay?: { turnId: string };
  /** This run's budget limits over the agent's (an evaluation's cap per case). */
  limits?: Partial<BudgetLimits>;
}

export interface SendMessageOptions {
  /** Idempotency key: sending again with the same key and message delivers once. */
  key: string;
  /** Authorized as `send_message`. */
  principal?: Json;
  /** The sending conversation, if any. */
  from?: string | null;
}

export interface ConversationOptions {
  principal?: Json;
  context?: JsonObject;
  model?: string;
  subject?: SubjectInput;
  metadata?: JsonObject;
}

/** Validates a subject and snapshots its prompt (string or `toPrompt()`). */
function subjectOf(subject: SubjectInput | undefined): (Subject & { prompt?: string }) | null {
  if (subject === undefined || subject === null) return null;
  if (typeof subject !== 'object' || typeof subject.type !== 'string' || subject.id === undefined)
    throw new ArgumentError('subject must be {type, id} (optionally with prompt or toPrompt)');
  const prompt = typeof subject.toPrompt === 'function' ? subject.toPrompt() : subject.prompt;
  if (prompt !== undefined && typeof prompt !== 'string')
    throw new ArgumentError('a subject prompt must be a string');
  return { type: subject.type, id: String(subject.id), ...(prompt !== undefined ? { prompt } : {}) };
}

/** A user's images and files as stored parts; anything unusable is an InputError before any write. */
function inputMedia(media: readonly MediaInput[] | undefined): MediaPart[] {
  if (media !== undefined && !Array.isArray(media))
    throw new InputError('media must be an array of { url | data, mimeType, filename? }');
  return (media ?? []).map((item) => mediaPart(item, (message) => new InputError(`input media: ${message}`)));
}

/** A run's limits over its agent's; anything but a known limit is an ArgumentError. */
function runLimits(agent: Agent, given: Partial<BudgetLimits>): BudgetLimits {
  const agentLimits = agent.limits;
  if (!given || typeof given !== 'object' || Array.isArray(given))
    throw new ArgumentError('limits must be an object of budget limits');
  const unknown = Object.keys(given).filter((key) => !(key in agentLimits));
  if (unknown.length > 0) throw new ArgumentError(`limits: unknown limit(s) ${unknown.join(', ')}`);
  const limits = { ...agentLimits, ...given };
  checkApprovalFits(
    `a run of agent ${agent.name}: limits`,
    limits.timeout,
    agent.effectiveTools,
    agent.subAgents,
  );
  return limits;
}

/** The turn builder's options from a caller's run or ask options. */
function turnOptionsOf(options: RunOptions & { submit?: boolean; turnId?: string }): BuildTurnOptions {
  return {
    ...(options.principal !== undefined ? { principal: options.principal } : {}),
    ...(options.context !== undefined ? { context: options.context } : {}),
    ...(options.model !== undefined ? { model: options.model } : {}),
    ...(options.promptMode ? { promptMode: options.promptMode } : {}),
    ...('thinking' in options && options.thinking !== undefined ? { thinking: options.thinking } : {}),
    ...(options.outputSchema !== undefined ? { outputSchema: options.outputSchema } : {}),
    ...(options.compact !== undefined ? { compact: options.compact } : {}),
    ...(options.rootTurnId ? { rootTurnId: options.rootTurnId } : {}),
    ...(options.callback ? { callbackConversationId: options.callback } : {}),
    ...(options.toolReplay ? { toolReplay: { turnId: options.toolReplay.turnId } } : {}),
    ...(options.turnId ? { id: options.turnId } : {}),
    submit: options.submit ?? false,
  };
}

/**
 * The API applications call: it writes a run's rows to the store, then starts the turn's
 * workflow through the Temporal client. Any process with the same store and agent registry
 * can read runs back without Temporal.
 */
export class TurnKitClient {
  readonly store: Store;
  readonly agents: AgentRegistry;
  readonly temporal: Client;
  readonly taskQueue: string;
  readonly turnSettings: TurnSettings;
  readonly #runtime: Runtime;
  #ownedConnection: Connection | undefined;

  constructor(options: TurnKitClientOptions & { temporal: Client }) {
    this.store = options.store;
    this.agents = options.agents;
    this.#runtime = new Runtime({
      store: options.store,
      agents: options.agents,
      defaultModel: options.defaultModel,
      ...(options.model ? { model: options.model } : {}),
      ...(options.authorization ? { authorization: options.authorization } : {}),
      ...(options.tracing ? { tracing: options.tracing } : {}),
      ...(options.signingKey !== undefined ? { signingKey: options.signingKey } : {}),
    });
    const tracer = this.#runtime.telemetry.tracer;
    // Traced: the same connection, with Temporal's OpenTelemetry client interceptor.
    this.temporal = tracer
      ? new Client({
          connection: options.temporal.connection,
          namespace: options.temporal.options.namespace,
          dataConverter: options.temporal.options.loadedDataConverter,
          interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor({ tracer })] },
        })
      : options.temporal;
    this.taskQueue = resolveTaskQueue(options.store, options.taskQueue);
    const consoleUrl = options.turnSettings?.consoleUrl;
    if (consoleUrl !== undefined && !/^https?:\/\/[^\s()<>[\]]+$/.test(consoleUrl))
      throw new ArgumentError(`turnSettings.consoleUrl must be an http(s) URL, got ${consoleUrl}`);
    // Every turn this client starts carries its store, so a worker of another store refuses it.
    const { id, location } = options.store.identity;
    this.turnSettings = { ...options.turnSettings, store: { id, location } };
  }

  static async connect(options: TurnKitClientOptions): Promise<TurnKitClient> {
    if (options.temporal) return new TurnKitClient({ ...options, temporal: options.temporal });
    const { connectionOptions, namespace } = temporalConnectConfig(options);
    const connection = await Connection.connect(connectionOptions);
    let client: TurnKitClient;
    try {
      const dataConverter = options.payloadCodecs ? { payloadCodecs: options.payloadCodecs } : undefined;
      client = new TurnKitClient({
        ...options,
        temporal: new Client({ connection, namespace, ...(dataConverter ? { dataConverter } : {}) }),
      });
    } catch (error) {
      // A client that fails to build (a bad signing key) closes the connection it opened.
      await connection.close().catch(() => undefined);
      throw error;
    }
    client.#ownedConnection = connection;
    return client;
  }

  /** Closes the Temporal connection that `connect` opened (a client passed in stays open). */
  async close(): Promise<void> {
    await this.#ownedConnection?.close();
    this.#ownedConnection = undefined;
  }

  #agent(agent: Agent | string): Agent {
    return this.agents.resolve(typeof agent === 'string' ? agent : agent.name);
  }

  /** Runs a task on a fresh conversation: writes the rows, then starts the turn workflow. */
  async run(agent: Agent | string, task: string, options: RunOptions = {}): Promise<RunHandle> {
    const name = this.#agent(agent).name;
    const attributes = { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': name };
    return this.#runtime.telemetry.span(`invoke_agent ${name}`, attributes, async (span) => {
      // The rows commit (already submitted) before the workflow starts; a failed start can be repeated.
      const turn = await this.#prepare(agent, task, options, true);
      span.set(turnAttributes(turn));
      await this.#startWorkflow(turn, task);
      return this.handle(turn);
    });
  }

  /** Writes a run's rows without starting it: the turn stays `pending` until `start()`. */
  async prepare(agent: Agent | string, task: string, options: RunOptions = {}): Promise<RunHandle> {
    return this.handle(await this.#prepare(agent, task, options, false));
  }

  async #prepare(
    agent: Agent | string,
    task: string,
    options: RunOptions,
    submit: boolean,
  ): Promise<TurnRecord> {
    const resolved = this.#agent(agent);
    if (typeof task !== 'string' || task.trim() === '')
      throw new ArgumentError('run needs a non-empty task string');
    if (resolved.inputSchema && options.input !== undefined) {
      const parsed = resolved.inputSchema.safeParse(options.input);
      if (!parsed.success) {
        throw new InputError(
          `input for ${resolved.name} is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(input)'}: ${i.message}`).join('; ')}`,
        );
      }
    } else if (resolved.inputSchema && options.input === undefined) {
      const parsed = resolved.inputSchema.safeParse(undefined);
      if (!parsed.success) throw new InputError(`${resolved.name} needs an input`);
    }
    const media = inputMedia(options.media);
    if (options.toolReplay !== undefined) {
      if (typeof options.toolReplay?.turnId !== 'string')
        throw new ArgumentError('toolReplay must be { turnId } of a recorded turn');
      await this.store.loadTurn(options.toolReplay.turnId);
    }
    const limits = options.limits ? runLimits(resolved, options.limits) : undefined;
    const conversationId = newId('conv');
    const rootTurnId = await this.#sharedRoot(options);
    // Allocated before the checks, so the policy sees the turn it decides about.
    const turnId = newId('turn');
    if (options.callback !== undefined) {
      if (typeof options.callback !== 'string' || options.callback === '')
        throw new ArgumentError('callback must be a conversation id');
      await this.store.loadConversation(options.callback);
      await this.#runtime.authorize('callback', options.principal ?? null, {
        turn: turnId,
        destination_conversation: options.callback,
      });
    }
    // A conversation keeps one model (its column); a run's chain rides with its turn only.
    const { model, ...rest } = options;
    const conversation = this.#conversationRow(resolved, {
      ...rest,
      ...(typeof model === 'string' ? { model } : {}),
    });
    // `task` unless the caller names a mode; `null` leaves it to the agent (spec §1.2).
    const promptMode = options.promptMode === undefined ? 'task' : options.promptMode;
    return this.store.atomic(conversationId, () =>
      writeTurnRows(this.store, resolved, {
        conversationId,
        conversation,
        content: [{ type: 'text', text: taskText(task, options.input) }, ...media],
        metadata: { source: 'application', task: true, task_text: task },
        turn: {
          ...turnOptionsOf({ ...options, promptMode, rootTurnId, submit, turnId }),
          ...(limits ? { limits } : {}),
        },
      }),
    );
  }

  /** The root a run joins (`parentRun`, `rootTurnId`): it must exist and be a root. */
  async #sharedRoot(options: RunOptions): Promise<string | undefined> {
    const given =
      options.parentRun !== undefined
        ? typeof options.parentRun === 'string'
          ? options.parentRun
          : options.parentRun.rootTurnId
        : options.rootTurnId;
    if (given === undefined) return undefined;
    if (typeof given !== 'string' || given === '')
      throw new ArgumentError('parentRun/rootTurnId must name a turn');
    // Joining a root shares its budget and its stream: only a run of the root's own principal
    // may, and a root of another principal is refused as one that does not exist.
    const refused = () => new AuthorizationError(`not authorized to attach to run ${given}`);
    const turn = await this.store.loadTurn(given).catch((error: unknown) => {
      throw error instanceof RecordNotFound ? refused() : error;
    });
    const root = turn.rootTurnId === turn.id ? turn : await this.store.loadTurn(turn.rootTurnId);
    if (canonicalJson(root.options['principal'] ?? null) !== canonicalJson(options.principal ?? null))
      throw refused();
    return turn.rootTurnId;
  }

  /** A persisted conversation for multi-turn use (`say`, `ask`). */
  async conversation(agent: Agent | string, options: ConversationOptions = {}): Promise<ConversationHandle> {
    const resolved = this.#agent(agent);
    const id = newId('conv');
    const row = this.#conversationRow(resolved, options);
    await this.store.atomic(id, () => this.store.createConversation({ ...row, id }));
    return new ConversationHandle(this, id, resolved.name);
  }

  /** Reopens a conversation by id (any process). */
  async loadConversation(id: string): Promise<ConversationHandle> {
    const record = await this.store.loadConversation(id);
    this.#agent(record.agentName);
    return new ConversationHandle(this, id, record.agentName);
  }

  /**
   * Forks a conversation (decision 47): a new conversation whose history is a copy of this
   * one's up to and including the message `at` (`null`: empty). The original is not written.
   * Authorized as `fork`; a message inside a tool round, or one a turn still working has not
   * answered, is a ForkError.
   */
  async fork(conversationId: string, options: ForkOptions): Promise<ConversationHandle> {
    const fork = await forkConversation(this.#runtime, conversationId, options);
    return new ConversationHandle(this, fork.id, fork.agentName);
  }

  /** The conversations forked from this one, oldest first. */
  forks(conversationId: string): Promise<ConversationRecord[]> {
    return this.store.listForks(conversationId);
  }

  /**
   * Runs a turn's input again on a fork made just before it (decision 47), optionally with
   * another model, other instructions or other per-turn options; returns the new run
   * (started unless `start: false`). A run that was its conversation's first turn starts
   * from an empty history.
   */
  async regenerate(turnId: string, options: RegenerateOptions = {}): Promise<RunHandle> {
    const turn = await regenerateTurn(this.#runtime, turnId, options);
    const handle = await this.handle(turn);
    return options.start === false ? handle : handle.start();
  }

  /** A handle for an existing turn, by id or record. */
  async handle(turn: TurnRecord | string): Promise<RunHandle> {
    const record = typeof turn === 'string' ? await this.store.loadTurn(turn) : turn;
    return new RunHandle(record.id, record.conversationId, record.rootTurnId, {
      store: this.store,
      temporal: this.temporal,
      start: (id) => this.start(id),
      preview: (id) => this.preview(id),
      cancel: (id, request) => this.cancel(id, request),
      regenerate: (id, options) => this.regenerate(id, options),
      waitFor: (id, targets, principal) =>
        this.waitFor(id, targets, principal === undefined ? {} : { principal }),
      control: (id, action, fields) =>
        sendControl(
          { store: this.store, temporal: this.temporal, signingKey: this.#runtime.signingKey },
          id,
          action,
          fields,
        ),
    });
  }

  /**
   * Marks the turn submitted and starts its workflow. Idempotent: a start that failed after
   * the rows committed can be repeated, and a workflow that already exists is reused.
   */
  async start(turnId: string): Promise<void> {
    let turn = await this.store.loadTurn(turnId);
    if (!turn.submittedAt) {
      const initial = turn;
      turn = await this.store.atomic(await rootConversationId(this.store, initial), async () => {
        const fresh = await this.store.loadTurn(turnId);
        if (fresh.submittedAt) return fresh;
        // A turn whose join is still open waits (spec §2.7: pending → waiting on submit).
        const waiting = fresh.status === 'pending' && !(await waitsReady(this.store, turnId));
        return this.store.updateTurn(turnId, {
          submittedAt: nowIso(),
          ...(waiting ? { status: 'waiting' } : {}),
        });
      });
    }
    await this.#startWorkflow(turn, await taskOf(this.store, turn));
  }

  async #startWorkflow(turn: TurnRecord, task: string): Promise<void> {
    try {
      await this.temporal.workflow.start<typeof turnWorkflow>('turnWorkflow', {
        ...turnStartOptions({ turn, task, settings: this.turnSettings }),
        taskQueue: this.taskQueue,
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
      });
    } catch (error) {
      // The workflow ran (or runs) already: the turn is never started twice.
      if (error instanceof WorkflowExecutionAlreadyStartedError) return;
      // The turn stays submitted, and is not lost: this start can be repeated, and the lane
      // (a younger turn's refused claim, `turnkit repair`) starts it when it finds it (decision 33).
      throw new WorkflowStartError(
        `turn ${turn.id} is submitted but its workflow did not start (${error instanceof Error ? error.message : String(error)}); ` +
          'start(turnId) repeats the start, and its conversation starts it when the lane next looks',
        { cause: error, details: { turnId: turn.id } },
      );
    }
  }

  /**
   * TurnKit's reconciler, with Temporal as the judge (decision 33): every submitted turn that
   * is not finished whose workflow is gone without its terminal write is failed with
   * `TurnKit::WorkflowClosed` (open tool calls interrupted, each with its one result; its lane
   * moves on), and a root turn whose workflow never started is started. `dryRun` only lists.
   * A workflow that is not found is acted on only when Temporal finds another workflow of the
   * store in this client's namespace; otherwise the turn is `hold` (reported, untouched), and
   * `failMissing` fails the held turns that ran.
   */
  async repair(options: RepairOptions = {}): Promise<RepairFinding[]> {
    const context = {
      runtime: this.#runtime,
      temporal: this.temporal,
      taskQueue: this.taskQueue,
      settings: this.turnSettings,
    };
    return repairStore(context, options);
  }

  /**
   * Cancels a turn (spec §5.9). The cancel is authorized here, with the same policy the
   * workers hold, so a denial throws AuthorizationError before anything is sent (and is
   * recorded as `cancel.denied`). A turn that never started (a prepared run, or one whose
   * workflow start failed) is cancelled in the store, with the events and callbacks of any
   * cancel; a started one gets its workflow's `cancel` signal (the same path as `temporal
   * workflow signal --name cancel`). Cancelling a finished turn is a no-op.
   */
  async cancel(
    turnId: string,
    request: { descendants?: CancelDescendants; principal?: Json } = {},
  ): Promise<void> {
    // The JSON copy the workflow's signal carries: the policy here and the signature see that.
    const principal = asSent(request.principal ?? null);
    const key = this.#runtime.signingKey;
    const parsed = parseCancelRequest({ descendants: request.descendants ?? 'retain', principal });
    if (!parsed.ok) throw new ArgumentError(parsed.reason);
    if (key !== undefined) {
      const params = signedCancelParams(parsed.value);
      parsed.value.signature = signPrincipal(key, { turnId, action: 'cancel', principal, params });
    }
    const turn = await this.store.loadTurn(turnId);
    if (TERMINAL_TURN_STATUSES.includes(turn.status)) return;
    const verdict = await authorizeCancel(this.#runtime, { turnId, ...parsed.value });
    if (verdict.finished) return;
    if (!verdict.allowed) throw new AuthorizationError(verdict.reason ?? 'not authorized to cancel');
    if (turn.submittedAt === null) return this.#cancelInStore(turnId, parsed.value.descendants);
    try {
      await this.temporal.workflow.getHandle(turnWorkflowId(turnId)).signal(cancelSignal, parsed.value);
    } catch (error) {
      // Submitted, but its workflow never started or already closed: nobody runs the turn.
      if (!(error instanceof WorkflowNotFoundError)) throw error;
      await this.#cancelInStore(turnId, parsed.value.descendants);
    }
  }

  /** The store half of a cancel, for a turn no workflow runs; then who must hear of it. */
  async #cancelInStore(turnId: string, descendants: CancelDescendants): Promise<void> {
    const { notice } = await cancelTurn(this.#runtime, { turnId, descendants });
    for (const waiter of notice.waiters) {
      await this.temporal.workflow
        .getHandle(turnWorkflowId(waiter))
        .signal(targetFinishedSignal, turnWorkflowId(turnId))
        .catch(() => undefined);
    }
    for (const lane of notice.lanes) await this.wakeLane(lane);
  }

  /** The request the turn's next model call would send, without calling the model (CORE-09). */
  async preview(turnId: string): Promise<TurnPreview> {
    const turn = await this.store.loadTurn(turnId);
    const agent = this.agents.resolve(turn.agentName);
    return buildModelRequest(this.#runtime, this.store, agent, turn, await depthOf(this.store, turn));
  }

  /** A new conversation's row (validated: metadata, subject), before anything is written. */
  #conversationRow(agent: Agent, options: ConversationOptions): NewConversation {
    const given = checkCallerMetadata(options.metadata, RESERVED_CONVERSATION_METADATA, 'conversation');
    const metadata: JsonObject = { ...jsonCopy(given) };
    if (options.principal !== undefined) metadata['principal'] = jsonCopy(options.principal);
    if (options.context !== undefined) metadata['turnkit_context'] = jsonCopy(options.context);
    const subject = subjectOf(options.subject);
    if (subject?.prompt !== undefined) metadata['turnkit_subject_prompt'] = subject.prompt;
    return {
      agentName: agent.name,
      model: options.model ?? null,
      subject: subject ? { type: subject.type, id: subject.id } : null,
      metadata,
    };
  }

  /** @internal Builds a pending turn snapshotting the conversation as it is now (spec §3.1). */
  async buildTurn(
    agentName: string,
    conversationId: string,
    triggerMessageId: string,
    sequence: number,
    options: RunOptions,
  ) {
    return this.#buildTurn(this.#agent(agentName), conversationId, triggerMessageId, sequence, options);
  }

  #buildTurn(
    agent: Agent,
    conversationId: string,
    triggerMessageId: string,
    sequence: number,
    options: RunOptions & { submit?: boolean; turnId?: string },
  ): Promise<TurnRecord> {
    return buildTurn(
      this.store,
      agent,
      conversationId,
      { id: triggerMessageId, sequence },
      turnOptionsOf(options),
    );
  }

  /** @internal `ConversationHandle.compact`. */
  compactConversation(agentName: string, conversationId: string, options: ManualCompactionOptions) {
    return compactConversation(this.#runtime, this.#agent(agentName), conversationId, options);
  }

  /**
   * Sends a durable message to a conversation (spec §5.8): authorized as `send_message`,
   * stored once under its key, then delivered by the destination's lane, which starts a
   * turn when the conversation is idle. Returns the delivery.
   */
  async sendMessage(to: string, text: string, options: SendMessageOptions): Promise<DeliveryRecord> {
    if (!options || typeof options.key !== 'string' || options.key === '')
      throw new ArgumentError('sendMessage needs a key (its idempotency key)');
    const delivery = await sendMessage(this.#runtime, this.store, {
      sourceConversationId: options.from ?? null,
      destinationConversationId: to,
      text,
      key: options.key,
      principal: options.principal ?? null,
    });
    await this.wakeLane(to);
    return delivery;
  }

  /** Signal-with-start of the conversation's lane workflow: deliver, wake, run the next turn. */
  async wakeLane(conversationId: string): Promise<void> {
    await this.temporal.workflow.signalWithStart<typeof laneWorkflow, []>('laneWorkflow', {
      ...laneStartOptions(conversationId, this.turnSettings),
      taskQueue: this.taskQueue,
    });
  }

  /**
   * Makes a prepared (not yet started) turn wait for other submitted turns (spec §5.6): their
   * results reach it as a `wait_results` message before its first model call. Rejected for
   * itself, for unfinished work in its own conversation, and for any cycle.
   */
  async waitFor(
    turnId: string,
    targets: readonly string[],
    options: { principal?: Json } = {},
  ): Promise<void> {
    if (!Array.isArray(targets) || targets.length === 0 || targets.some((t) => typeof t !== 'string'))
      throw new ArgumentError('waitFor needs one or more turn ids');
    const turn = await this.store.loadTurn(turnId);
    if (turn.status !== 'pending') throw new ArgumentError('only pending turns can wait');
    await this.#runtime.authorize('wait', options.principal ?? turn.options['principal'] ?? null, {
      turn: turn.id,
      targets: [...targets],
    });
    await addWaits(this.store, { turnId, targetTurnIds: targets, transition: true });
  }

  /**
   * Posts a user's message to a conversation (decision 41): one Update-with-Start of its lane,
   * which starts a turn when the conversation is idle and otherwise follows the policy
   * (`queue`, `steer`, `interrupt`, `reject`: ConversationBusyError). Returns the receipt; the
   * same `requestId` returns the same receipt.
   */
  post(conversationId: string, text: string, options: PostOptions = {}): Promise<PostReceipt> {
    const sender = {
      runtime: this.#runtime,
      temporal: this.temporal,
      taskQueue: this.taskQueue,
      settings: this.turnSettings,
    };
    return postToConversation(sender, conversationId, text, options);
  }

  /**
   * Asks the client's authorization policy (spec §6): resolves when it allows, an
   * AuthorizationError when it does not; allowed without a policy. The web console asks it
   * for each turn it reads (`read_control`, `read_messages`), naming the turn and its owner.
   */
  authorize(action: AuthorizationAction, principal: Json, resources: Record<string, unknown>): Promise<void> {
    return this.#runtime.authorize(action, principal, resources);
  }

  /** Where a post stands (authorized as `read_control`); null when none has this request id. */
  inputStatus(
    conversationId: string,
    requestId: string,
    options: { principal?: Json } = {},
  ): Promise<InputStatus | null> {
    return inputStatus(this.#runtime, conversationId, requestId, options);
  }

  /** The conversation's messages after a cursor (authorized as `read_messages`). */
  messagesAfter(
    conversationId: string,
    cursor: number,
    options: { principal?: Json; limit?: number } = {},
  ): Promise<MessagesAfter> {
    return messagesAfter(this.#runtime, conversationId, cursor, options);
  }

  inbox(conversationId: string): Promise<DeliveryRecord[]> {
    return this.store.listDeliveries({ destinationConversationId: conversationId });
  }

  outbox(conversationId: string): Promise<DeliveryRecord[]> {
    return this.store.listDeliveries({ sourceConversationId: conversationId });
  }

  /**
   * Runs `agent` on `task` on a timetable (`cron` or `every`), as a Temporal Schedule whose
   * firings each run an ordinary turn (docs/scheduling.md). A bad option, an unknown
   * agent, a cron Temporal rejects or a taken id is a typed error, and nothing is created.
   */
  schedule(agent: Agent | string, task: string, options: ScheduleOptions): Promise<ScheduleHandle> {
    return createSchedule(
      this.#scheduleDeps(),
      typeof agent === 'string' ? agent : agent.name,
      task,
      options,
    );
  }

  /** A handle for an existing schedule, by its TurnKit id (no call is made). */
  getSchedule(id: string): ScheduleHandle {
    return new ScheduleHandle(this.#scheduleDeps(), checkScheduleId(id));
  }

  /** TurnKit's schedules in this namespace. */
  listSchedules(): Promise<ScheduleSummary[]> {
    return listSchedules(this.temporal);
  }

  /**
   * Runs retention (`pruneStore`) on a Temporal Schedule, every hour unless `every` says
   * otherwise, on this client's task queue (docs/retention.md). Returns Temporal's handle.
   */
  scheduleRetention(options: RetentionScheduleOptions = {}): Promise<TemporalScheduleHandle> {
    return createRetentionSchedule(this.temporal, this.taskQueue, options);
  }

  /**
   * Erases a principal's data, or a conversation's, from the store and from Temporal
   * (docs/data-lifecycle.md, "Erasure"): authorized as `erase`, run as a workflow of its own on
   * this client's task queue (a worker must run there), and resolved with what it removed. With
   * `dryRun`, counts what would go and changes nothing.
   */
  erase(subject: ErasureSubject, options: EraseOptions = {}): Promise<ErasureReport> {
    return erase(
      { store: this.store, temporal: this.temporal, taskQueue: this.taskQueue, runtime: this.#runtime },
      subject,
      options,
    );
  }

  #scheduleDeps(): ScheduleDeps {
    return {
      temporal: this.temporal,
      store: this.store,
      taskQueue: this.taskQueue,
      settings: this.turnSettings,
      signingKey: this.#runtime.signingKey,
      agent: (name) => this.#agent(name),
      handle: (turnId) => this.handle(turnId),
    };
  }
}

/** A conversation: `say` appends a user message, `ask` says and runs a turn. */
export class ConversationHandle {
  constructor(
    private readonly client: TurnKitClient,
    readonly id: string,
    readonly agentName: string,
  ) {}

  async say(text: string, metadata: JsonObject = {}) {
    if (typeof text !== 'string' || text === '') throw new ArgumentError('say needs a non-empty text');
    checkCallerMetadata(metadata, RESERVED_MESSAGE_METADATA, 'say');
    return this.client.store.appendMessage({
      conversationId: this.id,
      role: 'user',
      content: text,
      metadata,
    });
  }

  /**
   * Says `text` (with any `media`, sent to the model as real image / file parts) and starts a
   * turn that sees it (pass `start: false` to only prepare).
   */
  async ask(
    text: string,
    options: TurnOptions & {
      start?: boolean;
      principal?: Json;
      context?: JsonObject;
      model?: string;
      media?: readonly MediaInput[];
    } = {},
  ) {
    const { media, ...turnOptions } = options;
    const parts = inputMedia(media);
    if (typeof text !== 'string' || text === '') throw new ArgumentError('ask needs a non-empty text');
    const turn = await this.client.store.atomic(this.id, async () => {
      const message = await this.client.store.appendMessage({
        conversationId: this.id,
        role: 'user',
        content: [{ type: 'text', text }, ...parts],
      });
      return this.client.buildTurn(this.agentName, this.id, message.id, message.sequence, turnOptions);
    });
    const handle = await this.client.handle(turn);
    return options.start === false ? handle : handle.start();
  }

  messages() {
    return this.client.store.listMessages(this.id);
  }

  /** A fork of this conversation through the message `at` (see `TurnKitClient.fork`). */
  fork(options: ForkOptions): Promise<ConversationHandle> {
    return this.client.fork(this.id, options);
  }

  /** The conversations forked from this one, oldest first. */
  forks(): Promise<ConversationRecord[]> {
    return this.client.forks(this.id);
  }

  /** Where this conversation was forked from, or null (decision 47). */
  async origin(): Promise<{ conversationId: string; messageId: string | null } | null> {
    const record = await this.client.store.loadConversation(this.id);
    return record.forkedFromConversationId === null
      ? null
      : { conversationId: record.forkedFromConversationId, messageId: record.forkedFromMessageId };
  }

  /**
   * Summarizes the history now (spec §3.6): appends a `context_summary` message that later
   * turns see instead of what it replaces; nothing is deleted. Raises CompactionError.
   */
  compact(options: ManualCompactionOptions = {}): Promise<MessageRecord> {
    return this.client.compactConversation(this.agentName, this.id, options);
  }

  /** Token totals over every turn of this conversation. */
  async usage(): Promise<Usage> {
    return sumUsage(await this.client.store.listTurns({ conversationId: this.id }));
  }

  /** Observed cost in USD over every turn of this conversation. */
  async cost(): Promise<number> {
    return sumCost(await this.client.store.listTurns({ conversationId: this.id }));
  }

  /** Sends a durable message from this conversation to another one. */
  sendMessage(to: string, text: string, options: Omit<SendMessageOptions, 'from'>) {
    return this.client.sendMessage(to, text, { ...options, from: this.id });
  }

  /** Posts a user's message: see `TurnKitClient.post`. */
  post(text: string, options: PostOptions = {}): Promise<PostReceipt> {
    return this.client.post(this.id, text, options);
  }

  /** Where the post with this request id stands (`read_control`). */
  inputStatus(requestId: string, options: { principal?: Json } = {}): Promise<InputStatus | null> {
    return this.client.inputStatus(this.id, requestId, options);
  }

  /** Messages after `cursor`, a message sequence (`read_messages`): poll with the cursor it returns. */
  messagesAfter(cursor: number, options: { principal?: Json; limit?: number } = {}): Promise<MessagesAfter> {
    return this.client.messagesAfter(this.id, cursor, options);
  }

  /** Deliveries addressed to this conversation, delivered or not. */
  inbox() {
    return this.client.inbox(this.id);
  }

  /** Deliveries this conversation sent. */
  outbox() {
    return this.client.outbox(this.id);
  }
}
