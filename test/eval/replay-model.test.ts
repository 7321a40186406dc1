/**
 * `ReplayModel` picks its answer from the step the store recorded, not from a counter in memory
 * (issue 43, audit #16), on the real dev server and a real SQLite store: a model step whose
 * answer failed to persist (a retryable StoreError on the assistant message) is run again in
 * the same attempt, and gets the same recorded answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/errors.js';
import { ReplayModel } from '../../src/models/replay-model.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { requireTemporal } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit, tempSqliteUrl } from '../helpers/turnkit.js';
import { agents, model, support, toolRuns } from '../fixtures/eval-agents.js';

/** The store, failing the first append of an assistant message with a retryable StoreError. */
function failingFirstAnswer(store: Store): { store: Store; failed: () => number } {
  let failed = 0;
  const wrapped = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (property !== 'appendMessage')
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      return async (...args: Parameters<Store['appendMessage']>) => {
        if (args[0].role === 'assistant' && failed === 0) {
          failed += 1;
          throw new StoreError('the database is restarting', { retryable: true });
        }
        return target.appendMessage(...args);
      };
    },
  });
  return { store: wrapped, failed: () => failed };
}

describe.skipIf(!(await requireTemporal()))('ReplayModel', () => {
  let store: Store;
  let recorder: TestKit;

  beforeAll(async () => {
    store = await openStore(tempSqliteUrl());
    recorder = await startKit({ agents, model, store });
  });
  afterAll(async () => {
    await recorder?.stop();
    await store?.close();
  });

  it('audit: #16 a model step re-run after its answer failed to persist gets the same recorded answer, not the next one', async () => {
    const source = await (await recorder.client.run(support, 'Where is order 7?')).result();
    expect(source.status).toBe('completed');
    const { store: failing, failed } = failingFirstAnswer(store);
    const replay = new ReplayModel({ store: failing, turnId: source.id });
    const kit = await startKit({ agents, model: replay, store: failing });
    try {
      const before = toolRuns.count;
      const turn = await (await kit.client.run(support, 'Where is order 7?')).result();
      expect(failed()).toBe(1);
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe(source.outputText);
      // The first answer (the lookup) was asked twice and given twice; then the second.
      expect(replay.calls.map((call) => call.index)).toEqual([0, 0, 1]);
      expect(toolRuns.count).toBe(before + 1);
      const answers = (await store.listMessages(turn.conversationId, { turnId: turn.id }))
        .filter((message) => message.role === 'assistant')
        .map((message) => message.content.map((part) => part.type));
      expect(answers).toEqual([['tool_call'], ['text']]);
    } finally {
      await kit.stop();
    }
  }, 60_000);
});
