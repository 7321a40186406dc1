/**
 * Review finding 15 (round 3): with 256 characters waiting, a failed stream write was retried
 * on a 0 ms timer, so a store that fails fast was hammered, with a warning per attempt, for the
 * rest of the model call. The writer now backs off (200 ms doubling to 5 s) and warns once per
 * outage. Fake timers make the clock exact: the test counts write attempts, it times nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeltaWriter } from '../../src/engine/model/live-stream.js';
import { StoreError } from '../../src/errors.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import type { Store } from '../../src/store/types.js';

afterEach(() => vi.useRealTimers());

describe('stream deltas while the store is down', () => {
  it('stream: a store that fails every write gets a handful of attempts with back-off and one warning, not a hot loop; the text is written once it is back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tk-deltas-'));
    const real = await SqliteStore.open(join(dir, 'store.sqlite'));
    try {
      const conversation = await real.createConversation({ agentName: 'a' });
      const turn = await real.createTurn({
        conversationId: conversation.id,
        agentName: 'a',
        status: 'running',
      });
      let down = true;
      let attempts = 0;
      const written: string[] = [];
      const store = new Proxy(real, {
        get(target, key, receiver) {
          if (key !== 'appendStreamParts') return Reflect.get(target, key, receiver) as unknown;
          return (parts: Parameters<Store['appendStreamParts']>[0]) => {
            attempts += 1;
            if (down) return Promise.reject(new StoreError('PostgreSQL is unreachable'));
            return target.appendStreamParts(parts).then((records) => {
              written.push(...records.map((record) => (record.payload as { text: string }).text));
              return records;
            });
          };
        },
      });
      const warnings: unknown[] = [];
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
      const writer = new DeltaWriter(store, turn, 'step_1', 1, { warn: (...args) => warnings.push(args) });
      writer.push({ type: 'text', text: 'x'.repeat(300) });
      await vi.advanceTimersByTimeAsync(10_000);
      // 0, 200, 600, 1400, 3000, 6200 ms: six attempts in ten seconds (a 0 ms loop makes thousands).
      expect(attempts).toBe(6);
      expect(warnings).toHaveLength(1);
      down = false;
      await vi.advanceTimersByTimeAsync(5_000);
      expect(attempts).toBe(7);
      await writer.close();
      expect(written.join('')).toBe('x'.repeat(300));
    } finally {
      await real.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
