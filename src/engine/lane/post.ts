/**
 * `conversation.post` on the lane's side (decision 41): the `acceptPost` activity behind the
 * lane's `post` Update. A post to an idle conversation writes its message and its turn and
 * starts the turn; to a busy one it follows the policy: `queue` (the message waits for the
 * lane's next turn), `steer` (the running turn's `steer` Update; queued when too late),
 * `interrupt` (the lane's turns cancelled, retain; the next turn sees both messages), `reject`
 * (ConversationBusyError, nothing written). One row per request id holds it all: a retry, or
 * the same post sent twice, returns the first receipt.
 */
import type { PostPolicy, PostReceipt, PostRequest } from '../../contract/post-request.js';
import { postUpdateId } from '../../contract/post-request.js';
import type { Agent } from '../../agents/agent.js';
import { ConversationBusyError, InputError, StoreError } from '../../errors.js';
import { mediaPart } from '../../models/media.js';
import { occupiesLane } from '../../store/records.js';
import type { DeliveryRecord, MessageRecord, TurnRecord } from '../../store/types.js';
import { BUSY_TURN_STATUSES, LANE_TURN_STATUSES, TERMINAL_TURN_STATUSES } from '../../store/types.js';
import type { RepairContext } from '../end/repair.js';
import { startOrNudgeTurn } from '../end/workflow-start.js';
import { buildTurn } from './build-turn.js';
import { wakeConversation } from './lane-step.js';
import { authorizeInterrupt, authorizePost, cancelOnBehalf, steerOnBehalf } from './post-effects.js';
import type { PostWrite } from './post-record.js';
import {
  answeringTurn,
  appendPostMessage,
  findPost,
  receiptOf,
  receiptOnly,
  recordPost,
} from './post-record.js';

/** How long an interrupting post waits for the turns it cancelled before it names the next turn. */
const INTERRUPT_WAIT_MS = 15_000;
/** Looks at the lane before a post gives up (each one lost a race to a turn that started or ended). */
const MAX_LOOKS = 10;

interface Post {
  context: RepairContext;
  conversationId: string;
  request: PostRequest;
  agent: Agent;
  verified: boolean;
}

/** Decided under the conversation's lock: written, already recorded, or the lane changed. */
type Written = { message: MessageRecord; turn: TurnRecord | null } | { known: DeliveryRecord } | 'changed';

export async function acceptPost(
  context: RepairContext,
  conversationId: string,
  request: PostRequest,
): Promise<PostReceipt> {
  const store = context.runtime.store;
  const conversation = await store.loadConversation(conversationId);
  const agent = context.runtime.agents.resolve(conversation.agentName);
  checkMedia(request);
  const known = await findPost(store, conversationId, request.requestId);
  if (known) return resumePost(context, known);
  const policy: PostPolicy = request.policy ?? agent.postPolicy;
  const { verified } = await authorizePost(context.runtime, conversationId, request, policy);
  const post: Post = { context, conversationId, request, agent, verified };
  // The lane may move between the look and the write: then the post is decided again.
  for (let looks = 0; ; looks++) {
    if (looks === MAX_LOOKS)
      throw new StoreError(`conversation ${conversationId} kept changing while a post was decided`, {
        retryable: true,
      });
    const lane = (await store.listTurns({ conversationId, status: [...LANE_TURN_STATUSES] })).filter((turn) =>
      occupiesLane(turn, true),
    );
    const receipt =
      lane.length === 0
        ? await writePost(post, 'started')
        : policy === 'queue'
          ? await writePost(post, 'queued')
          : policy === 'steer'
            ? await steerPost(post, lane)
            : policy === 'interrupt'
              ? await interruptPost(post, lane)
              : rejectPost(request, lane);
    if (receipt !== 'changed') return receipt;
  }
}

/** Images and files are checked again here: a post may come from anywhere (the CLI, `temporal`). */
function checkMedia(request: PostRequest): void {
  for (const part of request.media) {
    const data = part['data'];
    const url = part['url'];
    const filename = part['filename'];
    mediaPart(
      {
        ...(typeof data === 'string' ? { data } : typeof url === 'string' ? { url } : {}),
        mimeType: part.mime_type,
        ...(typeof filename === 'string' ? { filename } : {}),
      },
      (message) => new InputError(`post media: ${message}`),
    );
  }
}

function rejectPost(request: PostRequest, lane: readonly TurnRecord[]): never {
  const busy = lane.map((turn) => turn.id);
  throw new ConversationBusyError(`the conversation is busy (${busy.join(', ')}): post rejected`, {
    details: {
      receipt: { requestId: request.requestId, messageId: null, turnId: null, disposition: 'rejected' },
      busy,
    },
  });
}

/**
 * Writes the message (and, `started`, its turn) and the post's row in one transaction.
 * `started` needs the lane idle and the others busy, as they were decided: else `changed`.
 */
