/**
 * The unit of work every activity that acts as a turn's owner opens: the turn loaded once,
 * and every write a visible block, `step.write(tx => …)`, whose one locked read of the row is
 * the fence check. What the block changes on the row is written once, at its end, with its
 * events and stream parts; listeners hear of the events after the commit (decisions 5, 86).
 */
import type { Agent } from '../../agents/agent.js';
import type { Cost } from '../../models/cost.js';
import { addUsage } from '../../models/cost.js';
import type { ModelUsage } from '../../models/types.js';
import type {
  JsonObject,
  NewStreamPart,
  Store,
  ToolExecutionRecord,
  TurnRecord,
  TurnUpdate,
} from '../../store/types.js';
import type { OwnerInput } from '../../contract/digests.js';
import type { Runtime } from '../runtime.js';
import { Budget, exhaustsAtLimit } from './budget.js';
import type { AnyTurnEvent } from './events.js';
import type { Fence, FencedView } from './fence.js';
import { checkFence, fencedView, taskMark } from './fence.js';
import type { StepErrorField, TurnState } from './turn-state.js';
import { nextStepErrorCount, turnState } from './turn-state.js';

type StreamParts = readonly NewStreamPart[] | ((turn: TurnRecord) => readonly NewStreamPart[]);
/** An event, or one built from the row as the block's update leaves it. */
type BlockEvent = AnyTurnEvent | ((turn: TurnRecord) => AnyTurnEvent);

/** One block of `TurnStep.write`: the row read under the root lock, and what the block changes. */
export interface TurnTx {
  /** The row as read at the block's start (fence checked), or as a write through `store` left it. */
  readonly turn: TurnRecord;
  /** `turn`'s state with this block's `patchState` merged in. */
  readonly state: TurnState;
  /** The store inside the lock; `loadTurn` of this turn answers from the block's own read. */
  readonly store: Store;
  /** The tree's budget, loaded once per block (a root reuses the block's read of its row). */
  budget(): Promise<Budget>;
  /** Merged into `options.state`, written once at the block's end. */
  patchState(patch: Partial<TurnState>): void;
  /** Adds usage and cost to the turn, in the block's one update. */
  charge(usage: ModelUsage, cost: Cost): void;
  /** Status, output, claim token…, in the block's one update. */
  set(attrs: TurnUpdate): void;
  /** Counts one more error of `step` under `field` (a different step starts over at 1). */
  countError(field: StepErrorField, step: string): number;
  /**
   * Appended with its stream parts at the block's end, in its transaction, so the write it
   * reports and the event commit together (a crash keeps both or neither); listeners hear of
   * it after the commit. Given as a function, built from the row as the block's update leaves it.
   */
  emit(...events: BlockEvent[]): void;
  /**
   * Stream parts written last in the block, before those its events report (the stream's lock
   * comes after every other); given as a function, built from the row as the block's update
   * leaves it.
   */
  stream(parts: StreamParts): void;
}

/** Root conversations by root turn id: fixed for a tree's life, so cached across activities. */
const rootConversations = new Map<string, string>();
const ROOT_CACHE_LIMIT = 10_000;

async function rootConversationOf(store: Store, turn: TurnRecord): Promise<string> {
  if (turn.rootTurnId === turn.id) return turn.conversationId;
  const cached = rootConversations.get(turn.rootTurnId);
  if (cached !== undefined) return cached;
  const id = (await store.loadTurn(turn.rootTurnId)).conversationId;
  if (rootConversations.size >= ROOT_CACHE_LIMIT) rootConversations.clear();
  rootConversations.set(turn.rootTurnId, id);
  return id;
}

export class TurnStep {
  #turn: TurnRecord;
  #view: FencedView | undefined;

  private constructor(
    readonly runtime: Runtime,
    readonly agent: Agent,
    readonly fence: Fence,
    turn: TurnRecord,
  ) {
    this.#turn = turn;
  }

  /** One `loadTurn` (none when the caller has the row), the agent, and the root conversation. */
  static async open(runtime: Runtime, input: OwnerInput, loaded?: TurnRecord): Promise<TurnStep> {
    const turn = loaded ?? (await runtime.store.loadTurn(input.turnId));
    const fence: Fence = {
      turnId: turn.id,
      claimToken: input.claimToken,
      rootConversationId: await rootConversationOf(runtime.store, turn),
      taskHistoryLength: input.taskHistoryLength,
    };
    return new TurnStep(runtime, runtime.agents.resolve(turn.agentName), fence, turn);
  }

  /** The row as this step last committed it: never reloaded. */
  get turn(): TurnRecord {
    return this.#turn;
  }

