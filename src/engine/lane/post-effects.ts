/**
 * What a post asks of the policy and of the running turn (decision 41): `post` authorized with
 * the caller's verified signature, and the steer or cancel the lane performs on the caller's
 * behalf. The caller signed the post (its conversation in the place of a turn); the worker,
 * which holds the same key, signs the steer or cancel for that caller only when the post's
 * own signature checked out, so the turn's policy sees `verified` exactly as the post had it.
 */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { PostPolicy, PostRequest } from '../../contract/post-request.js';
import { signedPostParams } from '../../contract/post-request.js';
import type { PrincipalSignature } from '../../contract/control-request.js';
import { ArgumentError, AuthorizationError } from '../../errors.js';
import type { Json } from '../../store/types.js';
import { cancelSignal, turnWorkflowId, UPDATES } from '../../workflows/contract.js';
import { signPrincipal, verifyPrincipal } from '../controls/principal-signature.js';
import type { Verification } from '../controls/principal-signature.js';
import { authorizeCancel } from '../end/cancel.js';
import type { Runtime } from '../runtime.js';

/**
 * Verifies the post's signature and asks the policy (action `post`). A post's signature is
 * not consumed: replaying it repeats the same request id, which returns the same receipt.
 */
export async function authorizePost(
  runtime: Runtime,
  conversationId: string,
  request: PostRequest,
  policy: PostPolicy,
): Promise<Verification> {
  const verification = verifyPrincipal(
    runtime.signingKey,
    {
      turnId: conversationId,
      action: 'post',
      principal: request.principal,
      params: signedPostParams(request),
    },
    request.signature,
  );
  await runtime.authorize('post', request.principal, {
    conversation: conversationId,
    request_id: request.requestId,
    policy,
    verified: verification.verified,
    ...(verification.reason ? { verification: verification.reason } : {}),
  });
  return verification;
}

/** The signature the worker gives a steer or cancel on the caller's behalf, when the post verified. */
function onBehalf(
  runtime: Runtime,
  verified: boolean,
  request: { turnId: string; action: string; principal: Json; params: Record<string, Json> },
): PrincipalSignature | null {
  return verified && runtime.signingKey !== undefined ? signPrincipal(runtime.signingKey, request) : null;
}

/**
 * Steers the running turn with the post's text: its `steer` Update, under an id of the post's
 * own, so a retried activity meets the first Update's outcome. `accepted`, or `refused` when the
 * turn cannot take it any more (past its output boundary, finished, gone): then the post queues.
 * A denial by the policy is the post's AuthorizationError.
 */
export async function steerOnBehalf(
  runtime: Runtime,
  temporal: Client,
  input: { turnId: string; updateId: string; request: PostRequest; verified: boolean },
): Promise<'accepted' | 'refused'> {
  const { request } = input;
  const signature = onBehalf(runtime, input.verified, {
    turnId: input.turnId,
    action: 'steer',
    principal: request.principal,
    params: { text: request.text },
  });
  const payload = { text: request.text, principal: request.principal, ...(signature ? { signature } : {}) };
  try {
    await temporal.workflow
      .getHandle(turnWorkflowId(input.turnId))
      .executeUpdate(UPDATES.steer, { args: [payload], updateId: input.updateId });
    return 'accepted';
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return 'refused';
    if (!(error instanceof WorkflowUpdateFailedError)) {
      // A closed workflow, or one that does not know the Update (a run from before 0.4).
      if (/already completed|not found|unknown update|not registered/i.test(String(error))) return 'refused';
      throw error;
    }
    const cause = error.cause;
    if (cause instanceof ApplicationFailure && cause.type === 'AuthorizationError')
      throw new AuthorizationError(cause.message, { cause: error });
    if (cause instanceof ApplicationFailure && cause.type === 'ArgumentError')
      throw new ArgumentError(cause.message, { cause: error });
    return 'refused';
  }
}

/** The cancel (retain) of one turn the post interrupts, signed on the caller's behalf. */
function cancelRequest(runtime: Runtime, turnId: string, request: PostRequest, verified: boolean) {
  const signature = onBehalf(runtime, verified, {
    turnId,
    action: 'cancel',
    principal: request.principal,
    params: { descendants: 'retain' },
  });
  return {
    descendants: 'retain' as const,
    principal: request.principal,
    ...(signature ? { signature } : {}),
  };
}

/**
 * Asks the policy about each cancel before anything is written (the cancel itself is a
 * signal, which answers nothing): one denial and the post is an AuthorizationError.
 */
export async function authorizeInterrupt(
  runtime: Runtime,
  turnIds: readonly string[],
  request: PostRequest,
  verified: boolean,
): Promise<void> {
  for (const turnId of turnIds) {
    const verdict = await authorizeCancel(runtime, {
      turnId,
      ...cancelRequest(runtime, turnId, request, verified),
    });
    if (!verdict.allowed)
      throw new AuthorizationError(verdict.reason ?? `not authorized to cancel ${turnId}`);
  }
}

/** Sends each turn its cancel signal (retain); a turn whose workflow is gone is the lane's to repair. */
export async function cancelOnBehalf(
  runtime: Runtime,
  temporal: Client,
  turnIds: readonly string[],
  request: PostRequest,
  verified: boolean,
): Promise<void> {
  for (const turnId of turnIds) {
    try {
      await temporal.workflow
        .getHandle(turnWorkflowId(turnId))
        .signal(cancelSignal, cancelRequest(runtime, turnId, request, verified));
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
    }
  }
}
