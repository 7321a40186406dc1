/**
 * Issue 45, the first hour: an approval may wait only as long as its tree's root timeout,
 * which counts from submission with every wait included (spec §1.3, BG-09). A longer
 * `approvalTimeout` is refused when the agent (or a run's limits) is defined, with the fix.
 */
import { Client, Connection } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ArgumentError } from '../../src/errors.js';
import { MemoryStore } from '../../src/store/memory-store.js';

const wire = (approvalTimeout: number | string) =>
  defineTool({
    name: 'wire',
    description: 'Wires money.',
    input: z.object({ amount: z.number() }),
    needsApproval: true,
    approvalTimeout,
    execute: ({ amount }) => ({ wired: amount }),
  });

describe('first hour: approvals that can wait as long as they say', () => {
  it('first hour: an approval timeout (3 s) longer than the agent timeout (2 s) is an ArgumentError at definition, naming the tool and the fix', () => {
    const define = () => defineAgent({ name: 'payer', tools: [wire(3_000)], limits: { timeout: 2 } });
    expect(define).toThrow(ArgumentError);
    expect(define).toThrow(
      /agent payer: tool wire waits up to 3 s for approval \(approvalTimeout\), longer than the timeout of 2 s, which counts from submission and includes waits \(spec §1\.3\): set limits: \{ timeout: 63 \}/,
    );
  });

  it('first hour: the default 300 s root timeout refuses a 30-minute approval; raising the timeout (or null) accepts it', () => {
    expect(() => defineAgent({ name: 'payer', tools: [wire('30 minutes')] })).toThrow(
      /waits up to 1800 s .* longer than the timeout of 300 s/,
    );
    expect(
      defineAgent({ name: 'payer', tools: [wire('30 minutes')], limits: { timeout: 3600 } }).limits.timeout,
    ).toBe(3600);
    expect(
      defineAgent({ name: 'payer', tools: [wire('30 minutes')], limits: { timeout: null } }).limits.timeout,
    ).toBe(null);
    expect(defineAgent({ name: 'payer', tools: [wire(1_500)], limits: { timeout: 2 } }).name).toBe('payer');
  });

  it('first hour: a root whose sub-agent waits longer for approval than the root timeout is refused (the tree runs under the root limits)', () => {
    const child = defineAgent({ name: 'child', tools: [wire('10 minutes')], limits: { timeout: 3600 } });
    expect(() => defineAgent({ name: 'lead', subAgents: [child] })).toThrow(
      /agent lead: tool wire waits up to 600 s .* longer than the timeout of 300 s/,
    );
    expect(defineAgent({ name: 'lead', subAgents: [child], limits: { timeout: 900 } }).name).toBe('lead');
  });

  it('first hour: a run whose limits cut the timeout below an approval timeout is refused before anything is written', async () => {
    const store = new MemoryStore();
    const payer = defineAgent({ name: 'payer', tools: [wire(3_000)], limits: { timeout: 10 } });
    // A lazy connection: nothing reaches Temporal, since the run is refused first.
    const client = new TurnKitClient({
      store,
      agents: new AgentRegistry([payer]),
      temporal: new Client({ connection: Connection.lazy() }),
    });
    await expect(client.run('payer', 'pay', { limits: { timeout: 2 } })).rejects.toThrow(
      /a run of agent payer: limits: tool wire waits up to 3 s for approval/,
    );
    expect((await store.listTurns({ limit: 10 })).length).toBe(0);
  });
});