async function writeUnderLock(
  post: Post,
  disposition: 'started' | 'queued' | 'interrupted',
  extra: Partial<PostWrite> = {},
): Promise<Written> {
  const { conversationId, request, agent } = post;
  const store = post.context.runtime.store;
  return store.atomic(conversationId, async (): Promise<Written> => {
    const known = await findPost(store, conversationId, request.requestId);
    if (known) return { known };
    if ((await store.busyConversation(conversationId)) !== (disposition !== 'started')) return 'changed';
    const message = await appendPostMessage(store, conversationId, request);
    const turn =
      disposition === 'started'
        ? await buildTurn(
            store,
            agent,
            conversationId,
            { id: message.id, sequence: message.sequence },
            { submit: true, ...(request.principal !== null ? { principal: request.principal } : {}) },
          )
        : null;
    await recordPost(store, conversationId, {
      request,
      disposition,
      message,
      ...(turn ? { turnId: turn.id } : {}),
      ...extra,
    });
    return { message, turn };
  });
}

async function writePost(post: Post, disposition: 'started' | 'queued'): Promise<PostReceipt | 'changed'> {
  const written = await writeUnderLock(post, disposition);
  if (written === 'changed') return written;
  if ('known' in written) return resumePost(post.context, written.known);
  if (written.turn) await startOrNudgeTurn(post.context, written.turn);
  return {
    requestId: post.request.requestId,
    messageId: written.message.id,
    turnId: written.turn?.id ?? null,
    disposition,
  };
}

/** The running turn takes the text at its next boundary; too late (or media), the post queues. */
async function steerPost(post: Post, lane: readonly TurnRecord[]): Promise<PostReceipt | 'changed'> {
  const { context, conversationId, request } = post;
  const store = context.runtime.store;
  const running = lane.find((turn) => BUSY_TURN_STATUSES.includes(turn.status));
  // A steer is text only (spec Appendix A): a post with images or files queues instead.
  if (!running || request.media.length > 0) return writePost(post, 'queued');
  const afterSequence = await store.latestMessageSequence(conversationId);
  const updateId = postUpdateId(request.requestId);
  const steered = await steerOnBehalf(context.runtime, context.temporal, {
    turnId: running.id,
    updateId,
    request,
    verified: post.verified,
  });
  if (steered === 'refused') return writePost(post, 'queued');
  const known = await store.atomic(conversationId, async () => {
    const found = await findPost(store, conversationId, request.requestId);
    if (found) return found;
    await recordPost(store, conversationId, {
      request,
      disposition: 'steered',
      turnId: running.id,
      steer: { id: updateId, afterSequence },
    });
    return null;
  });
  if (known) return resumePost(context, known);
  return { requestId: request.requestId, messageId: null, turnId: running.id, disposition: 'steered' };
}

/** Cancels every turn of the lane (retain) and names the turn that answers both messages. */
async function interruptPost(post: Post, lane: readonly TurnRecord[]): Promise<PostReceipt | 'changed'> {
  const { context, request } = post;
  const targets = lane.map((turn) => turn.id);
  await authorizeInterrupt(context.runtime, targets, request, post.verified);
  const written = await writeUnderLock(post, 'interrupted', { cancelled: targets });
  if (written === 'changed') return written;
  if ('known' in written) return resumePost(context, written.known);
  await cancelOnBehalf(context.runtime, context.temporal, targets, request, post.verified);
  const turnId = await nextTurnAfter(context, post.conversationId, written.message, targets);
  return { requestId: request.requestId, messageId: written.message.id, turnId, disposition: 'interrupted' };
}

/**
 * Once the cancelled turns ended, the lane's wake-up builds the turn that sees the message
 * (here or in the lane's own step, whichever comes first) and it is started. Null when they
 * have not ended in time: the lane builds it when they do, and `inputStatus` names it.
 */
async function nextTurnAfter(
  context: RepairContext,
  conversationId: string,
  message: MessageRecord,
  cancelled: readonly string[],
): Promise<string | null> {
  const store = context.runtime.store;
  const until = Date.now() + INTERRUPT_WAIT_MS;
  for (let wait = 25; ; wait = Math.min(wait * 2, 250)) {
    const turns = await Promise.all(cancelled.map((id) => store.loadTurn(id)));
    if (turns.every((turn) => TERMINAL_TURN_STATUSES.includes(turn.status))) break;
    if (Date.now() > until) return null;
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  await store.atomic(conversationId, () => wakeConversation(context.runtime, store, conversationId));
  const next = await answeringTurn(store, conversationId, message.sequence);
  if (next && next.status === 'pending') await startOrNudgeTurn(context, next);
  return next?.id ?? null;
}

/**
 * A post already recorded (the same request id again, or this activity retried): its receipt,
 * after finishing what a crash may have cut short: the started turn's workflow, the next turn
 * of an interrupting post.
 */
async function resumePost(context: RepairContext, delivery: DeliveryRecord): Promise<PostReceipt> {
  const store = context.runtime.store;
  const status = await receiptOf(store, delivery);
  if (status.disposition === 'started' && status.turnId && status.turnStatus === 'pending')
    await startOrNudgeTurn(context, await store.loadTurn(status.turnId));
  if (status.disposition === 'interrupted' && status.turnId === null && status.messageId) {
    const cancelled = delivery.payload['cancelled'];
    const ids = Array.isArray(cancelled)
      ? cancelled.filter((id): id is string => typeof id === 'string')
      : [];
    const turnId = await nextTurnAfter(
      context,
      delivery.destinationConversationId,
      await store.loadMessage(status.messageId),
      ids,
    );
    return { ...receiptOnly(status), turnId };
  }
  return receiptOnly(status);
}
