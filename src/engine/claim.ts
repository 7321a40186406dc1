import type { Agent } from '../agents/agent.js';
import { nowIso } from '../store/records.js';
import { rootConversationId } from '../store/tree.js';
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

export async function turnDigest(runtime: Runtime, store: Store, turn: TurnRecord): Promise<TurnDigest> {
  const agent = runtime.agents.resolve(turn.agentName);
  const budget = await Budget.load(store, turn.rootTurnId, agent.limits);
  return {
    turnId: turn.id,
    status: turn.status,
    phase: phaseOf(turn),
    toolCalls: toolCallDigests(agent, turn),
    deadline: budget.deadline?.toISOString() ?? null,
  };
}

/**
 * Claims a pending turn for the workflow run that owns `claimToken` (spec §5.3). Under the
 * root lock then the turn's own conversation lock: the turn must be pending, no other turn
 * of the conversation may be running or waiting, and it must be the oldest submitted
 * pending turn there (the conversation is a serial lane). A retry by the same run finds the
 * turn already claimed with its own token and gets the same answer.
 */
export async function claimTurn(runtime: Runtime, turnId: string, claimToken: string): Promise<ClaimDigest> {
  const store = runtime.store;
  const initial = await store.loadTurn(turnId);
  runtime.agents.resolve(initial.agentName);
  const root = await rootConversationId(store, initial);
  const outcome = await store.atomic(root, () =>
    store.atomic(initial.conversationId, async (): Promise<TurnRecord | 'not_pending' | 'lane_busy'> => {
      const turn = await store.loadTurn(turnId);
      if (turn.status === 'running' && turn.claimToken === claimToken) return turn;
      if (turn.status !== 'pending') return 'not_pending';
      const lane = await store.listTurns({
        conversationId: turn.conversationId,
        status: ['pending', 'running', 'waiting'],
      });
      if (
        lane.some(
          (other) => other.id !== turn.id && (other.status === 'running' || other.status === 'waiting'),
        )
      ) {
        return 'lane_busy';
      }
      const oldest = lane.find((other) => other.status === 'pending' && other.submittedAt !== null);
      if (oldest && oldest.id !== turn.id) return 'lane_busy';
      const now = nowIso();
      const claimed = await store.claimTurn(turnId, {
        from: 'pending',
        to: 'running',
        claimToken,
        startedAt: turn.startedAt ?? now,
        heartbeatAt: now,
      });
      return claimed ?? 'not_pending';
    }),
  );
  if (typeof outcome === 'string') {
    return { claimed: false, reason: outcome, status: (await store.loadTurn(turnId)).status };
  }
  if (initial.status === 'pending') {
    await runtime.emit(outcome, 'turn.started', {
      status: outcome.status,
      model: runtime.modelFor(runtime.agents.resolve(outcome.agentName), outcome),
    });
  }
  return { claimed: true, ...(await turnDigest(runtime, store, outcome)) };
}
