/**
 * `conversation.post` on the lane's side (decision 41): the `acceptPost` activity behind the
 * lane's `post` Update. A post to an idle conversation writes its message and its turn and
 * starts the turn; to a busy one it follows the policy: `queue` (the message waits for the
 * lane's next turn), `steer` (the running turn's `steer` Update; queued when too late),
 * `interrupt` (the lane's turns cancelled, retain; the next turn sees both messages), `reject`
 * (ConversationBusyError, nothing written). One row per request id holds it all, written
 * before the steer or the cancels it decided are sent: a retry, or the same post sent again,
 * completes what is missing and returns the first receipt (post-resume.ts, decision 57).
 */
import type { PostPolicy, PostReceipt, PostRequest } from '../../contract/post-request.js';
import { postUpdateId } from '../../contract/post-request.js';
import { ConversationBusyError, InputError, StoreError } from '../../errors.js';
import { mediaPart } from '../../models/media.js';
import type { DeliveryRecord, MessageRecord, TurnRecord } from '../../store/types.js';
import { BUSY_TURN_STATUSES } from '../../store/types.js';
import type { RepairContext } from '../end/repair.js';
import { startOrNudgeTurn } from '../end/workflow-start.js';
import { buildTurn } from './build-turn.js';
import { authorizeInterrupt, authorizePost } from './post-effects.js';
import type { PostWrite } from './post-record.js';
import { appendPostMessage, findPost, recordPost } from './post-record.js';
import type { Post } from './post-resume.js';
import { completeSteer, interruptTurns, laneOf, resumePost } from './post-resume.js';

/** Looks at the lane before a post gives up (each one lost a race to a turn that started or ended). */
const MAX_LOOKS = 10;

/** A steered post's row, decided under the conversation's lock. */
type Recorded = { recorded: DeliveryRecord } | { known: DeliveryRecord } | 'changed';
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
  const policy: PostPolicy = request.policy ?? agent.postPolicy;
  // The policy is asked before anything is answered, a known request id included.
  const { verified } = await authorizePost(context.runtime, conversationId, request, policy);
  const post: Post = { context, conversationId, request, agent, verified };
  const known = await findPost(store, conversationId, request.requestId);
  if (known) return resumePost(post, known);
  // The lane may move between the look and the write: then the post is decided again.
  for (let looks = 0; ; looks++) {
    if (looks === MAX_LOOKS)
      throw new StoreError(`conversation ${conversationId} kept changing while a post was decided`, {
        retryable: true,
      });
    const lane = await laneOf(store, conversationId);
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
 * `started` needs the lane idle and the others busy, as they were decided, and an interrupting
 * post the very turns it was authorized to cancel: else `changed`, and the post looks again.
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
    if (extra.cancelled && !sameTurns(await laneOf(store, conversationId), extra.cancelled)) return 'changed';
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

const sameTurns = (lane: readonly TurnRecord[], ids: readonly string[]) =>
  lane.length === ids.length && lane.every((turn) => ids.includes(turn.id));

async function writePost(post: Post, disposition: 'started' | 'queued'): Promise<PostReceipt | 'changed'> {
  const written = await writeUnderLock(post, disposition);
  if (written === 'changed') return written;
  if ('known' in written) return resumePost(post, written.known);
  if (written.turn) await startOrNudgeTurn(post.context, written.turn);
  return {
    requestId: post.request.requestId,
    messageId: written.message.id,
    turnId: written.turn?.id ?? null,
    disposition,
  };
}

/**
 * The running turn takes the text at its next boundary; too late (or media), the post queues.
 * The post is recorded as steered before its Update is sent, so a retry finds it and completes
 * the steer (the same Update id) instead of posting the text a second time.
 */
async function steerPost(post: Post, lane: readonly TurnRecord[]): Promise<PostReceipt | 'changed'> {
  const { context, conversationId, request } = post;
  const store = context.runtime.store;
  const running = lane.find((turn) => BUSY_TURN_STATUSES.includes(turn.status));
  // A steer is text only (spec Appendix A): a post with images or files queues instead.
  if (!running || request.media.length > 0) return writePost(post, 'queued');
  const recorded = await store.atomic(conversationId, async (): Promise<Recorded> => {
    const found = await findPost(store, conversationId, request.requestId);
    if (found) return { known: found };
    if (!BUSY_TURN_STATUSES.includes((await store.loadTurn(running.id)).status)) return 'changed';
    const delivery = await recordPost(store, conversationId, {
      request,
      disposition: 'steered',
      turnId: running.id,
      steer: {
        id: postUpdateId(request.requestId),
        afterSequence: await store.latestMessageSequence(conversationId),
      },
    });
    return { recorded: delivery };
  });
  if (recorded === 'changed') return recorded;
  if ('known' in recorded) return resumePost(post, recorded.known);
  return completeSteer(post, recorded.recorded);
}

/** Cancels every turn of the lane (retain) and names the turn that answers both messages. */
async function interruptPost(post: Post, lane: readonly TurnRecord[]): Promise<PostReceipt | 'changed'> {
  const { context, request } = post;
  const targets = lane.map((turn) => turn.id);
  await authorizeInterrupt(context.runtime, targets, request, post.verified);
  const written = await writeUnderLock(post, 'interrupted', { cancelled: targets });
  if (written === 'changed') return written;
  if ('known' in written) return resumePost(post, written.known);
  const turnId = await interruptTurns(post, written.message, targets);
  return { requestId: request.requestId, messageId: written.message.id, turnId, disposition: 'interrupted' };
}
