/** For the benchmarks on PostgreSQL: a connection of its own that samples the server until stopped. */
import pg from 'pg';

/**
 * Calls `sample` with a dedicated client every `everyMs` until `stop()`; `stop()` resolves once
 * the last sample ran and the client closed.
 */
export function samplePostgres(
  url: string,
  everyMs: number,
  sample: (client: pg.Client) => Promise<void>,
): { stop(): Promise<void> } {
  const client = new pg.Client({ connectionString: url });
  let stopped = false;
  const loop = (async () => {
    await client.connect();
    while (!stopped) {
      await sample(client);
      await new Promise((r) => setTimeout(r, everyMs));
    }
    await client.end();
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
