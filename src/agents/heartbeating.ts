/** Heartbeats around a long external call made from inside a tool. */
import type { ToolContext } from './tool.js';

const HEARTBEAT_MS = 1_000;

/** Calls `fn`, heartbeating meanwhile (a slow generation must not look like a dead worker). */
export async function heartbeating<T>(context: ToolContext, fn: () => Promise<T>): Promise<T> {
  const beat = setInterval(() => context.heartbeat(), HEARTBEAT_MS);
  try {
    return await fn();
  } finally {
    clearInterval(beat);
  }
}
