import { AsyncLocalStorage } from 'node:async_hooks';
import { LostClaim, StaleTask } from '../errors.js';
import { rootConversationId } from './tree.js';
import type {
  ClaimToolExecutionOptions,
  ClaimTurnOptions,
  ConversationUpdate,
  DeliveryUpdate,
  JsonObject,
  ListDeliveriesFilter,
  ListMessagesOptions,
  ListTurnsFilter,
  NewConversation,
  NewDelivery,
  NewMessage,
  NewStreamPart,
  NewToolExecution,
  NewTurn,
  Store,
  StoreBackend,
  ToolExecutionFilter,
  ToolExecutionStatus,
  ToolExecutionRecord,
  TurnRecord,
  TurnUpdate,
} from './types.js';

export interface Fence {
  turnId: string;
  claimToken: string;
  rootConversationId: string;
  /**
   * The history length of the workflow task whose local activity writes (store steps only).
   * The highest one seen under the token is kept in the turn's state (`task_mark`); a write
   * from an older task of the same run, one a newer task has overtaken, raises StaleTask.
   */
  taskHistoryLength?: number | undefined;
}

/** Stored in `options.state.task_mark` as `{ token, progress }`, the keys rows already carry. */
interface TaskMark {
  token: string;
  taskHistoryLength: number;
}

function taskMarkOf(turn: TurnRecord): TaskMark | null {
  const state = turn.options['state'];
  const mark = state && typeof state === 'object' && !Array.isArray(state) ? state['task_mark'] : null;
  if (!mark || typeof mark !== 'object' || Array.isArray(mark)) return null;
  const { token, progress } = mark;
  return typeof token === 'string' && typeof progress === 'number'
    ? { token, taskHistoryLength: progress }
    : null;
}

/**
 * Raises StaleTask when a newer workflow task of the run holding `claimToken` has already
 * written to `turn`; returns whether this task is newer than any that wrote (so it should
 * raise the mark). Call it under the turn's root lock.
 */
export function checkTaskMark(turn: TurnRecord, claimToken: string, taskHistoryLength: number): boolean {
  const mark = taskMarkOf(turn);
  const current = mark?.token === claimToken ? mark.taskHistoryLength : -1;
  if (current > taskHistoryLength) {
    throw new StaleTask(
      `a newer workflow task of this run has moved turn ${turn.id} on (history ${current} > ${taskHistoryLength})`,
    );
  }
  return current < taskHistoryLength;
}

/** The turn's options with the task mark raised to `taskHistoryLength` under `claimToken`. */
export function withTaskMark(turn: TurnRecord, claimToken: string, taskHistoryLength: number): JsonObject {
  const state = {
    ...(turn.options['state'] as JsonObject | undefined),
    task_mark: { token: claimToken, progress: taskHistoryLength },
  };
  return { ...turn.options, state };
}

/**
 * TurnKit's ExecutionStore (spec §5.4): a store bound to one turn's claim. Every write runs
 * under the root conversation's lock after checking that the turn still carries this token,
 * so after a completion, cancellation or reset the old owner can never write again. Reads
 * pass through. Two writes are deliberately unfenced: `appendEvent` (events are appended
 * after commit and describe what already happened) and `reconcileStaleTurns` (maintenance of
 * other turns, rechecked under each one's own root lock).
 */
export class FencedStore implements Store {
  readonly backend: StoreBackend;
  #marked = false;
  /** The block of `atomic` whose fence check this store made, while it runs. */
  readonly #checkedBlock = new AsyncLocalStorage<{ open: boolean }>();

  constructor(
    readonly base: Store,
    readonly fence: Fence,
  ) {
    this.backend = base.backend;
  }

  /** Binds `claimToken` of `turn`, resolving the tree's root conversation. */
  static async forTurn(
    base: Store,
    turn: TurnRecord,
    claimToken: string,
    taskHistoryLength?: number,
  ): Promise<FencedStore> {
    return new FencedStore(base, {
      turnId: turn.id,
      claimToken,
      rootConversationId: await rootConversationId(base, turn),
      taskHistoryLength,
    });
  }

  atomic<T>(_conversationId: string | null, fn: () => Promise<T>): Promise<T> {
    // Inside a block this store already checked, the root lock is still held since the check:
    // no revocation can come in between, so each write of the block need not load the turn again.
    if (this.#checkedBlock.getStore()?.open) return this.base.atomic(this.fence.rootConversationId, fn);
    return this.base.atomic(this.fence.rootConversationId, async () => {
      const turn = await this.base.loadTurn(this.fence.turnId);
      // Checked under the root lock, which every revocation (cancel, reconcile, completion) holds.
      if (turn.claimToken !== this.fence.claimToken) throw new LostClaim('turn ownership was revoked');
      await this.#checkTask(turn);
      // Work that outlives the block finds it closed and checks again.
      const block = { open: true };
      try {
        return await this.#checkedBlock.run(block, fn);
      } finally {
        block.open = false;
      }
    });
  }

  /** Refuses a stale workflow task's write; the first write of a newer task raises the mark. */
  async #checkTask(turn: TurnRecord): Promise<void> {
    const { taskHistoryLength, claimToken } = this.fence;
    if (taskHistoryLength === undefined) return;
    if (checkTaskMark(turn, claimToken, taskHistoryLength) && !this.#marked) {
      await this.base.updateTurn(turn.id, { options: withTaskMark(turn, claimToken, taskHistoryLength) });
    }
    this.#marked = true;
  }

