/**
 * Issue 28, finding 1: one use per signature, kept in the turn's state in the store — on real
 * SQLite and PostgreSQL stores, without Temporal (the workflow paths are in
 * security-principals.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { signPrincipal } from '../../src/engine/controls/principal-signature.js';
import type { Verification } from '../../src/engine/controls/principal-signature.js';
import { Runtime } from '../../src/engine/runtime.js';
import { verifyOnce } from '../../src/engine/controls/signature-use.js';
import { openStore } from '../../src/store/index.js';
import type { Store, TurnRecord } from '../../src/store/types.js';
import { describePostgres, openPgTestStore } from '../helpers/postgres.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const KEY = 'signature-use-test-key-0123456789';
const agent = defineAgent({ name: 'quiet' });

function cases(name: string, open: () => Promise<{ store: Store; close(): Promise<void> }>) {
  describe(name, () => {
    let store: Store;
    let close: () => Promise<void>;
    let runtime: Runtime;
    let turn: TurnRecord;
    beforeAll(async () => {
      ({ store, close } = await open());
      runtime = new Runtime({ store, agents: new AgentRegistry([agent]), signingKey: KEY });
      const conversation = await store.createConversation({ agentName: agent.name });
      turn = await store.createTurn({ conversationId: conversation.id, agentName: agent.name });
    });
    afterAll(async () => close?.());

    const request = () => ({
      turnId: turn.id,
      action: 'steer',
      principal: 'cfo',
      params: { text: 'check the amounts' },
    });
    const allow = (seen: Verification[]) => async (verification: Verification) => {
      seen.push(verification);
    };

    it(`security: on ${name}, a signature sent twice at once by two requests verifies for one of them only; the other reaches the policy as replayed`, async () => {
      const signature = signPrincipal(KEY, request());
      const seen: Verification[] = [];
      const results = await Promise.all(
        ['run-1/1', 'run-1/2'].map((use) => verifyOnce(runtime, request(), signature, use, allow(seen))),
      );
      expect(results.map((r) => r.verified).sort()).toEqual([false, true]);
      expect(results.find((r) => !r.verified)).toEqual({ verified: false, reason: 'replayed' });
      const used = (await store.loadTurn(turn.id)).options['state'] as Record<string, unknown>;
      expect(Object.keys(used['signatures_used'] as object)).toEqual([signature.mac]);
    });

    it(`security: on ${name}, the authorizing step's own retry is not a replay; a check that does not use the signature records nothing`, async () => {
      const signature = signPrincipal(KEY, request());
      const seen: Verification[] = [];
      expect(await verifyOnce(runtime, request(), signature, undefined, allow(seen))).toEqual({
        verified: true,
      });
      expect(await verifyOnce(runtime, request(), signature, 'run-2/7', allow(seen))).toEqual({
        verified: true,
      });
      expect(await verifyOnce(runtime, request(), signature, 'run-2/7', allow(seen))).toEqual({
        verified: true,
      });
      expect(await verifyOnce(runtime, request(), signature, 'run-3/7', allow(seen))).toEqual({
        verified: false,
        reason: 'replayed',
      });
      // The same words, signed for other parameters, do not verify.
      expect(
        await verifyOnce(
          runtime,
          { ...request(), params: { text: 'wire it all' } },
          signature,
          'run-4/1',
          allow(seen),
        ),
      ).toEqual({ verified: false, reason: 'bad_signature' });
    });
  });
}

cases('SQLite', async () => {
  const store = await openStore(tempSqliteUrl());
  return { store, close: () => store.close() };
});

describePostgres('PostgreSQL', () => {
  cases('PostgreSQL', async () => {
    const { store, drop } = await openPgTestStore();
    return { store, close: drop };
  });
});
