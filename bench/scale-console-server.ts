/**
 * The console of `npm run bench:scale`, in a process of its own so its RSS is the handler's:
 * `createConsoleHandler` over the store at SCALE_STORE_URL, on a loopback port it sends its parent
 * over IPC.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { AgentRegistry } from '../src/agents/registry.js';
import { TurnKitClient } from '../src/client/turnkit-client.js';
import { createConsoleHandler } from '../src/console/handler.js';
import { openStore } from '../src/store/index.js';

const store = await openStore(process.env['SCALE_STORE_URL']!);
const connection = await Connection.connect({ address: process.env['TEMPORAL_ADDRESS'] ?? '127.0.0.1:7233' });
const client = new TurnKitClient({
  store,
  agents: new AgentRegistry(),
  temporal: new Client({ connection }),
  taskQueue: 'turnkit-scale-bench',
});
const handler = createConsoleHandler({ client, logger: { error: () => undefined } });
const server = createServer((request, response) => void handler(request, response));
server.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
  console.log('listening');
});
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => void Promise.all([store.close(), connection.close()]).then(() => process.exit(0)));
});
