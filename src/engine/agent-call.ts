/**
 * An agent called from an application's workflow or through Nexus, in its activity: the turn's
 * rows, written once per call (ids derived from the call's key, so a retried attempt or a
 * replayed workflow finds what an earlier one wrote), and the digest of how it ended.
 */
import { createHash } from 'node:crypto';
import type { AgentTurnDigest, PrepareAgentTurnInput, PreparedAgentTurn } from '../contract/agent-call.js';
import { ArgumentError, RecordNotFound } from '../errors.js';
import type { TurnRecord } from '../store/types.js';
import { taskText, writeTurnRows } from './lane/turn-rows.js';
import type { TurnRows } from './lane/turn-rows.js';
import type { Runtime } from './runtime.js';
import { cappedLimits, checkBudget } from './schedule/definition.js';

/** The call's turn and conversation ids: the same for every attempt and replay of the call. */
export function agentCallIds(callKey: string): { turnId: string; conversationId: string } {
  const hash = (kind: string) =>
    createHash('sha256').update(`agent-call:${kind}:${callKey}`).digest('hex').slice(0, 24);
  return { turnId: `turn_${hash('turn')}`, conversationId: `conv_${hash('conv')}` };
}

function prepared(turn: TurnRecord): PreparedAgentTurn {
  return {
    turnId: turn.id,
    agentName: turn.agentName,
    conversationId: turn.conversationId,
    rootTurnId: turn.rootTurnId,
    status: turn.status,
  };
}

async function findTurn(runtime: Runtime, turnId: string): Promise<TurnRecord | null> {
  return runtime.store.loadTurn(turnId).catch((error: unknown) => {
    if (error instanceof RecordNotFound) return null;
    throw error;
  });
}

/** Checks what reached the activity: the workflow side passes the application's values through. */
function checked(input: PrepareAgentTurnInput) {
  if (typeof input.task !== 'string' || input.task.trim() === '')
    throw new ArgumentError('an agent call needs a non-empty task string');
  if (typeof input.callKey !== 'string' || input.callKey === '')
    throw new ArgumentError('an agent call needs its call key');
  if (input.budget && 'maxSpendPerDay' in input.budget)
    throw new ArgumentError('an agent call has no maxSpendPerDay (a schedule has)');
  return checkBudget(input.budget);
}

/**
 * Writes the call's turn (submitted), or finds it when an earlier attempt did: a new
 * conversation of the agent, or the next message of `conversationId` (which must be the
 * agent's).
 */
export async function prepareAgentTurn(
  runtime: Runtime,
  input: PrepareAgentTurnInput,
): Promise<PreparedAgentTurn> {
  const budget = checked(input);
  const agent = runtime.agents.resolve(input.agent);
  const store = runtime.store;
  const ids = agentCallIds(input.callKey);
  const existing = await findTurn(runtime, ids.turnId);
  if (existing) return prepared(existing);
  const principal = input.principal ?? null;
  const turn = {
    id: ids.turnId,
    limits: cappedLimits(agent.limits, budget),
    submit: true,
    ...(principal !== null ? { principal } : {}),
    ...(input.context !== undefined ? { context: input.context } : {}),
  };
  const marks = { source: 'workflow', agent_call: input.callKey };
  let rows: TurnRows;
  if (input.conversationId !== undefined) {
    const conversation = await store.loadConversation(input.conversationId);
    if (conversation.agentName !== agent.name)
      throw new ArgumentError(
        `conversation ${conversation.id} belongs to agent ${conversation.agentName}, not ${agent.name}`,
      );
    rows = {
      conversationId: conversation.id,
      content: [{ type: 'text', text: input.task }],
      metadata: marks,
      turn,
    };
  } else {
    rows = {
      conversationId: ids.conversationId,
      conversation: {
        agentName: agent.name,
        metadata: { agent_call: input.callKey, ...(principal !== null ? { principal } : {}) },
      },
      content: [{ type: 'text', text: taskText(input.task, undefined) }],
      metadata: { ...marks, task: true, task_text: input.task },
      turn: { ...turn, promptMode: 'task' },
    };
  }
  const written = await store.atomic(rows.conversationId, async () => {
    // An attempt that ran beside this one (a timed-out attempt still running) wrote it first.
    const again = await findTurn(runtime, ids.turnId);
    return again ?? writeTurnRows(store, agent, rows);
  });
  return prepared(written);
}

/** How the call's turn ended: its status, output, own usage and its tree's cost. */
export async function agentTurnDigest(runtime: Runtime, turnId: string): Promise<AgentTurnDigest> {
  const turn = await runtime.store.loadTurn(turnId);
  const cost = turn.rootTurnId === turn.id ? (await runtime.store.budgetUsage(turn.id)).cost : turn.cost;
  return {
    turnId: turn.id,
    conversationId: turn.conversationId,
    status: turn.status,
    outputText: turn.outputText,
    outputData: turn.outputData,
    usage: turn.usage,
    cost,
    error: turn.error ? { class: turn.error.class, message: turn.error.message } : null,
  };
}
