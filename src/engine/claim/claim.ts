import { nowIso } from '../../store/records.js';
import { claimInLane, rootConversationId } from '../../store/tree.js';
import { waitsReady } from '../../store/wait-graph.js';
import { isFinished, subAgentResult } from '../step/sub-agents.js';
import { checkTaskMark } from '../step/fence.js';
import type { Store, TurnRecord, TurnStatus, WaitRecord } from '../../store/types.js';
import { Budget } from '../step/budget.js';
import { ClaimReservation } from './reserve.js';
import type { OpenedCall } from '../model/model-opening.js';
import type { ModelStepInput } from '../../contract/activities.js';
import { turnDigest } from '../step/digest.js';
import { validateModel } from '../model/model-failure.js';
import type { Runtime } from '../runtime.js';
import type { Agent } from '../../agents/agent.js';
import { phaseOf, turnState } from '../step/turn-state.js';
import { messageCreated } from '../step/events.js';
import { TurnStep } from '../step/turn-step.js';
import type { ClaimDigest, OwnerInput } from '../../contract/digests.js';

/**
 * Spec §5.3 step 2: a fresh turn with application-level waits (`edges`) may start only once
 * every target is finished, or once the root deadline has passed (so it can fail "timed out").
 */
async function joinOpen(
  store: Store,
  turn: TurnRecord,
  edges: readonly WaitRecord[],
  deadline: () => Promise<Date | null>,
): Promise<boolean> {
  if (edges.length === 0) return true;
  if (await waitsReady(store, turn.id)) return true;
  const at = await deadline();
  return at !== null && Date.now() >= at.getTime();
}

/**
 * Spec §5.3 step 4: before its first model call, a joined turn gets one user message with
 * the JSON `{"wait_results": [...]}` of its targets, once (`state.wait_input`). `known`: the
 * turn's waits as the claim read them.
 */
async function injectWaitResults(
  runtime: Runtime,
  turn: TurnRecord,
  owner: OwnerInput,
  known: readonly WaitRecord[] | undefined,
): Promise<TurnRecord> {
  if (turnState(turn).phase || turnState(turn).wait_input) return turn;
  const edges = known ?? (await runtime.store.listWaits({ turnId: turn.id }));
  if (edges.length === 0) return turn;
  const targets = await Promise.all(edges.map((edge) => runtime.store.loadTurn(edge.targetTurnId)));
  if (!targets.every(isFinished)) return turn;
  const step = await TurnStep.open(runtime, owner, turn);
  await step.write(async (tx) => {
    const message = await tx.store.appendMessage({
      conversationId: turn.conversationId,
      turnId: turn.id,
      role: 'user',
      kind: 'text',
      content: JSON.stringify({ wait_results: targets.map(subAgentResult) }),
      metadata: { wait_results: true },
    });
    tx.patchState({ wait_input: true });
    tx.emit(messageCreated(message));
  });
  return step.turn;
}

/**
 * Takes a turn its run released (suspended `waiting`, or in one of `from`) back for that run,
 * under the root lock: running under the same token already, it is returned as is; a stale
 * workflow task of the run may not (StaleTask); in any other state, null.
 */
export async function retakeClaim(
  runtime: Runtime,
  input: OwnerInput,
  from: readonly TurnStatus[],
): Promise<TurnRecord | null> {
  const store = runtime.store;
  const initial = await store.loadTurn(input.turnId);
  return store.atomic(await rootConversationId(store, initial), async () => {
    const turn = await store.loadTurn(input.turnId);
    if (input.taskHistoryLength !== undefined) checkTaskMark(turn, input.claimToken, input.taskHistoryLength);
    if (turn.status === 'running' && turn.claimToken === input.claimToken) return turn;
    if (!from.includes(turn.status) || turn.claimToken !== null) return null;
    return store.claimTurn(turn.id, {
      from: turn.status,
      to: 'running',
      claimToken: input.claimToken,
      heartbeatAt: nowIso(),
    });
  });
}

export interface ClaimOptions {
  /**
   * The caller is the current run of the turn's own workflow (`turnkit-turn-<turnId>`).
   * Temporal keeps at most one run of a workflow id open, and only that workflow claims the
   * turn, so a claim held under another token belongs to a run that a reset (or an operator's
   * terminate) ended: this run takes the turn over from its committed phase, and every write
   * of the old run fails with LostClaim from then on.
   */
  supersede?: boolean;
  /** The claiming workflow task's history length (see OwnerInput). */
  taskHistoryLength?: number;
  /**
   * The model step the claiming activity makes next (`claimStep`, decision 88): a lane claim
   * reserves that step's iteration in its own update, when the budget allows it, so the step
   * needs no transaction of its own before its request.
   */
  reserveStep?: ModelStepInput;
}

/** A claim, with the row it left and the budget of the step it reserved (decision 88). */
export interface Claimed {
  digest: ClaimDigest;
  /** The row as the claim committed it (absent when refused). */
  turn?: TurnRecord;
  /** The tree's budget with `reserveStep`'s iteration taken, when the claim reserved it. */
  reserved?: Budget;
  /** `reserveStep`'s call, when the claim's transaction opened it too. */
  opened?: OpenedCall;
}

/**
 * Takes over a turn that a superseded run of its workflow left `running` under another
 * token, suspended (`waiting`, token cleared) in its tools phase, or paused. Under the same locks as
 * the lane claim; null when the turn is in neither state. A stale workflow task of the run
 * that last moved the row gets StaleTask (review finding 20); that run's live task may take
 * its own row back (its pause step ran again after a lost worker and met the row it paused).
 */
