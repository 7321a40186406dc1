/**
 * The conversation inbox on the lane's side: the `post` Update (decision 41). Its validator
 * checks the payload; its handler applies one post at a time, in the order the lane accepted
 * them, through the `acceptPost` local activity, which does the store's part and whatever the
 * policy needs of the running turn (a steer Update, a cancel signal): a workflow cannot send
 * an Update, and an activity gets the steer's answer (accepted, or too late: then it queues).
 */
import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  proxyLocalActivities,
  setHandler,
} from '@temporalio/workflow';
import type { PostReceipt } from '../contract/post-request.js';
import { parsePostRequest } from '../contract/post-request.js';
import type { LaneWorkflowInput, TurnActivities } from './contract.js';
import { postUpdate } from './contract.js';

// A caller waits on the Update: a local activity, so that the post is decided in the workflow
// task that accepted it (no activity task to match and no second workflow task: decision 41),
// and one that fails for good says so in seconds, not minutes.
const activities = proxyLocalActivities<Pick<TurnActivities, 'acceptPost'>>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '5 seconds', maximumAttempts: 8 },
});

function refuse(type: string, message: string, details: unknown[] = []): never {
  throw ApplicationFailure.create({ type, message, nonRetryable: true, details });
}

/** The lane's posts: registered in one line, applied one at a time, counted for continue-as-new. */
export class LanePosts {
  /** Posts this run accepted: they count toward its steps, so its history stays bounded. */
  accepted = 0;
  #next = 0;
  #serving = 0;

  constructor(
    private readonly input: LaneWorkflowInput,
    /** Asks the lane for a step (a queued or interrupting post: its next turn is the lane's). */
    private readonly wake: () => void,
  ) {}

  register(): void {
    setHandler(postUpdate, (payload) => this.post(payload), {
      validator: (payload) => this.validate(payload),
    });
  }

  validate(payload: unknown): void {
    const parsed = parsePostRequest(payload);
    if (!parsed.ok) refuse('ArgumentError', parsed.reason);
  }

  async post(payload: unknown): Promise<PostReceipt> {
    const parsed = parsePostRequest(payload);
    if (!parsed.ok) refuse('ArgumentError', parsed.reason);
    const ticket = this.#next++;
    this.accepted += 1;
    // One post at a time, in the order accepted: each one sees what the one before it did.
    await condition(() => this.#serving === ticket);
    try {
      const receipt = await activities.acceptPost({
        conversationId: this.input.conversationId,
        request: parsed.value,
        ...(this.input.settings ? { settings: this.input.settings } : {}),
      });
      if (receipt.disposition === 'queued' || receipt.disposition === 'interrupted') this.wake();
      return receipt;
    } catch (error) {
      // The Update fails with the TurnKit error the activity raised (ConversationBusyError,
      // AuthorizationError, …); an error that is not an ApplicationFailure would fail the task.
      if (!(error instanceof ActivityFailure)) throw error;
      const cause = error.cause;
      if (cause instanceof ApplicationFailure)
        refuse(cause.type ?? 'TurnKitError', cause.message, cause.details ? [...cause.details] : []);
      refuse('TurnKitError', cause?.message ?? error.message);
    } finally {
      this.#serving += 1;
    }
  }
}
