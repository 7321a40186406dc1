/** Small waiting aids for integration tests: poll a condition, and a gate the test opens. */

/** Polls `predicate` every 50 ms until it holds; throws after `timeoutMs`. */
export async function waitUntil(predicate: () => Promise<boolean>, timeoutMs = 45_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A promise the test resolves by calling `open()`: holds a tool or a model call. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
