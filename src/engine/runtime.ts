import type { ModelRoute } from '../contract/digests.js';
import type { ModelChoice } from '../models/model-chain.js';
import { envModelChain, fallbackModelsOf, modelChain, optionalModelChain } from '../models/model-chain.js';
import type { Agent } from '../agents/agent.js';
import type { AgentRegistry } from '../agents/registry.js';
import { defaultModelConfigured, globalDefaults } from '../config.js';
import { AuthorizationError, ConfigError } from '../errors.js';
import type { CostConfig } from '../models/cost.js';
import type { ModelClient, Thinking } from '../models/types.js';
import type {
  EventRecord,
  Json,
  JsonObject,
  NewStreamPart,
  Store,
  StreamPartRecord,
  ToolExecutionRecord,
  TurnRecord,
} from '../store/types.js';
import type { TracingOptions } from './telemetry/tracing.js';
import { Telemetry } from './telemetry/tracing.js';
import type { AnyTurnEvent } from './step/events.js';
import { appendEvents } from './step/events.js';
import { checkSigningKey } from './controls/principal-signature.js';
import { afterCommit, assertNoTransaction } from '../store/transaction-marker.js';

export type AuthorizationAction =
  | 'tool'
  | 'launch_agent'
  | 'wait'
  | 'callback'
  | 'send_message'
  | 'cancel'
  | 'approve'
  | 'reject'
  | 'pause'
  | 'resume'
  | 'steer'
  // The conversation inbox (TurnKit 0.7): a post, and a polling front end's reads.
  | 'post'
  | 'read_control'
  | 'read_messages'
  // A fork of a conversation, or a regenerated run (decision 47).
  | 'fork'
  // Erasing a principal's or a conversation's data (decision 78).
  | 'erase';

export interface AuthorizationRequest {
  action: AuthorizationAction;
  principal: Json;
  [resource: string]: unknown;
}

/** Must return literally `true` to allow; anything else denies (spec §6). */
export type AuthorizationPolicy =
  ((request: AuthorizationRequest) => unknown) | { authorize(request: AuthorizationRequest): unknown };

export type EventListener = (event: EventRecord) => void | Promise<void>;

export interface RuntimeOptions {
  store: Store;
  agents: AgentRegistry;
  /** Default model client; an agent's own `client` wins. */
  model?: ModelClient;
  /**
   * Model id, or fallback chain, for agents that name none (default `TURNKIT_MODEL`, e.g.
   * `openai:gpt-4o-mini`; a comma-separated `TURNKIT_MODEL` is a chain).
   */
  defaultModel?: ModelChoice;
  cost?: CostConfig;
  authorization?: AuthorizationPolicy;
  /** In-process listeners, called after each event is durably appended. */
  onEvent?: EventListener | readonly EventListener[];
  logger?: Pick<Console, 'warn' | 'error'>;
  /**
   * Task queues of their own for the model calls of some providers (provider prefix → queue),
   * set up by `createWorker({ models })` (decision 43).
   */
  modelQueues?: Readonly<Record<string, string>>;
  /**
   * The fairness key of a turn's model calls on those queues, from its principal (default:
   * its `tenant`, else its `id`, else none); a key Temporal's fairness shares dispatch by.
   */
  fairnessKey?: (principal: Json) => string | undefined;
  /** Default model (or chain) of output-policy judges (after the policy's and the agent's own). */
  outputPolicyModel?: ModelChoice;
  /** Default thinking of output-policy judges; `{effort: 'low'}` when unset. */
  outputPolicyThinking?: Thinking | null;
  /** OpenTelemetry, opt-in: spans for turns, model calls and tool calls (none without it). */
  tracing?: TracingOptions;
  /**
   * The key clients sign principals with (HMAC-SHA256, at least 16 bytes): a cancel or
   * control whose signature it verifies reaches the policy with `verified: true`.
   */
  signingKey?: string | Buffer;
}

