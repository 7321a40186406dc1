import type { Agent } from '../agents/agent.js';
import { claimInLane } from '../store/tree.js';
import type { Store, TurnRecord } from '../store/types.js';
import { Budget } from './budget.js';
import type { ClaimDigest, ToolCallDigest, TurnDigest } from './digest.js';
import type { Runtime } from './runtime.js';
import { phaseOf, toolCallParts, turnState } from './turn-state.js';

export function toolCallDigests(agent: Agent, turn: TurnRecord): ToolCallDigest[] {
  if (phaseOf(turn) !== 'tools') return [];
  return toolCallParts(turnState(turn).parts).map((call) => {
    const tool = agent.effectiveTools.find((candidate) => candidate.name === call.name);
    return { id: call.id, name: call.name, kind: tool?.kind ?? 'unknown', terminal: tool?.terminal ?? false };
  });
}

export async function turnDigest(
  runtime: Runtime,
  store: Store,
  turn: TurnRecord,
  options: { withDeadline?: boolean } = {},
): Promise<TurnDigest> {
  const agent = runtime.agents.resolve(turn.agentName);
  let deadline: string | null = null;
  if (options.withDeadline) {
    deadline = (await Budget.load(store, turn.rootTurnId, agent.limits)).deadline?.toISOString() ?? null;
  }
  return {
    turnId: turn.id,
    status: turn.status,
    phase: phaseOf(turn),
    toolCalls: toolCallDigests(agent, turn),
    deadline,
  };
}

/**
 * Claims a pending turn for the workflow run that owns `claimToken` (spec §5.3): the lane
 * rules live in the store's `claimInLane`; a retry by the same run gets the same claim.
 */
export async function claimTurn(runtime: Runtime, turnId: string, claimToken: string): Promise<ClaimDigest> {
  const initial = await runtime.store.loadTurn(turnId);
  const agent = runtime.agents.resolve(initial.agentName);
  const outcome = await claimInLane(runtime.store, turnId, claimToken);
  if (!outcome.claimed) return { claimed: false, reason: outcome.reason, status: outcome.turn.status };
  if (initial.status === 'pending') {
    await runtime.emit(outcome.turn, 'turn.started', {
      status: outcome.turn.status,
      model: runtime.modelFor(agent, outcome.turn),
    });
  }
  return {
    claimed: true,
    ...(await turnDigest(runtime, runtime.store, outcome.turn, { withDeadline: true })),
  };
}
