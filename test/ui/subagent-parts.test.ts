/**
 * Review finding 16 (round 3): each delta of a sub-agent re-sent its whole `data-subagent` part,
 * so an n-character sub-agent answer cost O(n²) bytes on the wire (a 1 MB answer: gigabytes).
 * Text now goes out again only once it grew by a quarter (at least 256 characters); status,
 * step, block and tool changes still go out at once, and the last part carries everything.
 */
import { describe, expect, it } from 'vitest';
import type { RunStreamPart } from '../../src/client/run-stream.js';
import type { StreamableRun } from '../../src/client/ui-stream.js';
import type { TurnKitUIMessageChunk } from '../../src/ui/types.js';
import { toUIMessageChunks } from '../../src/client/ui-stream.js';

const ROOT = 'turn_00000000000000000000000a';
const CHILD = 'turn_00000000000000000000000b';

function run(deltas: number, size: number): StreamableRun {
  let cursor = 0;
  const part = (turnId: string, body: Record<string, unknown>) =>
    ({ cursor: String(++cursor), turnId, step: 'step_1', ...body }) as RunStreamPart;
  return {
    turnId: ROOT,
    stream: () => ({
      async *[Symbol.asyncIterator]() {
        yield part(ROOT, { type: 'status', status: 'running' });
        yield part(ROOT, { type: 'step.started', model: 'm' });
        yield part(CHILD, {
          type: 'status',
          status: 'running',
          subAgent: { agentName: 'researcher', parentTurnId: ROOT, toolCallId: 'call_1' },
        });
        yield part(CHILD, { type: 'step.started', model: 'm' });
        for (let i = 0; i < deltas; i++) yield part(CHILD, { type: 'text.delta', text: 'y'.repeat(size) });
        yield part(CHILD, { type: 'step.finished', finishReason: 'stop', usage: {} });
        yield part(CHILD, { type: 'status', status: 'completed' });
        yield part(ROOT, { type: 'finish', status: 'completed' });
      },
    }),
  };
}

async function chunksOf(stream: ReadableStream<TurnKitUIMessageChunk>): Promise<TurnKitUIMessageChunk[]> {
  const out: TurnKitUIMessageChunk[] = [];
  const reader = stream.getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) out.push(next.value);
  return out;
}

describe('sub-agent UI parts', () => {
  it('ui: a long sub-agent answer costs bytes linear in its length, and its last data-subagent part carries all of it', async () => {
    const deltas = 1_000;
    const size = 100;
    const chunks = await chunksOf(toUIMessageChunks(run(deltas, size)));
    const subagent = chunks.filter((chunk) => chunk.type === 'data-subagent');
    const bytes = subagent.reduce((sum, chunk) => sum + JSON.stringify(chunk).length, 0);
    // Every delta sent whole would be about deltas² · size / 2 = 50 MB here.
    // Geometric resends (about 5n) plus the whole part once more per status or step change.
    expect(bytes).toBeLessThan(8 * deltas * size);
    const last = subagent.at(-1)! as { data: { status: string; parts: { type: string; text?: string }[] } };
    expect(last.data.status).toBe('completed');
    expect(last.data.parts.find((p) => p.type === 'text')!.text).toBe('y'.repeat(deltas * size));
    // A short answer still streams in steps of 256 characters.
    const short = (await chunksOf(toUIMessageChunks(run(20, 64)))).filter((c) => c.type === 'data-subagent');
    expect(short.length).toBeGreaterThanOrEqual(5);
  });
});