/** What the engine needs at run time: store, agents, models, policy, listeners. */
export class Runtime {
  readonly store: Store;
  readonly agents: AgentRegistry;
  readonly #defaultModels: readonly string[] | undefined;
  readonly cost: CostConfig;
  readonly logger: Pick<Console, 'warn' | 'error'>;
  readonly outputPolicyModel: ModelChoice | undefined;
  readonly #modelQueues: Readonly<Record<string, string>>;
  readonly #fairnessKey: (principal: Json) => string | undefined;
  readonly outputPolicyThinking: Thinking | null | undefined;
  readonly telemetry: Telemetry;
  readonly #model: ModelClient | undefined;
  readonly #authorization: AuthorizationPolicy | undefined;
  /** Whether an authorization policy is configured: `authorize` then runs the application's code. */
  readonly asksAuthorization: boolean;
  readonly #listeners: EventListener[];
  /** Verifies signed principals; never leaves this process. */
  readonly signingKey: string | Buffer | undefined;

  constructor(options: RuntimeOptions) {
    if (!options?.store) throw new ConfigError('a runtime needs a store (openStore())');
    if (!options.agents) throw new ConfigError('a runtime needs an agent registry');
    this.store = options.store;
    this.agents = options.agents;
    // An explicit default, else TURNKIT_MODEL, else the global one (configure({defaultModel})).
    this.#defaultModels = optionalModelChain(
      options.defaultModel ?? envModelChain(process.env['TURNKIT_MODEL']),
      'defaultModel',
    );
    this.cost = options.cost ?? {};
    this.logger = options.logger ?? console;
    this.#modelQueues = options.modelQueues ?? {};
    this.#fairnessKey = options.fairnessKey ?? defaultFairnessKey;
    this.outputPolicyModel =
      options.outputPolicyModel === undefined
        ? undefined
        : modelChain(options.outputPolicyModel, 'outputPolicyModel');
    this.outputPolicyThinking = options.outputPolicyThinking;
    this.telemetry = new Telemetry(options.tracing, this.logger);
    this.#model = options.model;
    this.#authorization = options.authorization;
    this.asksAuthorization = options.authorization !== undefined;
    this.signingKey = checkSigningKey(options.signingKey);
    const listeners = options.onEvent;
    this.#listeners =
      listeners === undefined ? [] : Array.isArray(listeners) ? [...listeners] : [listeners as EventListener];
  }

  addListener(listener: EventListener): () => void {
    this.#listeners.push(listener);
    return () => {
      const index = this.#listeners.indexOf(listener);
      if (index >= 0) this.#listeners.splice(index, 1);
    };
  }

  modelClientFor(agent: Agent): ModelClient {
    const client = agent.client ?? this.#model;
    if (!client) {
      throw new ConfigError(
        `no model client for agent ${agent.name}: pass one to the worker or to defineAgent({client})`,
      );
    }
    return client;
  }

  /** The runtime's own default model, else the global one (`configure({defaultModel})`). */
  get defaultModel(): string {
    return this.defaultModels[0]!;
  }

  /**
   * The runtime's own default chain, else a configured global one, else the model client's
   * own (the scripted model's `scripted`), else the built-in default.
   */
  get defaultModels(): readonly string[] {
    if (this.#defaultModels) return this.#defaultModels;
    const own = this.#model?.defaultModel;
    if (own && !defaultModelConfigured()) return [own];
    return modelChain(globalDefaults().defaultModel, 'defaultModel');
  }

  /** The first model of the turn's chain: the one its steps ask first. */
  modelFor(agent: Agent, turn: TurnRecord): string {
    return this.modelsFor(agent, turn)[0]!;
  }

  /**
   * The turn's fallback chain: its own model and the fallbacks stored with it when the turn
   * was built, else the agent's chain, else the default one.
   */
  modelsFor(agent: Agent, turn: TurnRecord): readonly string[] {
    if (turn.model) return [turn.model, ...fallbackModelsOf(turn)];
    return agent.models ?? this.defaultModels;
  }

  /**
   * Where the turn's model calls run (decision 43): each chain model's queue by its provider
   * prefix, and the tenant's fairness key; undefined when no model of the chain has a queue.
   */
  modelRouteFor(agent: Agent, turn: TurnRecord): ModelRoute | undefined {
    const queues = this.modelsFor(agent, turn).map((model) => {
      const at = model.indexOf(':');
      return at > 0 ? (this.#modelQueues[model.slice(0, at)] ?? null) : null;
    });
    if (queues.every((queue) => queue === null)) return undefined;
    const principal = (turn.options['principal'] ?? null) as Json;
    let key: string | undefined;
    try {
      key = this.#fairnessKey(principal);
    } catch (error) {
      this.logger.warn('turnkit: the fairness key function failed; the turn gets none:', error);
    }
    return { queues, ...(typeof key === 'string' && key !== '' ? { fairnessKey: key.slice(0, 64) } : {}) };
  }

  /** Raises AuthorizationError unless the policy returns literally `true`. */
  async authorize(
    action: AuthorizationAction,
    principal: Json,
    resources: Record<string, unknown>,
  ): Promise<void> {
    const policy = this.#authorization;
    if (!policy) return;
    // Never while a transaction holds its locks (decide first, then re-check under the lock).
    assertNoTransaction('the authorization policy');
    const request: AuthorizationRequest = { ...resources, action, principal };
    const verdict = typeof policy === 'function' ? await policy(request) : await policy.authorize(request);
    if (verdict !== true) throw new AuthorizationError(`not authorized to ${action}`);
  }

  /**
   * Appends to the turn's durable event log, then tells in-process listeners. Inside a
   * transaction the event is appended with the write it reports, and listeners hear of it
   * after the commit (never, after a rollback): a listener can never roll a write back.
   */
  async emit(
    turn: Pick<TurnRecord, 'id' | 'conversationId'>,
    type: string,
    payload: JsonObject = {},
  ): Promise<void> {
    await this.emitAll(turn, [[type, payload]]);
  }

  /**
   * Appends several events in one store transaction, in order, with the live-stream parts
   * they report (statuses, tool results: `step/events.ts`) and `parts`, then tells listeners.
   * Returns the stream parts it stored.
   */
  async emitAll(
    turn: Pick<TurnRecord, 'id' | 'conversationId'> & { rootTurnId?: string },
    events: readonly (readonly [string, JsonObject])[],
    parts: readonly NewStreamPart[] = [],
  ): Promise<StreamPartRecord[]> {
    const typed = events.map(([type, payload]) => ({ type, payload }));
    return this.publish(turn, typed, parts);
  }

  /**
   * `emitAll` for typed events (`step/events.ts`). `executions`: rows of the turn's tool
   * executions the caller holds as they now stand, so their results need no read; `partsLast`:
   * `parts` after those the events report.
   */
  async publish(
    turn: Pick<TurnRecord, 'id' | 'conversationId'> & { rootTurnId?: string },
    events: readonly AnyTurnEvent[],
    parts: readonly NewStreamPart[] = [],
    executions: readonly ToolExecutionRecord[] = [],
    partsLast = false,
  ): Promise<StreamPartRecord[]> {
    if (events.length === 0 && parts.length === 0) return [];
    const { records, stored } = await appendEvents(this.store, turn, events, parts, executions, partsLast);
    // Appended in the caller's transaction, if any: listeners hear of them once it commits.
    await afterCommit(() => this.#notify(turn.id, records));
    return stored;
  }

  async #notify(turnId: string, records: readonly EventRecord[]): Promise<void> {
    if (this.#listeners.length === 0) return;
    assertNoTransaction('an event listener');
    for (const event of records) {
      for (const listener of this.#listeners) {
        try {
          await listener(event);
        } catch (error) {
          this.logger.warn(`turnkit: event listener failed on ${event.type} for ${turnId}:`, error);
        }
      }
    }
  }
}

/** A principal's `tenant`, else its `id` (strings or numbers), else no key. */
function defaultFairnessKey(principal: Json): string | undefined {
  if (!principal || typeof principal !== 'object' || Array.isArray(principal)) return undefined;
  for (const field of ['tenant', 'id']) {
    const value = (principal as Record<string, Json>)[field];
    if (typeof value === 'string' || typeof value === 'number') return String(value);
  }
  return undefined;
}