  atomicGraph<T>(fn: () => Promise<T>): Promise<T> {
    return this.base.atomicGraph(() => this.atomic(null, fn));
  }

  #write<T>(fn: () => Promise<T>): Promise<T> {
    return this.atomic(null, fn);
  }

  createConversation(attrs: NewConversation) {
    return this.#write(() => this.base.createConversation(attrs));
  }
  loadConversation(id: string) {
    return this.base.loadConversation(id);
  }
  updateConversation(id: string, attrs: ConversationUpdate) {
    return this.#write(() => this.base.updateConversation(id, attrs));
  }
  nextMessageSequence(conversationId: string) {
    return this.#write(() => this.base.nextMessageSequence(conversationId));
  }
  latestMessageSequence(conversationId: string) {
    return this.base.latestMessageSequence(conversationId);
  }
  appendMessage(attrs: NewMessage) {
    return this.#write(() => this.base.appendMessage(attrs));
  }
  loadMessage(id: string) {
    return this.base.loadMessage(id);
  }
  listMessages(conversationId: string, options?: ListMessagesOptions) {
    return this.base.listMessages(conversationId, options);
  }
  createTurn(attrs: NewTurn) {
    return this.#write(() => this.base.createTurn(attrs));
  }
  loadTurn(id: string) {
    return this.base.loadTurn(id);
  }
  updateTurn(id: string, attrs: TurnUpdate) {
    return this.#write(() => this.base.updateTurn(id, attrs));
  }
  claimTurn(id: string, options?: ClaimTurnOptions) {
    return this.#write(() => this.base.claimTurn(id, options));
  }
  listTurns(filter?: ListTurnsFilter) {
    return this.base.listTurns(filter);
  }
  listSubmittedTurns(options?: { limit?: number }) {
    return this.base.listSubmittedTurns(options);
  }
  listActionableTurns(options: { limit: number }) {
    return this.base.listActionableTurns(options);
  }
  listStaleInlineTurns(options: { before: string; limit: number }) {
    return this.base.listStaleInlineTurns(options);
  }
  busyConversation(id: string, options?: { includePending?: boolean }) {
    return this.base.busyConversation(id, options);
  }
  nextDeliveryTrigger(conversationId: string) {
    return this.base.nextDeliveryTrigger(conversationId);
  }
  createDelivery(attrs: NewDelivery) {
    return this.#write(() => this.base.createDelivery(attrs));
  }
  loadDelivery(id: string) {
    return this.base.loadDelivery(id);
  }
  updateDelivery(id: string, attrs: DeliveryUpdate) {
    return this.#write(() => this.base.updateDelivery(id, attrs));
  }
  listDeliveries(filter?: ListDeliveriesFilter) {
    return this.base.listDeliveries(filter);
  }
  createWait(attrs: { turnId: string; targetTurnId: string }) {
    return this.#write(() => this.base.createWait(attrs));
  }
  listWaits(filter?: { turnId?: string; targetTurnId?: string }) {
    return this.base.listWaits(filter);
  }
  createToolExecution(attrs: NewToolExecution) {
    return this.#write(() => this.base.createToolExecution(attrs));
  }
  loadToolExecution(id: string) {
    return this.base.loadToolExecution(id);
  }
  claimToolExecution(id: string, options?: ClaimToolExecutionOptions): Promise<ToolExecutionRecord | null> {
    return this.#write(() => this.base.claimToolExecution(id, options));
  }
  listToolExecutions(filter: ToolExecutionFilter) {
    return this.base.listToolExecutions(filter);
  }
  countToolExecutions(filter: ToolExecutionFilter & { exceptStatuses?: readonly ToolExecutionStatus[] }) {
    return this.base.countToolExecutions(filter);
  }
  appendEvent(attrs: { turnId: string; conversationId: string; type: string; payload?: JsonObject }) {
    return this.base.appendEvent(attrs);
  }
  listEvents(turnId: string, options?: { afterSequence?: number; limit?: number }) {
    return this.base.listEvents(turnId, options);
  }
  // Unfenced as events are: a zombie attempt's deltas are left out by their attempt instead.
  appendStreamParts(parts: readonly NewStreamPart[]) {
    return this.base.appendStreamParts(parts);
  }
  listStreamParts(rootTurnId: string, options?: { afterSequence?: number; limit?: number }) {
    return this.base.listStreamParts(rootTurnId, options);
  }
  hasStreamPart(rootTurnId: string, sequence: number) {
    return this.base.hasStreamPart(rootTurnId, sequence);
  }
  get watchStream() {
    return this.base.watchStream;
  }
  reconcileStaleTurns(options: { before: string; limit?: number }) {
    return this.base.reconcileStaleTurns(options);
  }
  /** The base store belongs to whoever opened it. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