async function supersedeClaim(
  store: Store,
  turn: TurnRecord,
  claimToken: string,
  taskHistoryLength: number | undefined,
): Promise<TurnRecord | null> {
  const heldByEndedRun = (row: TurnRecord) =>
    (row.status === 'running' && row.claimToken !== claimToken) ||
    (row.status === 'waiting' && turnState(row).phase === 'tools') ||
    row.status === 'paused';
  if (!heldByEndedRun(turn)) return null;
  return store.atomic(await rootConversationId(store, turn), () =>
    store.atomic(turn.conversationId, async () => {
      const fresh = await store.loadTurn(turn.id);
      if (!heldByEndedRun(fresh)) return null;
      if (taskHistoryLength !== undefined) checkTaskMark(fresh, claimToken, taskHistoryLength);
      return store.claimTurn(turn.id, {
        from: fresh.status,
        to: 'running',
        claimToken,
        heartbeatAt: nowIso(),
      });
    }),
  );
}

/**
 * Claims a pending turn for the workflow run that owns `claimToken` (spec §5.3): the lane
 * rules live in the store's `claimInLane`; a retry by the same run gets the same claim. A
 * fresh turn whose join is still open is refused with `waiting` (and the deadline, for the
 * workflow's timer); once the join opens, a `waiting` turn goes back to `pending` first.
 * With `supersede`, a turn held by an ended run of the same workflow is taken over.
 */
export async function claimTurn(
  runtime: Runtime,
  turnId: string,
  claimToken: string,
  options: ClaimOptions = {},
): Promise<ClaimDigest> {
  return (await claimTurnRow(runtime, turnId, claimToken, options)).digest;
}

/** `claimTurn`, with the row the claim left and the budget of the step it reserved. */
export async function claimTurnRow(
  runtime: Runtime,
  turnId: string,
  claimToken: string,
  options: ClaimOptions = {},
): Promise<Claimed> {
  const store = runtime.store;
  // The turn and its waits in one read (decision 88).
  const { turn: initial, waits } = await store.loadTurnWithWaits(turnId);
  const agent = runtime.agents.resolve(initial.agentName);
  let root: Promise<TurnRecord> | undefined;
  // The root's deadline is fixed once it starts: read from its row, once (a root's own read serves).
  const deadline = async (latest: TurnRecord = initial) =>
    Budget.deadlineOf(
      latest.id === latest.rootTurnId ? latest : await (root ??= store.loadTurn(latest.rootTurnId)),
      agent.limits,
    );
  let edges: WaitRecord[] | undefined;
  if (!turnState(initial).phase && (initial.status === 'waiting' || initial.status === 'pending')) {
    edges = waits;
    if (!(await joinOpen(store, initial, edges, deadline))) {
      const at = await deadline();
      return {
        digest: {
          claimed: false,
          reason: 'waiting',
          status: initial.status,
          deadline: at?.toISOString() ?? null,
        },
      };
    }
    if (initial.status === 'waiting') {
      await store.atomic(await rootConversationId(store, initial), () =>
        store.claimTurn(turnId, { from: 'waiting', to: 'pending' }),
      );
    }
  }
  const taken = options.supersede
    ? await supersedeClaim(store, initial, claimToken, options.taskHistoryLength)
    : null;
  if (taken) {
    await runtime.emit(taken, 'turn.reclaimed', { status: initial.status, phase: phaseOf(taken) });
    await validateModel(runtime, agent, taken);
    return { digest: granted(runtime, agent, taken, await deadline(taken)), turn: taken };
  }
  const reservation = new ClaimReservation(runtime, agent);
  const outcome = await claimInLane(store, turnId, claimToken, initial, {
    ...(options.reserveStep !== undefined && options.taskHistoryLength === undefined
      ? { prepare: reservation.prepare(options.reserveStep.step) }
      : {}),
    // A joined turn's first call follows its wait results (written after the claim): not opened here.
    started: reservation.started(edges?.length === 0 ? options.reserveStep : undefined),
  });
  if (!outcome.claimed)
    return { digest: { claimed: false, reason: outcome.reason, status: outcome.turn.status } };
  // Before the phase loop (spec §3.2 step 4): a model that can never work fails the turn now.
  await reservation.validate(outcome.turn);
  const owner = {
    turnId,
    claimToken,
    ...(options.taskHistoryLength !== undefined ? { taskHistoryLength: options.taskHistoryLength } : {}),
  };
  const turn = await injectWaitResults(runtime, outcome.turn, owner, edges);
  return {
    digest: granted(runtime, agent, turn, await deadline(turn)),
    turn,
    // A join's input written after the claim moved the row on: its step reserves for itself.
    ...(reservation.budget && turn === outcome.turn ? { reserved: reservation.budget } : {}),
    ...(reservation.opened && turn === outcome.turn ? { opened: reservation.opened } : {}),
  };
}

/** The digest of a claim granted. */
function granted(runtime: Runtime, agent: Agent, turn: TurnRecord, deadline: Date | null): ClaimDigest {
  return { claimed: true, ...turnDigest(agent, turn, deadline), ...routeOf(runtime, agent, turn) };
}

/** `{ modelRoute }` when the worker routes some of the turn's models to queues of their own. */
function routeOf(runtime: Runtime, agent: Agent, turn: TurnRecord) {
  const route = runtime.modelRouteFor(agent, turn);
  return route ? { modelRoute: route } : {};
}
