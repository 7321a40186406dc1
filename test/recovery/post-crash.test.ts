/**
 * Round-4 audit #8b with a real crash: the worker process that runs the lane's `acceptPost`
 * SIGKILLs itself right after an interrupting post's row committed, before its cancel was sent
 * (test/fixtures/fault-agents.ts, `post-recorded`). A replacement worker process retries the
 * post from its row: the running turn is cancelled and the next turn answers; the post never
 * degrades to "queued" while its receipt says "interrupted".
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import type { FaultWorker } from '../helpers/fault.js';
import { faultCaseSetup, logLines, spawnFaultWorker, waitUntil, withTimeout } from '../helpers/fault.js';
import { requireTemporal } from '../helpers/temporal.js';
import { temporalConnections } from '../helpers/turnkit.js';

const temporalUp = await requireTemporal();

describe.skipIf(!temporalUp)('audit: #8 a post’s crash window with a killed worker process', () => {
  let dir: string;
  let store: Store;
  const workers: FaultWorker[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'turnkit-post-crash-'));
    store = await openStore(join(dir, 'turnkit.sqlite'));
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await store?.close();
  });

  it('audit: #8b FI post-recorded: killed after an interrupting post’s row committed and before its cancel, the replacement cancels the turn and names the next one', async () => {
    const { log, marker, taskQueue, client } = faultCaseSetup({
      dir,
      name: 'post-recorded',
      store,
      temporal: (await temporalConnections()).client,
      turnSettings: { workflowTaskTimeout: '2 seconds' },
    });
    const env = {
      TURNKIT_TEST_DATABASE_URL: join(dir, 'turnkit.sqlite'),
      TURNKIT_TEST_LOG: log,
      TURNKIT_TEST_TASK_QUEUE: taskQueue,
    };
    const first = spawnFaultWorker({
      ...env,
      TURNKIT_TEST_FLAVOR: 'first',
      TURNKIT_FAULT_AT: 'post-recorded',
      TURNKIT_FAULT_MODE: 'kill',
      TURNKIT_FAULT_MARKER: marker,
    });
    const replacement = spawnFaultWorker({ ...env, TURNKIT_TEST_FLAVOR: 'replacement' }, { hold: true });
    workers.push(first, replacement);
    await first.ready;

    const conversation = await client.conversation('holder');
    const started = await conversation.post('hold a slot');
    await waitUntil('the hold tool to run', async () =>
      (await store.listToolExecutions({ turnIds: [started.turnId!] })).some(
        (e) => e.toolName === 'hold' && e.status === 'running',
      ),
    );
    const posting = conversation.post('stop, take this instead', {
      requestId: 'fi-interrupt',
      policy: 'interrupt',
    });
    await waitUntil('the post-recorded fault', () => existsSync(marker) || !first.alive());
    expect((await first.exited).signal, first.output()).toBe('SIGKILL');
    // The row is written, the cancel was never sent.
    expect(await conversation.inputStatus('fi-interrupt')).toMatchObject({ disposition: 'interrupted' });
    expect((await store.loadTurn(started.turnId!)).status).toBe('running');

    await replacement.ready;
    replacement.go();
    const receipt = await withTimeout(posting, 120_000, () =>
      [`log:\n${logLines(log).join('\n')}`, `replacement:\n${replacement.output()}`].join('\n'),
    );
    expect(receipt.disposition).toBe('interrupted');
    expect(receipt.turnId).toMatch(/^turn_/);
    expect(receipt.turnId).not.toBe(started.turnId);
    expect((await store.loadTurn(started.turnId!)).status).toBe('cancelled');
    const messages = await store.listMessages(conversation.id);
    expect(messages.filter((m) => m.metadata['request_id'] === 'fi-interrupt')).toHaveLength(1);
    // The next turn holds too (the agent always does): cancelled to end the case.
    await (await client.handle(receipt.turnId!)).cancel();
    await Promise.all([first.stop(), replacement.stop()]);
  }, 240_000);
});
