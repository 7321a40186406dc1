/**
 * A person's controls of a running turn, on the activity side: authorizing one (the signed
 * principal verified, then the policy), pausing and resuming at a control boundary, and
 * applying steering (spec Appendix A, TurnKit 0.7 turn controls). The workflow decides when;
 * these steps write the store.
 */
import { AuthorizationError, LostClaim } from '../../errors.js';
import { nowIso } from '../../store/records.js';
import type { Json, JsonObject, MessageRecord } from '../../store/types.js';
import { appendAfterResults } from '../tools/after-results.js';
import { retakeClaim } from '../claim/claim.js';
import type { ControlRequest } from '../../contract/control-request.js';
import { signedParams } from '../../contract/control-request.js';
import { turnDigest } from '../step/digest.js';
import type { Runtime } from '../runtime.js';
import { verifyOnce } from './signature-use.js';
import { appendToolResultOnce } from '../end/terminal-write.js';
import { executionsOfCalls, findToolExecution } from '../tools/execution-lookup.js';
import { toolCallParts, turnState, updateState } from '../step/turn-state.js';
import type { OwnerInput, TurnDigest } from '../../contract/digests.js';
import type { ControlVerdict, Steer } from '../../contract/activities.js';

/** The event each authorized control leaves in the turn's log. */
const CONTROL_EVENTS = {
  approve: 'approval.approved',
  reject: 'approval.rejected',
  pause: 'turn.pause_requested',
  resume: 'turn.resume_requested',
  steer: 'turn.steer_requested',
} as const;

export const SUPERSEDED = 'superseded by human steering';

/**
 * Verifies the signature of the whole request (each signature good once: signature-use.ts),
 * then asks the policy (action `approve`, `reject`, `pause`, `resume` or `steer`, with
 * `verified`; for a decision also the call's `tool_name` and `arguments`). A denial is
 * recorded as `control.denied` and reported; an allowed control is recorded as its own event.
 * Runs as a scheduled activity inside the Update's handler: the key and the policy never
 * enter workflow code or history. `use` names this authorization (its retries share it).
 */
export async function authorizeControl(
  runtime: Runtime,
  input: { turnId: string; request: ControlRequest; use?: string },
): Promise<ControlVerdict> {
  const { request } = input;
  const turn = await runtime.store.loadTurn(input.turnId);
  const call = request.toolCallId
    ? await findToolExecution(runtime.store, turn.id, request.toolCallId)
    : undefined;
  const signed = { turnId: turn.id, action: request.action, principal: request.principal };
  let details: JsonObject = {};
  try {
    await verifyOnce(
      runtime,
      { ...signed, params: signedParams(request) },
      request.signature,
      input.use,
      async (verification) => {
        details = {
          verified: verification.verified,
          ...(verification.reason ? { verification: verification.reason } : {}),
          ...(request.toolCallId ? { tool_call_id: request.toolCallId } : {}),
        };
        await runtime.authorize(request.action, request.principal, {
          turn: turn.id,
          ...details,
          ...(call ? { tool_name: call.toolName, arguments: call.arguments } : {}),
        });
      },
    );
  } catch (error) {
    if (!(error instanceof AuthorizationError)) throw error;
    await runtime.emit(turn, 'control.denied', { action: request.action, error: error.message, ...details });
    return { allowed: false, verified: details['verified'] === true, reason: error.message };
  }
  const payload: JsonObject = { principal: request.principal, ...details };
  if (request.note !== undefined) payload['note'] = request.note;
  if (request.reason !== undefined) payload['reason'] = request.reason;
  if (request.text !== undefined) payload['chars'] = request.text.length;
  await runtime.emit(turn, CONTROL_EVENTS[request.action], payload);
  return { allowed: true, verified: details['verified'] === true };
}

/**
 * Stops the turn at a control boundary: `paused`, claim cleared, no worker held. Run again
 * after its worker died past the commit, it finds the turn paused and has nothing to do.
 */
