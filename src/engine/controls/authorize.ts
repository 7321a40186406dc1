/**
 * Authorizing a person's control of a running turn (spec Appendix A, TurnKit 0.7 turn
 * controls): the signed principal verified, then the policy. The workflow decides when.
 */
import { AuthorizationError } from '../../errors.js';
import type { JsonObject, TurnRecord } from '../../store/types.js';
import { TERMINAL_TURN_STATUSES } from '../../store/types.js';
import { rootConversationId } from '../../store/tree.js';
import type { ControlRequest } from '../../contract/control-request.js';
import { signedParams } from '../../contract/control-request.js';
import type { ControlVerdict } from '../../contract/activities.js';
import type { Runtime } from '../runtime.js';
import { findToolExecution } from '../step/execution-lookup.js';
import { principalOf, turnState } from '../step/turn-state.js';
import { verifyOnce } from './signature-use.js';

/** The event each authorized control leaves in the turn's log. */
const CONTROL_EVENTS = {
  approve: 'approval.approved',
  reject: 'approval.rejected',
  pause: 'turn.pause_requested',
  resume: 'turn.resume_requested',
  steer: 'turn.steer_requested',
} as const;

/**
 * Verifies the signature of the whole request (each signature good once: signature-use.ts),
 * then asks the policy (action `approve`, `reject`, `pause`, `resume` or `steer`, with the
 * `turn`, its `conversation`, its `owner` (the principal the turn runs for) and `verified`;
 * for a decision also the call's `tool_name` and `arguments`). A denial is
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
  // A pause or steering is counted on the row before it is authorized (a step finishing the
  // turn meanwhile leaves the output to the workflow), and refused once the turn is finished.
  const counted =
    request.action === 'pause' || request.action === 'steer' ? await countBoundaryControl(runtime, turn) : {};
  if (counted === null)
    return { allowed: false, verified: false, reason: `turn ${turn.id} is finished`, finished: true };
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
          conversation: turn.conversationId,
          owner: principalOf(turn),
          ...details,
          ...(call ? { tool_name: call.toolName, arguments: call.arguments } : {}),
        });
      },
    );
  } catch (error) {
    if (!(error instanceof AuthorizationError)) throw error;
    await runtime.emit(turn, 'control.denied', { action: request.action, error: error.message, ...details });
    return { allowed: false, verified: details['verified'] === true, reason: error.message, ...counted };
  }
  const payload: JsonObject = { principal: request.principal, ...details };
  if (request.note !== undefined) payload['note'] = request.note;
  if (request.reason !== undefined) payload['reason'] = request.reason;
  if (request.text !== undefined) payload['chars'] = request.text.length;
  await runtime.emit(turn, CONTROL_EVENTS[request.action], payload);
  return { allowed: true, verified: details['verified'] === true, ...counted };
}

/**
 * Counts a pause or steering put to authorization on the turn's row, under the root lock
 * (decision 82): a step that would finish the turn sees in its terminal write that one came
 * while it ran, and leaves the output to the workflow's boundary. Null when the turn is
 * finished already (the step's write came first): too late.
 */
async function countBoundaryControl(
  runtime: Runtime,
  initial: TurnRecord,
): Promise<{ boundaryControls: number } | null> {
  const store = runtime.store;
  return store.atomic(await rootConversationId(store, initial), async () => {
    const turn = await store.loadTurn(initial.id);
    if (TERMINAL_TURN_STATUSES.includes(turn.status)) return null;
    const state = turnState(turn);
    const boundaryControls = (state.boundary_controls ?? 0) + 1;
    await store.updateTurn(turn.id, {
      options: { ...turn.options, state: { ...state, boundary_controls: boundaryControls } as JsonObject },
    });
    return { boundaryControls };
  });
}
