/**
 * What opens a model call: its request, the `model.requested` event, and the live stream's
 * parts that start the attempt's step. A step publishes them in a transaction of their own
 * before the call; the first call of a `claimStep` has them in the claim's transaction when
 * it can (decision 88).
 */
import type { Agent } from '../../agents/agent.js';
import { StoreError } from '../../errors.js';
import type { ModelRequest } from '../../models/types.js';
import type { JsonObject, MessageRecord, NewStreamPart, TurnRecord } from '../../store/types.js';
import type { ModelStepInput } from '../../contract/activities.js';
import type { TurnEvent } from '../step/events.js';
import { turnEvent } from '../step/events.js';
import type { TurnState } from '../step/turn-state.js';
import { depthOf, turnState } from '../step/turn-state.js';
import type { Runtime } from '../runtime.js';
import { checkNoModelCall } from './budget-save.js';
import { compactionDue } from './compaction.js';
import { stepStartedParts } from './live-stream.js';
import { servingModel } from './model-failure.js';
import { buildModelRequest, historyForTurn } from './model-request.js';

export interface Opening {
  request: ModelRequest;
  requested: TurnEvent;
  parts: NewStreamPart[];
}

/** A call opened in the claim's transaction: its request, and the attempt its parts began. */
export interface OpenedCall {
  request: ModelRequest;
  attempt: number;
}

/** The opening of the step's call on the chain's model that serves this attempt. */
export async function openingOf(
  runtime: Runtime,
  agent: Agent,
  turn: TurnRecord,
  state: TurnState,
  call: {
    depth: number;
    input: ModelStepInput;
    retry: boolean;
    history?: readonly MessageRecord[] | undefined;
  },
): Promise<Opening> {
  const chain = runtime.modelsFor(agent, turn);
  const serving = servingModel(chain, state, call.input);
  const { request, report } = await buildModelRequest(
    runtime,
    runtime.store,
    agent,
    turn,
    call.depth,
    serving.model,
    call.history,
  );
  const requested = turnEvent('model.requested', {
    model: request.model,
    ...(chain.length > 1 ? { fallback_index: serving.index } : {}),
    tool_names: request.tools.map((tool) => tool.name),
    message_count: request.messages.length,
    prompt: report as unknown as JsonObject,
  });
  const parts = stepStartedParts(turn, call.input.step, call.retry, {
    model: request.model,
    agent: agent.name,
  });
  return { request, requested, parts };
}

/**
 * The first call's opening, built in the claim's transaction (on the row the claim left) when
 * building it waits on nothing of the application's (the agent has no context contributors)
 * and the call is due now (nothing stops a model call, no compaction is due). Undefined
 * otherwise, or when building it fails: the step then opens its call itself, as before, and
 * meets the same failure there. A store error still fails the claim's block.
 */
export async function openInClaim(
  runtime: Runtime,
  agent: Agent,
  claimed: TurnRecord,
  input: ModelStepInput,
): Promise<Opening | undefined> {
  if (agent.contextContributors.length > 0) return undefined;
  const store = runtime.store;
  const state = turnState(claimed);
  try {
    checkNoModelCall(state);
    const history = input.compaction && agent.compaction ? await historyForTurn(store, claimed) : undefined;
    if (input.compaction && (await compactionDue(store, agent, claimed, history))) return undefined;
    const depth = await depthOf(store, claimed);
    return await openingOf(runtime, agent, claimed, state, { depth, input, retry: false, history });
  } catch (error) {
    if (error instanceof StoreError) throw error;
    return undefined;
  }
}
