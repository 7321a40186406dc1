/**
 * The operations process of docs/deployment.md: a client (no worker) and the console behind
 * authentication, on PORT (default 8080). Same TURNKIT_DATABASE_URL, Temporal settings and
 * TURNKIT_SIGNING_KEY as the workers.
 */
import { TurnKitClient } from '../../src/index.js';
import { openStore } from '../../src/store/index.js';
import { agents } from './agents.js';
import { createOpsServer, operatorsFrom } from './console-server.js';

const operators = operatorsFrom(process.env['TURNKIT_CONSOLE_OPERATORS']);
const store = await openStore();
const signingKey = process.env['TURNKIT_SIGNING_KEY'];
const client = await TurnKitClient.connect({ store, agents, ...(signingKey ? { signingKey } : {}) });
const server = createOpsServer({ client, operators, temporalUiUrl: process.env['TEMPORAL_UI_URL'] });
server.listen(Number(process.env['PORT'] ?? 8080), () => console.log('ops: console at /ops/turnkit/'));
process.once('SIGTERM', () => server.close(() => void client.close().then(() => store.close())));
