/**
 * One side of a cross-process race: opens the store, waits for the start barrier (a file),
 * does one operation and prints its outcome as JSON.
 */
import { existsSync } from 'node:fs';
import { deliver } from '../../../src/store/deliveries.js';
import { PostgresStore } from '../../../src/store/postgres-store.js';
import { SqliteStore } from '../../../src/store/sqlite-store.js';
import type { Store } from '../../../src/store/types.js';
import { addWaits } from '../../../src/store/wait-graph.js';

const [url, schema, operation, barrier, ...args] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  ...string[],
];
const store: Store = url.startsWith('postgres')
  ? await PostgresStore.open(url, { options: `-c search_path=${schema}` })
  : SqliteStore.open(url);

while (!existsSync(barrier)) await new Promise((r) => setTimeout(r, 2));

let outcome: unknown;
try {
  if (operation === 'claim') {
    const [turnId, token] = args as [string, string];
    outcome = { won: (await store.claimTurn(turnId, { claimToken: token })) !== null, token };
  } else if (operation === 'lane') {
    const [conversationId, turnId, token] = args as [string, string, string];
    const claimed = await store.atomic(conversationId, async () =>
      (await store.busyConversation(conversationId, { includePending: false }))
        ? null
        : store.claimTurn(turnId, { claimToken: token }),
    );
    outcome = { won: claimed !== null };
  } else if (operation === 'deliver') {
    outcome = { won: (await deliver(store, args[0]!)).delivered };
  } else if (operation === 'wait') {
    await addWaits(store, { turnId: args[0]!, targetTurnIds: [args[1]!] });
    outcome = { won: true };
  }
} catch (error) {
  outcome = { won: false, error: error instanceof Error ? error.message : String(error) };
}
console.log(JSON.stringify(outcome));
await store.close();
