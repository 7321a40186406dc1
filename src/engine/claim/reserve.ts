/**
 * The first model step's reservation, made in the lane claim's own update (decision 88): the
 * claim that `claimStep` makes takes the iteration of the model call that follows it in the
 * same activity, so that call needs no transaction of its own before its request.
 */
import type { Agent } from '../../agents/agent.js';
import { BudgetError } from '../../errors.js';
import { validateModel } from '../model/model-failure.js';
import type { OpenedCall } from '../model/model-opening.js';
import { openInClaim } from '../model/model-opening.js';
import type { ModelStepInput } from '../../contract/activities.js';
import { turnEvent } from '../step/events.js';
import type { JsonObject, TurnRecord } from '../../store/types.js';
import { Budget, exhaustsAtLimit } from '../step/budget.js';
import { depthOf, iterationsOf, phaseOf, turnState } from '../step/turn-state.js';
import type { Runtime } from '../runtime.js';

export class ClaimReservation {
  /** The tree's budget with the step's iteration taken, once the claim reserved it. */
  budget: Budget | undefined;
  /** The step's call, when the claim's transaction opened it too. */
  opened: OpenedCall | undefined;

  #validation: Promise<void> | undefined;

  constructor(
    private readonly runtime: Runtime,
    private readonly agent: Agent,
  ) {}

  /** The claim's one model validation: made in the claim when it reserves, reused after it. */
  validate(turn: TurnRecord): Promise<void> {
    return (this.#validation ??= validateModel(this.runtime, this.agent, turn));
  }

  /**
   * The claim's `prepare` hook: the options it writes, with `step` reserved as the step's own
   * `reserveIteration` would, on the row the claim read under its lock. Undefined (nothing
   * reserved, the claim goes on) unless the turn is at a model call this activity makes (not
   * routed to a queue of its own), its model validates, and the budget allows the call: else
   * the step's own reservation, or the check after the claim, raises the error as before.
   */
  prepare(step: string) {
    return async (turn: TurnRecord, options: JsonObject): Promise<JsonObject | undefined> => {
      const { runtime, agent } = this;
      if (phaseOf(turn) !== 'model' || runtime.modelRouteFor(agent, turn)) return undefined;
      if (
        !(await this.validate(turn).then(
          () => true,
          () => false,
        ))
      )
        return undefined;
      const budget = await Budget.load(runtime.store, turn.rootTurnId, agent.limits, {
        ...(turn.rootTurnId === turn.id ? { root: turn } : {}),
        atLimit: exhaustsAtLimit(agent),
      });
      try {
        budget.check(await depthOf(runtime.store, turn));
        budget.reserveIteration();
      } catch (error) {
        if (error instanceof BudgetError) return undefined;
        throw error;
      }
      this.budget = budget;
      const state = { ...turnState(turn), iterations: iterationsOf(turn) + 1, reserved_step: step };
      return { ...options, state: state as JsonObject };
    };
  }

  /**
   * The claim's `started` hook: `turn.started`, and, when the claim reserved the step and the
   * call can be opened under the claim's locks (`openInClaim`), the call's `model.requested`
   * and the parts that start its step, after the claim's status, in the claim's transaction.
   */
  started(input: ModelStepInput | undefined) {
    return async (claimed: TurnRecord): Promise<void> => {
      const { runtime, agent } = this;
      const begun = turnEvent('turn.started', {
        status: claimed.status,
        model: runtime.modelFor(agent, claimed),
      });
      const opening =
        input && this.budget && turnState(claimed).reserved_step === input.step
          ? await openInClaim(runtime, agent, claimed, input)
          : undefined;
      if (!opening) {
        await runtime.publish(claimed, [begun]);
        return;
      }
      const stored = await runtime.publish(claimed, [begun, opening.requested], opening.parts, [], true);
      const attempt = stored.find((part) => part.type === 'step.started')!.sequence;
      this.opened = { request: opening.request, attempt };
    };
  }
}
