import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/agents/tool.js';
import { ArgumentError, ToolError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import {
  ORACLE_INSTRUCTIONS,
  oracle,
  READ_FILE_MAX_BYTES,
  readFileTool,
} from '../../src/specialists/oracle.js';
import { readOnlyTool } from '../../src/specialists/read-only.js';
import { call } from './context.js';

let outside: string;
let root: string;

beforeAll(() => {
  const base = mkdtempSync(join(tmpdir(), 'turnkit-oracle-'));
  root = join(base, 'project');
  outside = join(base, 'secrets');
  mkdirSync(join(root, 'src'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(root, 'README.md'), 'hello oracle');
  writeFileSync(join(root, 'src', 'a b+c.ts'), 'export const x = 1;\n');
  writeFileSync(join(root, 'big.txt'), 'x'.repeat(READ_FILE_MAX_BYTES + 1));
  writeFileSync(join(root, 'exact.txt'), 'y'.repeat(READ_FILE_MAX_BYTES));
  writeFileSync(join(outside, 'key.txt'), 'top secret');
  symlinkSync(join(outside, 'key.txt'), join(root, 'escape.txt'));
  symlinkSync(outside, join(root, 'escape-dir'));
  symlinkSync(join(root, 'README.md'), join(root, 'inner-link.md'));
});

const read = (path: string, at = root) => call(readFileTool({ root: at }), { path });

describe('oracle', () => {
  it('SP-01 oracle reads inside root, ".." raises ToolError', async () => {
    await expect(read('README.md')).resolves.toEqual({
      path: 'README.md',
      content: 'hello oracle',
      bytes: 12,
    });
    await expect(read('src/a b+c.ts')).resolves.toMatchObject({ path: 'src/a b+c.ts' });
    await expect(read('./src/../README.md')).resolves.toMatchObject({ content: 'hello oracle' });
    await expect(read('../secrets/key.txt')).rejects.toThrow(ToolError);
    await expect(read('../secrets/key.txt')).rejects.toThrow(/outside the root/);
    await expect(read(join(outside, 'key.txt'))).rejects.toThrow(ToolError);
    await expect(read('/etc/passwd')).rejects.toThrow(ToolError);
  });

  it('SP-01 oracle: a symlink escaping root raises ToolError; one inside root is followed', async () => {
    await expect(read('escape.txt')).rejects.toThrow(/outside the root/);
    await expect(read('escape-dir/key.txt')).rejects.toThrow(ToolError);
    await expect(read('inner-link.md')).resolves.toMatchObject({
      path: 'README.md',
      content: 'hello oracle',
    });
  });

  it('SP-01 oracle: the root itself may be a symlink; confinement uses its real path', async () => {
    const linkedRoot = join(mkdtempSync(join(tmpdir(), 'turnkit-oracle-link-')), 'root');
    symlinkSync(root, linkedRoot);
    await expect(read('README.md', linkedRoot)).resolves.toMatchObject({ content: 'hello oracle' });
    await expect(read('escape.txt', linkedRoot)).rejects.toThrow(ToolError);
    expect(realpathSync(linkedRoot)).toBe(realpathSync(root));
  });

  it('SP-01 oracle: size cap of 100 000 bytes; missing files, directories and empty paths are ToolErrors', async () => {
    await expect(read('exact.txt')).resolves.toMatchObject({ bytes: READ_FILE_MAX_BYTES });
    await expect(read('big.txt')).rejects.toThrow(/too large/);
    await expect(read('big.txt')).rejects.toThrow(ToolError);
    await expect(read('missing.txt')).rejects.toThrow(ToolError);
    await expect(read('src')).rejects.toThrow(ToolError);
    await expect(read('')).rejects.toThrow(ToolError);
    await expect(read('a\0b')).rejects.toThrow(ToolError);
  });

  it('SP-01 oracle: an Agent with the given model and client, read-only marker, extra instructions appended', () => {
    const client = new ScriptedModel({});
    const agent = oracle({ model: 'gpt-test', client, root, instructions: 'Focus on security.' });
    expect(agent.name).toBe('oracle');
    expect(agent.model).toBe('gpt-test');
    expect(agent.client).toBe(client);
    expect(agent.tools.map((t) => t.name)).toEqual(['read_file']);
    const [tool] = agent.tools;
    expect(tool!.readOnly).toBe(true);
    expect(tool!.recovery).toBe('replaySafe');
    expect(tool!.jsonSchema).toMatchObject({ required: ['path'] });
    expect(agent.instructions.startsWith(ORACLE_INSTRUCTIONS)).toBe(true);
    expect(agent.instructions.endsWith('\n\nFocus on security.')).toBe(true);
    expect(oracle({ root }).instructions).toBe(ORACLE_INSTRUCTIONS);
    expect(agent.subAgents).toEqual([]);
  });

  it('SP-01 oracle: supplied read-only tools replace the default; a non-read-only tool is an ArgumentError', () => {
    const lookup = readOnlyTool({
      name: 'lookup',
      description: 'Reads.',
      input: z.object({}),
      execute: () => 'x',
    });
    expect(oracle({ tools: [lookup] }).tools.map((t) => t.name)).toEqual(['lookup']);
    const write = defineTool({
      name: 'write_file',
      description: 'Writes.',
      input: z.object({}),
      execute: () => 1,
    });
    expect(() => oracle({ root, tools: [lookup, write] })).toThrow(ArgumentError);
    expect(() => oracle({ root, tools: [lookup, write] })).toThrow(/write_file/);
  });

  it('SP-01 oracle: a root that does not exist or is a file is an ArgumentError', () => {
    expect(() => oracle({ root: join(root, 'nope') })).toThrow(ArgumentError);
    expect(() => oracle({ root: join(root, 'README.md') })).toThrow(ArgumentError);
  });
});