  get state(): TurnState {
    return turnState(this.#turn);
  }

  /** The raw store, for reads. Writes go through `write`. */
  get store(): Store {
    return this.runtime.store;
  }

  /** A `Store` whose writes are fenced, for code that must hold one (`ToolContext.store`). */
  fencedStore(): FencedView {
    return (this.#view ??= fencedView(this.runtime.store, this.fence));
  }

  /**
   * The fence check before crossing an external-effect boundary: LostClaim or StaleTask. A read
   * of the committed row, without the root lock, when it carries this task's mark already: every
   * revocation commits under that lock, so the read sees each one committed before it (and one
   * committed after it could not keep the effect from happening, locked or not). Else a block,
   * which raises the mark.
   */
  async observeClaim(): Promise<void> {
    if (checkFence(await this.runtime.store.loadTurn(this.fence.turnId), this.fence))
      await this.write(async () => undefined);
  }

  /**
   * One transaction under the root lock. The row is read once, and that read is the fence
   * check; the block's changes to the row are one update at its end, then its events and
   * stream parts; listeners hear of the events after the commit (after the outermost one,
   * when this block joins a caller's transaction).
   */
  async write<T>(fn: (tx: TurnTx) => Promise<T>): Promise<T> {
    const store = this.runtime.store;
    let block!: Block;
    const result = await store.atomic(this.fence.rootConversationId, async () => {
      const turn = await store.loadTurn(this.fence.turnId);
      block = new Block(store, turn, this.agent);
      if (checkFence(turn, this.fence)) block.patchState({ task_mark: taskMark(this.fence) } as TurnState);
      const value = await fn(block);
      const parts = await block.flush();
      await this.runtime.publish(block.turn, block.built(), parts, block.closed);
      return value;
    });
    this.#turn = block.turn;
    return result;
  }

  /** Events outside a block (with stream parts of their own): appended now, listeners after. */
  publish(events: readonly AnyTurnEvent[], parts: readonly NewStreamPart[] = []) {
    return this.runtime.publish(this.#turn, events, parts);
  }
}

class Block implements TurnTx {
  readonly store: Store;
  /** Tool executions the block moved (their results are in the block's stream parts). */
  readonly closed: ToolExecutionRecord[] = [];
  #events: BlockEvent[] = [];
  #turn: TurnRecord;
  #state: Partial<TurnState> | null = null;
  #attrs: TurnUpdate = {};
  #charges: { usage: ModelUsage; cost: Cost }[] = [];
  #parts: StreamParts[] = [];
  #budget: Promise<Budget> | undefined;

  constructor(
    private readonly base: Store,
    turn: TurnRecord,
    private readonly agent: Agent,
  ) {
    this.#turn = turn;
    this.store = ownRowView(base, turn.id, {
      current: () => this.#turn,
      wrote: (row) => (this.#turn = row),
      claimed: (row) => this.closed.push(row),
    });
  }

  get turn(): TurnRecord {
    return this.#turn;
  }

  get state(): TurnState {
    return { ...turnState(this.#turn), ...this.#state };
  }

  budget(): Promise<Budget> {
    const turn = this.#turn;
    return (this.#budget ??= Budget.load(this.base, turn.rootTurnId, this.agent.limits, {
      ...(turn.rootTurnId === turn.id ? { root: turn } : {}),
      atLimit: exhaustsAtLimit(this.agent),
    }));
  }

  patchState(patch: Partial<TurnState>): void {
    this.#state = { ...this.#state, ...patch };
  }

  charge(usage: ModelUsage, cost: Cost): void {
    this.#charges.push({ usage, cost });
  }

  set(attrs: TurnUpdate): void {
    this.#attrs = { ...this.#attrs, ...attrs };
  }

  countError(field: StepErrorField, step: string): number {
    const count = nextStepErrorCount(this.state, field, step);
    this.patchState({ [field]: { step, count } });
    return count;
  }

  emit(...events: BlockEvent[]): void {
    this.#events.push(...events);
  }

  /** The block's events, those given as functions built from the row as its update left it. */
  built(): AnyTurnEvent[] {
    return this.#events.map((event) => (typeof event === 'function' ? event(this.#turn) : event));
  }

  stream(parts: StreamParts): void {
    this.#parts.push(parts);
  }

  /** The block's one update of the row; returns its stream parts, built from the updated row. */
  async flush(): Promise<NewStreamPart[]> {
    const turn = this.#turn;
    const update: TurnUpdate = { ...this.#attrs };
    if (this.#state) {
      const options = update.options ?? turn.options;
      update.options = { ...options, state: { ...turnState(turn), ...this.#state } as JsonObject };
    }
    if (this.#charges.length > 0) {
      let usage = turn.usage;
      let cost = turn.cost ?? 0;
      for (const charge of this.#charges) {
        usage = addUsage(usage, charge.usage, charge.cost);
        cost += charge.cost.total ?? 0;
      }
      Object.assign(update, { usage, cost });
    }
    if (Object.keys(update).length > 0) this.#turn = await this.base.updateTurn(turn.id, update);
    return this.#parts.flatMap((next) => (typeof next === 'function' ? next(this.#turn) : next));
  }
}

/**
 * The store inside a block: this turn's row is answered from the block's read and kept as
 * writes to it return it, so a helper that loads the row again costs no read and never
 * writes back a copy older than the block's. The executions it claims are kept too.
 */
function ownRowView(
  base: Store,
  turnId: string,
  {
    current,
    wrote,
    claimed,
  }: {
    current: () => TurnRecord;
    wrote: (row: TurnRecord) => void;
    claimed: (row: ToolExecutionRecord) => void;
  },
): Store {
  const own: Partial<Record<keyof Store, unknown>> = {
    loadTurn: (id: string) =>
      id === turnId ? Promise.resolve(structuredClone(current())) : base.loadTurn(id),
    updateTurn: async (id: string, attrs: TurnUpdate) => {
      const row = await base.updateTurn(id, attrs);
      if (id === turnId) wrote(row);
      return row;
    },
    claimTurn: async (id: string, options?: Parameters<Store['claimTurn']>[1]) => {
      const row = await base.claimTurn(id, options);
      if (row && id === turnId) wrote(row);
      return row;
    },
    claimToolExecution: async (id: string, options?: Parameters<Store['claimToolExecution']>[1]) => {
      const row = await base.claimToolExecution(id, options);
      if (row) claimed(row);
      return row;
    },
  };
  return new Proxy(base, {
    get(target, property) {
      if (typeof property === 'string' && property in own) return own[property as keyof Store];
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