export async function pauseTurn(runtime: Runtime, input: OwnerInput): Promise<void> {
  const current = await runtime.store.loadTurn(input.turnId);
  if (current.status === 'paused' && current.claimToken === null) return;
  const { store, turn } = await runtime.ownTurn(input, current);
  await store.atomic(null, () => store.updateTurn(input.turnId, { status: 'paused', claimToken: null }));
  await runtime.emit(turn, 'turn.paused', {});
}

/** Takes the paused turn back; LostClaim when it was cancelled (or timed out) meanwhile. */
export async function resumePausedTurn(runtime: Runtime, input: OwnerInput): Promise<TurnDigest> {
  const resumed = await retakeClaim(runtime, input, ['paused']);
  if (!resumed) {
    const { status } = await runtime.store.loadTurn(input.turnId);
    throw new LostClaim(`turn ${input.turnId} is ${status}: it can no longer resume`);
  }
  await runtime.emit(resumed, 'turn.resumed', {});
  return turnDigest(runtime.agents.resolve(resumed.agentName), resumed);
}

/**
 * Applies steering at a control boundary, in one transaction: in the tools phase every call
 * gets its one result in call order (a finished call its own; one not started, or awaiting
 * its approval, "superseded by human steering", cancelled), then each person's message is
 * appended and the turn goes back to the model. Before a model call it only appends; before
 * the output step the candidate is dropped and the model answers again.
 */
export async function steerTurn(
  runtime: Runtime,
  input: OwnerInput & { steers: Steer[] },
): Promise<TurnDigest> {
  const { store, turn, agent } = await runtime.ownTurn(input);
  const events: [string, JsonObject][] = [];
  const updated = await store.atomic(null, async () => {
    const fresh = await store.loadTurn(turn.id);
    const state = turnState(fresh);
    const applied = new Set(state.steers_applied ?? []);
    const steers = input.steers.filter((steer) => !applied.has(steer.id));
    if (steers.length === 0) return fresh;
    const written: MessageRecord[] = [];
    if (state.phase === 'tools') {
      const calls = toolCallParts(state.parts);
      const executions = await executionsOfCalls(store, turn.id, calls);
      for (const call of calls) {
        let row = executions.find((execution) => execution.toolCallId === call.id);
        if (
          row &&
          row.status !== 'pending' &&
          row.status !== 'awaiting_approval' &&
          row.status !== 'running'
        ) {
          const payload = (row.result ?? row.error) as Json;
          const error = row.status !== 'completed' && row.status !== 'cancelled';
          const message = await appendToolResultOnce(store, fresh, call, row.id, payload, error);
          if (message) written.push(message);
          continue;
        }
        const payload = { skipped: true, message: SUPERSEDED };
        row ??= await store.createToolExecution({
          turnId: turn.id,
          toolCallId: call.id,
          toolName: call.name,
          arguments: call.arguments,
          status: 'pending',
        });
        const closed = await store.claimToolExecution(row.id, {
          from: ['pending', 'awaiting_approval'],
          to: 'cancelled',
          result: payload,
          completedAt: nowIso(),
        });
        // A running row cannot be here (every call before a boundary returned); keep it open.
        if (!closed) continue;
        const message = await appendToolResultOnce(store, fresh, call, row.id, payload, false);
        if (message) written.push(message);
        events.push(['tool_call.superseded', { id: call.id, name: call.name }]);
      }
      written.push(...(await appendAfterResults(store, fresh)));
    }
    for (const steer of steers) {
      written.push(
        await store.appendMessage({
          conversationId: fresh.conversationId,
          turnId: fresh.id,
          role: 'user',
          kind: 'text',
          content: steer.text,
          metadata: { steered_by: steer.principal, steer_id: steer.id },
        }),
      );
    }
    for (const message of written)
      events.push(['message.created', { message_id: message.id, role: message.role, kind: message.kind }]);
    events.push(['turn.steered', { steers: steers.length }]);
    return updateState(store, turn.id, {
      steers_applied: [...applied, ...steers.map((steer) => steer.id)],
      phase: 'model',
      parts: null,
      candidate: null,
      output_data: null,
      terminal_tool_name: null,
    });
  });
  await runtime.emitAll(updated, events);
  return turnDigest(agent, updated);
}
