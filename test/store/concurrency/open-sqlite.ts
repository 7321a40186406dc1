/**
 * Child process for the SQLite file tests: waits for the start barrier (a file; `-` for
 * none), opens the store at the path, prints what the open applied, exits 0 — or prints the
 * error and exits 2.
 */
import { existsSync } from 'node:fs';
import { SqliteStore } from '../../../src/store/sqlite-store.js';

const [path, barrier] = process.argv.slice(2) as [string, string];
const dropTo = process.env['TURNKIT_TEST_DROP_TO'];
if (dropTo) {
  const [uid, gid] = dropTo.split(':').map(Number) as [number, number];
  process.setgid?.(gid);
  process.setuid?.(uid);
}
if (barrier !== '-') {
  const deadline = Date.now() + 30_000;
  while (!existsSync(barrier)) {
    if (Date.now() > deadline) throw new Error('the start barrier never opened');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
try {
  const store = await SqliteStore.open(path);
  await store.createConversation({ agentName: 'opener' });
  console.log(JSON.stringify({ applied: store.migrations.applied }));
  await store.close();
} catch (error) {
  console.log(JSON.stringify({ name: (error as Error).name, message: (error as Error).message }));
  process.exitCode = 2;
}
