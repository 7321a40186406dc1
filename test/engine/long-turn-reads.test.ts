/**
 * A long turn's step must cost what the step needs, not what the turn holds (decision 32): the
 * engine reads the tool executions a step names, never all of the turn's, until the turn ends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { requireTemporal } from '../helpers/temporal.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit, tempSqliteUrl } from '../helpers/turnkit.js';

const temporalUp = await requireTemporal();
const ITERATIONS = 24;

describe.skipIf(!temporalUp)('long-lived: per-step reads of a long turn (dev server, SQLite)', () => {
  let kit: TestKit;
  let base: Store;
  // Rows each listToolExecutions call returned, with the number of calls the tool had run then.
  const reads: { rows: number; ran: number }[] = [];
  let ran = 0;
  beforeAll(async () => {
    base = await openStore(tempSqliteUrl());
    const counted = new Proxy(base, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== 'function') return value;
        if (prop !== 'listToolExecutions') return (value as (...a: unknown[]) => unknown).bind(target);
        return async (...args: unknown[]) => {
          const rows = (await (value as (...a: unknown[]) => Promise<unknown[]>).apply(
            target,
            args,
          )) as unknown[];
          reads.push({ rows: rows.length, ran });
          return rows;
        };
      },
    });
    const step = defineTool({
      name: 'step',
      description: 'One step.',
      input: z.object({ n: z.number() }),
      execute: ({ n }) => {
        ran += 1;
        return { n };
      },
    });
    kit = await startKit({
      store: counted,
      agents: [defineAgent({ name: 'stepper', tools: [step] })],
      model: new ScriptedModel({
        stepper: [
          ...Array.from({ length: ITERATIONS }, (_, i) => ({
            toolCalls: [{ id: `call_${i}`, name: 'step', arguments: { n: i } }],
          })),
          'done',
        ],
      }),
    });
  });
  afterAll(async () => {
    await kit?.stop();
    await base?.close();
  });

  it("long-lived: no read before the turn ends returns more than the step's own execution", async () => {
    const run = await kit.client.run('stepper', 'Take many steps');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(ran).toBe(ITERATIONS);
    expect((await base.listToolExecutions({ turnId: turn.id })).length).toBe(ITERATIONS);
    // Reads happened after every call but the last, and each returned at most the step's one
    // execution; only the turn's end (after the last call ran) reads them all. The first
    // response reads none: the turn has no execution yet (decision 88), and a call's row is
    // first looked for in the block that creates it (decision 89).
    const during = reads.filter((read) => read.ran < ITERATIONS);
    const stepsRead = new Set(during.map((read) => read.ran));
    expect([...stepsRead]).toEqual(
      expect.arrayContaining(Array.from({ length: ITERATIONS - 1 }, (_, i) => i + 1)),
    );
    expect(Math.max(...during.map((read) => read.rows))).toBeLessThanOrEqual(1);
  });
});
