import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { historySize } from '../helpers/history.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const echo = defineTool({
  name: 'echo',
  description: 'Returns a large payload.',
  input: z.object({ size: z.number() }),
  execute: ({ size }) => ({ text: 'y'.repeat(size) }),
});

// Every call answers with a large tool call first, then a large final text.
const model = new ScriptedModel({
  reader: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? { text: `summary ${'z'.repeat(request.messages[0]!.content.length > 1000 ? 100_000 : 10)}` }
      : {
          toolCalls: [
            { name: 'echo', arguments: { size: request.messages[0]!.content.length > 1000 ? 500_000 : 5 } },
          ],
        },
});

// Compaction off: a 1 MB turn would otherwise be compacted, which is not what this measures.
let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents: [defineAgent({ name: 'reader', tools: [echo], compaction: false })],
    model,
  });
});
afterAll(async () => kit?.stop());

describe('transcript stays out of Temporal history', () => {
  it('a turn over a 1 MB transcript has a history within 10% of the same turn over an empty one', async () => {
    const small = await kit.client.conversation('reader');
    const smallRun = await small.ask('read this: x');
    await smallRun.result();

    const large = await kit.client.conversation('reader');
    const megabyte = `read this: ${'x'.repeat(1024 * 1024)}`;
    const largeRun = await large.ask(megabyte);
    const turn = await largeRun.result();
    expect(turn.status).toBe('completed');
    // The big payloads really went through the turn (store side).
    const transcriptChars = (await largeRun.transcript()).reduce(
      (n, m) => n + JSON.stringify(m.content).length,
      0,
    );
    expect(transcriptChars).toBeGreaterThan(1_500_000);

    const a = await historySize(kit.client.temporal, smallRun.workflowId);
    const b = await historySize(kit.client.temporal, largeRun.workflowId);
    expect(b.events).toBe(a.events);
    expect(b.bytes / a.bytes).toBeLessThanOrEqual(1.1);
    expect(b.bytes).toBeLessThan(64 * 1024);
  });
});
