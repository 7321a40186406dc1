/**
 * The wait before an engine-counted retry (a provider error, an output check or a replay-safe
 * tool that threw): 1 s, doubling to 30 s. Temporal's own backoff is not used for these,
 * because the engine counts the errors (decision 20).
 */
export function retryDelayMs(count: number): number {
  return Math.min(1_000 * 2 ** (Math.max(count, 1) - 1), 30_000);
}
