/**
 * Builds the digests the turn's activities return to the workflow (their types are the
 * contract's: src/contract/digests.ts).
 */
import type { Agent } from '../../agents/agent.js';
import { hasOutputChecks, limitsFromJson } from '../../agents/agent.js';
import type { TurnRecord } from '../../store/types.js';
import { iterationsOf, phaseOf, toolCallParts, turnState } from './turn-state.js';
import type { ToolCallDigest, TurnDigest } from '../../contract/digests.js';

/** The tool calls of a turn in its tools phase, as the workflow dispatches them. */
function toolCallDigests(agent: Agent, turn: TurnRecord): ToolCallDigest[] {
  if (phaseOf(turn) !== 'tools') return [];
  return toolCallParts(turnState(turn).parts).map((call) => {
    const tool = agent.effectiveTools.find((candidate) => candidate.name === call.name);
    return { id: call.id, name: call.name, kind: tool?.kind ?? 'unknown', terminal: tool?.terminal ?? false };
  });
}

/** Where the turn is, for the workflow; `deadline` only from the claim (the root timer). */
export function turnDigest(agent: Agent, turn: TurnRecord, deadline: Date | null = null): TurnDigest {
  return {
    turnId: turn.id,
    status: turn.status,
    phase: phaseOf(turn),
    toolCalls: toolCallDigests(agent, turn),
    deadline: deadline?.toISOString() ?? null,
    ...(hasOutputChecks(agent) ? { outputChecks: true } : {}),
    progress: {
      iteration: iterationsOf(turn),
      maxIterations: limitsFromJson(turn.options['budget_limits'], agent.limits).maxIterations,
      tokens: turn.usage?.total_tokens ?? 0,
      cost: turn.cost ?? 0,
    },
  };
}
