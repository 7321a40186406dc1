import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CANCEL_INTERVAL_MS,
  HEARTBEAT_BUDGET_PER_SECOND,
  HeartbeatPacer,
  LIVENESS_INTERVAL_MS,
} from '../../src/activities/heartbeat.js';
import { defineAgent } from '../../src/agents/agent.js';
import { connectClient, temporalNamespace } from '../helpers/temporal.js';
import { startKit } from '../helpers/turnkit.js';

/** Starts `n` paced attempts that run until the returned function is called. */
function inFlight(pacer: HeartbeatPacer, n: number, beat: () => void = () => undefined) {
  const releases: (() => void)[] = [];
  const runs = Array.from({ length: n }, () =>
    pacer.run(beat, () => new Promise<void>((resolve) => releases.push(resolve))),
  );
  return async () => {
    for (const release of releases) release();
    await Promise.all(runs);
  };
}

describe('heartbeat pacing', () => {
  afterEach(() => vi.useRealTimers());

  it('without pushed cancels: every 100 ms for a few calls, a budget spread over many, never slower than 500 ms', async () => {
    const pacer = new HeartbeatPacer('heartbeat');
    const one = inFlight(pacer, 1);
    expect(pacer.interval()).toBe(CANCEL_INTERVAL_MS);
    const more = inFlight(pacer, 59);
    expect(pacer.interval()).toBe((60 * 1000) / HEARTBEAT_BUDGET_PER_SECOND);
    const many = inFlight(pacer, 1000);
    expect(pacer.interval()).toBe(LIVENESS_INTERVAL_MS);
    await Promise.all([one(), more(), many()]);
    expect(pacer.interval()).toBe(CANCEL_INTERVAL_MS);
  });

  it('with pushed cancels (worker commands): heartbeats only for liveness, every 500 ms', async () => {
    const pacer = new HeartbeatPacer('worker-command');
    const release = inFlight(pacer, 1);
    expect(pacer.interval()).toBe(LIVENESS_INTERVAL_MS);
    await release();
  });

  it('beats at the paced period while the attempt runs and never after it settled', async () => {
    vi.useFakeTimers();
    const pacer = new HeartbeatPacer('heartbeat');
    let beats = 0;
    const release = inFlight(pacer, 1, () => {
      beats += 1;
    });
    await vi.advanceTimersByTimeAsync(CANCEL_INTERVAL_MS * 5 + 10);
    expect(beats).toBe(5);
    expect(pacer.sent).toBe(5);
    await release();
    await vi.advanceTimersByTimeAsync(CANCEL_INTERVAL_MS * 5);
    expect(beats).toBe(5);
  });
});

describe('cancel delivery of a worker', () => {
  it("follows the namespace's worker-commands capability (the dev server pushes cancels)", async () => {
    const client = await connectClient();
    const described = await client.workflowService.describeNamespace({ namespace: temporalNamespace() });
    const kit = await startKit({ agents: [defineAgent({ name: 'idle' })] });
    try {
      expect(kit.worker.heartbeats.delivery).toBe(
        described.namespaceInfo?.capabilities?.workerCommands ? 'worker-command' : 'heartbeat',
      );
    } finally {
      await kit.stop();
    }
  });
});
