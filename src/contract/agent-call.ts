/**
 * Agents called from an application's workflow (`turnkit/workflow`) and through Nexus: what the
 * calling workflow sends its activity, and the digest it gets back. Types only: the workflow
 * bundle loads nothing from here at run time.
 */
import type { ControlAction } from './control-request.js';
import type { ScheduleBudget } from './schedule.js';
import type { Json, JsonObject, Usage } from '../store/types.js';
import type { TurnSettings } from '../workflows/contract.js';

/** A call's caps: a schedule's, without the spend per day. */
export type AgentCallBudget = Omit<ScheduleBudget, 'maxSpendPerDay'>;

/** What `runAgent` and `startAgent` take besides the agent and the task. */
export interface AgentCallOptions {
  /** The application's identity for authorization (the policy sees it; the model never sets it). */
  principal?: Json;
  /** This call's budget: each limit caps the turn's tree (the tighter of it and the agent's own). */
  budget?: AgentCallBudget;
  /** An existing conversation of the agent: the task is its next message (turns queue on its lane). */
  conversationId?: string;
  /** Run context, rendered to the model as untrusted data. */
  context?: JsonObject;
  /** Activity timeouts and retries of the turn. */
  settings?: TurnSettings;
  /**
   * The task queue of the workers that run TurnKit's workflows (default: the calling
   * workflow's own, where `TurnKitPlugin` put them).
   */
  taskQueue?: string;
}

/**
 * The calling activity's input: the caller's identity and the call's number in it (the
 * turn's ids derive from them, so a retried or replayed call writes nothing twice).
 */
export interface PrepareAgentTurnInput {
  agent: string;
  task: string;
  /** `workflowId/firstRunId#n`, or a Nexus operation's request id. */
  callKey: string;
  principal?: Json;
  budget?: AgentCallBudget;
  conversationId?: string;
  context?: JsonObject;
}

/** The turn the calling activity wrote (or found, on a retry): what its child start needs. */
export interface PreparedAgentTurn {
  turnId: string;
  agentName: string;
  conversationId: string;
  rootTurnId: string;
  status: string;
}

/** What an agent call returns: the turn's end, never its transcript. */
export interface AgentTurnDigest {
  turnId: string;
  conversationId: string;
  /** `completed`, `failed`, `cancelled`, … (a terminal status). */
  status: string;
  outputText: string | null;
  outputData: Json;
  /** The turn's own tokens. */
  usage: Usage | null;
  /** Observed cost in USD of the turn's tree (its sub-agents included). */
  cost: number;
  /** How the turn failed, when it did: `{class, message}`. */
  error: { class: string; message: string } | null;
}

/** The activities agent calls use; `TurnKitPlugin` registers them beside the turn's. */
export interface AgentCallActivities {
  prepareAgentTurn(input: PrepareAgentTurnInput): Promise<PreparedAgentTurn>;
  agentTurnDigest(input: { turnId: string }): Promise<AgentTurnDigest>;
  /** The `cancel` signal, as `principal`, signed with the worker's key when it holds one. */
  cancelAgentTurn(input: {
    turnId: string;
    principal: Json;
    descendants?: 'retain' | 'cascade';
  }): Promise<void>;
  /** A person's control (approve, reject, pause, resume, steer) as its Update; returns its result. */
  controlAgentTurn(input: {
    turnId: string;
    action: ControlAction;
    fields: JsonObject & { principal?: Json };
  }): Promise<Json>;
}
