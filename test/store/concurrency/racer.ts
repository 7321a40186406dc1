/**
 * One side of the cross-process races: a separate OS process with its own store connection.
 * It opens the store (argv: url, schema), prints `{"ready":true}`, then reads one JSON
 * command per stdin line — `{id, op, args, startAt}` — waits until the wall clock reaches
 * `startAt` (the start barrier shared with the other racer), runs the operation and prints
 * `{id, won, …}`.
 */
import { createInterface } from 'node:readline';
import { deliver } from '../../../src/store/maintenance.js';
import { PostgresStore } from '../../../src/store/postgres-store.js';
import { SqliteStore } from '../../../src/store/sqlite-store.js';
import type { Store } from '../../../src/store/types.js';
import { addWaits } from '../../../src/store/wait-graph.js';

const [url, schema] = process.argv.slice(2) as [string, string];
const store: Store = url.startsWith('postgres')
  ? await PostgresStore.open(url, { schema })
  : await SqliteStore.open(url);

interface Command {
  id: number;
  op: string;
  args: string[];
  startAt: number;
}

async function barrier(startAt: number): Promise<void> {
  const wait = startAt - Date.now() - 3;
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  while (Date.now() < startAt) {
    // spin the last few milliseconds so both racers start within one
  }
}

async function perform(op: string, args: string[]): Promise<Record<string, unknown>> {
  switch (op) {
    case 'claim': {
      const [turnId, token] = args as [string, string];
      return { won: (await store.claimTurn(turnId, { claimToken: token })) !== null, token };
    }
    case 'lane': {
      // The lane check and the claim in one transaction on the conversation.
      const [conversationId, turnId, token] = args as [string, string, string];
      const claimed = await store.atomic(conversationId, async () =>
        (await store.busyConversation(conversationId, { includePending: false }))
          ? null
          : store.claimTurn(turnId, { claimToken: token }),
      );
      return { won: claimed !== null, token };
    }
    case 'deliver': {
      const outcome = await deliver(store, args[0]!, {
        onDelivered: async ({ delivery }) => {
          await store.createTurn({
            conversationId: delivery.destinationConversationId,
            agentName: 'woken',
            submittedAt: new Date().toISOString(),
          });
        },
      });
      return { won: outcome.delivered, messageId: outcome.message?.id ?? null };
    }
    case 'wait':
      await addWaits(store, { turnId: args[0]!, targetTurnIds: [args[1]!] });
      return { won: true };
    case 'append': {
      const [conversationId, count] = args as [string, string];
      const sequences: number[] = [];
      for (let i = 0; i < Number(count); i++) {
        const message = await store.appendMessage({
          conversationId,
          role: 'user',
          content: `${process.pid}:${i}`,
        });
        sequences.push(message.sequence);
      }
      return { won: true, sequences };
    }
    case 'events': {
      const [turnId, conversationId, count] = args as [string, string, string];
      const sequences: number[] = [];
      for (let i = 0; i < Number(count); i++) {
        sequences.push(
          (await store.appendEvent({ turnId, conversationId, type: `e${process.pid}` })).sequence,
        );
      }
      return { won: true, sequences };
    }
    default:
      throw new Error(`unknown operation ${op}`);
  }
}

console.log(JSON.stringify({ ready: true }));
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line) as Command;
  await barrier(command.startAt);
  let outcome: Record<string, unknown>;
  try {
    outcome = await perform(command.op, command.args);
  } catch (error) {
    outcome = {
      won: false,
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    };
  }
  console.log(JSON.stringify({ id: command.id, ...outcome }));
}
await store.close();
