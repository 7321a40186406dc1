/**
 * One use per signature: a verified signature is recorded in its turn's state in the store
 * (`signatures_used`, by MAC, until it expires), so the same signed request sent again — read
 * from the turn's history, or sent to a later run of the turn after a continue-as-new, where
 * Temporal's de-duplication of Update ids no longer reaches — is no longer `verified`.
 */
import type { JsonObject, Store } from '../../store/types.js';
import { rootConversationId } from '../../store/tree.js';
import type { PrincipalSignature } from '../../contract/control-request.js';
import type { SignedRequest, Verification } from './principal-signature.js';
import { verifyPrincipal } from './principal-signature.js';
import type { Runtime } from '../runtime.js';
import type { TurnState } from '../step/turn-state.js';
import { turnState } from '../step/turn-state.js';

function usedBy(state: TurnState['signatures_used'], mac: string): string | null {
  return state?.[mac]?.use ?? null;
}

/** Records the use under the root lock; false when another step used the signature first. */
async function consume(store: Store, turnId: string, signature: PrincipalSignature, use: string) {
  const turn = await store.loadTurn(turnId);
  return store.atomic(await rootConversationId(store, turn), async () => {
    const fresh = await store.loadTurn(turnId);
    const state = turnState(fresh);
    const by = usedBy(state.signatures_used, signature.mac);
    if (by !== null) return by === use;
    const now = Date.now();
    // Expired signatures no longer verify: they need not be remembered.
    const kept = Object.entries(state.signatures_used ?? {}).filter(
      ([, entry]) => Date.parse(entry.expires_at) > now,
    );
    const used = { ...Object.fromEntries(kept), [signature.mac]: { expires_at: signature.expires_at, use } };
    await store.updateTurn(turnId, {
      options: { ...fresh.options, state: { ...state, signatures_used: used } as JsonObject },
    });
    return true;
  });
}

/**
 * Verifies the signature of `request`, then hands the verification to `authorize` (the policy;
 * it throws to deny), outside any transaction. A verified signature already used by another
 * step reaches the policy as `verified: false, verification: 'replayed'`. With `use`, an
 * allowed verified request records its signature; a race lost to another use of the same
 * signature asks the policy again, as a replay. Without `use` (a client's check before it
 * sends), nothing is recorded.
 */
export async function verifyOnce(
  runtime: Runtime,
  request: SignedRequest,
  signature: PrincipalSignature | null,
  use: string | undefined,
  authorize: (verification: Verification) => Promise<void>,
): Promise<Verification> {
  let verification = verifyPrincipal(runtime.signingKey, request, signature);
  for (;;) {
    if (verification.verified && signature) {
      const by = usedBy(
        turnState(await runtime.store.loadTurn(request.turnId)).signatures_used,
        signature.mac,
      );
      if (by !== null && by !== use) verification = { verified: false, reason: 'replayed' };
    }
    await authorize(verification);
    if (!verification.verified || !signature || use === undefined) return verification;
    if (await consume(runtime.store, request.turnId, signature, use)) return verification;
    verification = { verified: false, reason: 'replayed' };
  }
}
