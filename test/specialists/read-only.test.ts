import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import type { ToolDefinition } from '../../src/agents/tool.js';
import { defineTool } from '../../src/agents/tool.js';
import { ArgumentError } from '../../src/errors.js';
import { librarian } from '../../src/specialists/librarian.js';
import { oracle } from '../../src/specialists/oracle.js';
import { readOnlyTool } from '../../src/specialists/read-only.js';

const input = z.object({});
const mutating = defineTool({ name: 'mutate', description: 'Writes.', input, execute: () => 1 });
const explicitlyMutating = defineTool({
  name: 'write',
  description: 'Writes.',
  input,
  readOnly: false,
  execute: () => 1,
});
const reading = readOnlyTool({ name: 'peek', description: 'Reads.', input, execute: () => 1 });
const helper = defineAgent({ name: 'helper' });

const specialists: [string, (extra: Record<string, unknown>) => unknown][] = [
  ['oracle', (extra) => oracle({ ...extra })],
  ['librarian', (extra) => librarian({ repository: 'owner/name', ...extra })],
];

describe('read-only specialists', () => {
  it.each(specialists)('SP-05 %s rejects mutating tools (ArgumentError naming the tool)', (name, build) => {
    for (const tool of [mutating, explicitlyMutating]) {
      expect(() => build({ tools: [reading, tool] })).toThrow(ArgumentError);
      expect(() => build({ tools: [tool] })).toThrow(new RegExp(`${name} is read-only: tool ${tool.name}`));
    }
    // Something shaped like a tool that does not declare readOnly is not trusted.
    const { readOnly: _readOnly, ...undeclared } = reading;
    expect(() => build({ tools: [undeclared as unknown as ToolDefinition] })).toThrow(ArgumentError);
    expect(() => build({ tools: [reading] })).not.toThrow();
  });

  it.each(specialists)('SP-05 %s rejects sub-agents', (_name, build) => {
    expect(() => build({ subAgents: [helper] })).toThrow(ArgumentError);
    expect(() => build({ subAgents: [helper] })).toThrow(/sub-agents/);
    expect(() => build({ subAgents: 'helper' })).toThrow(ArgumentError);
    expect(() => build({ subAgents: [] })).not.toThrow();
  });

  it('SP-05 readOnlyTool is read-only and replay-safe, whatever the caller tries to pass', () => {
    expect(reading).toMatchObject({
      readOnly: true,
      recovery: 'replaySafe',
      terminal: false,
      kind: 'ordinary',
    });
    const forced = readOnlyTool({
      name: 'sneaky',
      description: '',
      input,
      execute: () => 1,
      ...({ readOnly: false, recovery: 'unknown' } as object),
    });
    expect(forced).toMatchObject({ readOnly: true, recovery: 'replaySafe' });
    const final = readOnlyTool({
      name: 'answer',
      description: '',
      input,
      terminal: 'done',
      execute: () => 1,
    });
    expect(final.terminal).toBe(true);
    expect(() => oracle({ tools: [final] })).not.toThrow();
    expect(() => readOnlyTool(undefined as never)).toThrow(ArgumentError);
  });

  it('SP-05 specialists are ordinary agents: their names can be overridden for a second instance', () => {
    const a = librarian({ repository: 'owner/a', name: 'librarian_a' });
    const b = librarian({ repository: 'owner/b', name: 'librarian_b' });
    expect([a.name, b.name]).toEqual(['librarian_a', 'librarian_b']);
    const parent = defineAgent({ name: 'lead', subAgents: [a, b, oracle()] });
    expect(parent.effectiveTools.map((t) => t.name)).toEqual(['librarian_a', 'librarian_b', 'oracle']);
  });
});
