/**
 * Issue 28, finding 11: the stream handlers sent raw error messages to their HTTP clients, and a
 * store that is down names its host and port (`PostgreSQL at db.internal:5432 …`). A client
 * must get a generic text with an id, the operator the detail under that id; a client's own
 * mistakes (unknown run, refused, bad cursor) still say what they are.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { StreamableRun } from '../../src/client/ui-stream.js';
import { runSseHandler, toUIMessageChunks } from '../../src/client/ui-stream.js';
import { AuthorizationError, RecordNotFound, StoreError, StreamCursorError } from '../../src/errors.js';

const INTERNAL =
  'PostgreSQL at db.internal:5432 is unreachable (password authentication failed for user "app")';

/** A run whose store fails: at once, or after its first part. */
const failingRun = (error: Error, afterFirst = false): StreamableRun => ({
  turnId: 'turn_000000000000000000000001',
  stream: () => ({
    async *[Symbol.asyncIterator]() {
      if (afterFirst)
        yield {
          cursor: '1',
          type: 'status',
          turnId: 'turn_000000000000000000000001',
          status: 'running',
        } as never;
      throw error;
    },
  }),
});

function recordingLogger() {
  const lines: string[] = [];
  return {
    lines,
    error: (...args: unknown[]) =>
      void lines.push(args.map((a) => (a instanceof Error ? a.message : String(a))).join(' ')),
  };
}

async function get(resolveRun: () => StreamableRun, logger: ReturnType<typeof recordingLogger>) {
  const handler = runSseHandler(resolveRun, { logger });
  const server = createServer((request, response) => void handler(request, response));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    return { status: response.status, body: await response.text() };
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe('stream handlers: no internal error text to HTTP clients', () => {
  it('security: a store failing before or during an SSE stream gives the client a generic text with an id; the host name and user stay in the log under that id', async () => {
    for (const afterFirst of [false, true]) {
      const logger = recordingLogger();
      const { status, body } = await get(() => failingRun(new StoreError(INTERNAL), afterFirst), logger);
      expect(status).toBe(afterFirst ? 200 : 503);
      expect(body).not.toMatch(/db\.internal|5432|app"|password/);
      const id = /err_[0-9a-f]{12}/.exec(body)![0];
      expect(logger.lines).toEqual([`turnkit: stream error ${id}: ${INTERNAL}`]);
    }
    const logger = recordingLogger();
    const crashed = await get(() => {
      throw new TypeError(
        'Cannot read properties of undefined (reading "secretColumn") at /srv/app/src/auth.ts:12',
      );
    }, logger);
    expect(crashed.status).toBe(500);
    expect(crashed.body).not.toMatch(/secretColumn|\/srv/);
    expect(logger.lines).toHaveLength(1);
  });

  it('security: the UI message stream reports a store failure without its text; a bad cursor still says what it is', async () => {
    const logger = recordingLogger();
    const reader = toUIMessageChunks(failingRun(new StoreError(INTERNAL)), { logger }).getReader();
    const chunks: unknown[] = [];
    for (let next = await reader.read(); !next.done; next = await reader.read()) chunks.push(next.value);
    expect(JSON.stringify(chunks)).not.toMatch(/db\.internal|password/);
    expect(chunks.at(-1)).toMatchObject({
      type: 'error',
      errorText: expect.stringMatching(/^the stream failed \(error err_/),
    });
    expect(logger.lines[0]).toContain('db.internal');

    const quiet = recordingLogger();
    const cursor = await get(
      () => failingRun(new StreamCursorError('cursor 99 is not from this run')),
      quiet,
    );
    expect(cursor.status).toBe(400);
    expect(cursor.body).toContain('cursor 99 is not from this run');
    expect(quiet.lines).toEqual([]);
  });

  it('security: an unknown run and a refused one get the same answer from the SSE handler and the UI message stream (404, one fixed body): no existence oracle', async () => {
    const quiet = recordingLogger();
    const missing = new RecordNotFound('turn', 'turn_000000000000000000000042');
    const refused = new AuthorizationError('not allowed to stream run turn_000000000000000000000001');
    const answers = [];
    for (const error of [missing, refused]) {
      answers.push(
        await get(() => {
          throw error;
        }, quiet),
      );
    }
    expect(answers[0]).toEqual({
      status: 404,
      body: JSON.stringify({ error: { class: 'RecordNotFound', message: 'no such run' } }),
    });
    expect(answers[1]).toEqual(answers[0]);
    const chunks = [];
    for (const error of [missing, refused]) {
      const reader = toUIMessageChunks(failingRun(error), { logger: quiet }).getReader();
      const read: unknown[] = [];
      for (let next = await reader.read(); !next.done; next = await reader.read()) read.push(next.value);
      chunks.push(JSON.stringify(read));
    }
    expect(chunks[0]).toContain('no such run');
    expect(chunks[1]).toBe(chunks[0]);
    expect(quiet.lines).toEqual([]);
  });
});
