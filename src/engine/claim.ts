import type { Agent } from '../agents/agent.js';
import { claimInLane, rootConversationId } from '../store/tree.js';
import { waitsReady } from '../store/wait-graph.js';
import { isFinished, subAgentResult } from './delegation.js';
import type { Store, TurnRecord } from '../store/types.js';
import { Budget } from './budget.js';
import type { ClaimDigest, ToolCallDigest, TurnDigest } from './digest.js';
import type { Runtime } from './runtime.js';
import { phaseOf, toolCallParts, turnState, updateState } from './turn-state.js';

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
 * Spec §5.3 step 2: a fresh turn with application-level waits may start only once every
 * target is finished, or once the root deadline has passed (so it can fail "timed out").
 */
async function joinOpen(
  store: Store,
  turn: TurnRecord,
  deadline: () => Promise<Date | null>,
): Promise<boolean> {
  if ((await store.listWaits({ turnId: turn.id })).length === 0) return true;
  if (await waitsReady(store, turn.id)) return true;
  const at = await deadline();
  return at !== null && Date.now() >= at.getTime();
}

/**
 * Spec §5.3 step 4: before its first model call, a joined turn gets one user message with
 * the JSON `{"wait_results": [...]}` of its targets, once (`state.wait_input`).
 */
async function injectWaitResults(
  runtime: Runtime,
  turn: TurnRecord,
  claimToken: string,
): Promise<TurnRecord> {
  if (turnState(turn).phase || turnState(turn).wait_input) return turn;
  const edges = await runtime.store.listWaits({ turnId: turn.id });
  if (edges.length === 0) return turn;
  const store = await runtime.fenced(turn.id, claimToken);
  const targets = await Promise.all(edges.map((edge) => store.loadTurn(edge.targetTurnId)));
  if (!targets.every(isFinished)) return turn;
  const { message, updated } = await store.atomic(null, async () => {
    const message = await store.appendMessage({
      conversationId: turn.conversationId,
      turnId: turn.id,
      role: 'user',
      kind: 'text',
      content: JSON.stringify({ wait_results: targets.map(subAgentResult) }),
      metadata: { wait_results: true },
    });
    return { message, updated: await updateState(store, turn.id, { wait_input: true }) };
  });
  await runtime.emit(updated, 'message.created', { message_id: message.id, role: 'user', kind: 'text' });
  return updated;
}

/**
 * Claims a pending turn for the workflow run that owns `claimToken` (spec §5.3): the lane
 * rules live in the store's `claimInLane`; a retry by the same run gets the same claim. A
 * fresh turn whose join is still open is refused with `waiting` (and the deadline, for the
 * workflow's timer); once the join opens, a `waiting` turn goes back to `pending` first.
 */
export async function claimTurn(runtime: Runtime, turnId: string, claimToken: string): Promise<ClaimDigest> {
  const store = runtime.store;
  const initial = await store.loadTurn(turnId);
  const agent = runtime.agents.resolve(initial.agentName);
  if (!turnState(initial).phase && (initial.status === 'waiting' || initial.status === 'pending')) {
    const deadline = async () => (await Budget.load(store, initial.rootTurnId, agent.limits)).deadline;
    if (!(await joinOpen(store, initial, deadline))) {
      const at = await deadline();
      return {
        claimed: false,
        reason: 'waiting',
        status: initial.status,
        deadline: at?.toISOString() ?? null,
      };
    }
    if (initial.status === 'waiting') {
      await store.atomic(await rootConversationId(store, initial), () =>
        store.claimTurn(turnId, { from: 'waiting', to: 'pending' }),
      );
    }
  }
  const outcome = await claimInLane(store, turnId, claimToken);
  if (!outcome.claimed) return { claimed: false, reason: outcome.reason, status: outcome.turn.status };
  if (initial.status !== 'running') {
    await runtime.emit(outcome.turn, 'turn.started', {
      status: outcome.turn.status,
      model: runtime.modelFor(agent, outcome.turn),
    });
  }
  const turn = await injectWaitResults(runtime, outcome.turn, claimToken);
  return { claimed: true, ...(await turnDigest(runtime, store, turn, { withDeadline: true })) };
}
