/**
 * Layer: engine driver (test/helpers/engine-driver.ts), memory store, no Temporal server.
 * Loaded skills across a worker change (BG-34) need workers: skills-worker-change.test.ts.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineSkill, skillFromFile, skillsFromDirectory } from '../../src/agents/skill.js';
import { defineTool } from '../../src/agents/tool.js';
import { configure, resetConfiguration } from '../../src/config.js';
import { ArgumentError, ConfigError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import { oracle } from '../../src/specialists/oracle.js';
import { readOnlyTool } from '../../src/specialists/read-only.js';
import type { DriverKit } from '../helpers/driver-kit.js';
import { startDriverKit } from '../helpers/driver-kit.js';

const citations: string[] = [];
const cite = defineTool({
  name: 'cite',
  description: 'Cites a source.',
  input: z.object({ source: z.string() }),
  execute: ({ source }) => {
    citations.push(source);
    return { cited: source };
  },
});
const research = defineSkill({
  key: 'research',
  name: 'Research',
  description: 'How to research <carefully>.',
  content: 'Always cite two sources.',
  tools: [cite],
});
const style = defineSkill({ key: 'style', content: 'Write in short sentences.' });

const toolNames = (request: ModelRequest) => request.tools.map((tool) => tool.name);

const model = new ScriptedModel({
  researcher: (_request, { call }) => {
    const steps = [
      { toolCalls: [{ name: 'cite', arguments: { source: 'too early' } }] },
      { toolCalls: [{ name: 'load_skill', arguments: { key: 'research' } }] },
      { toolCalls: [{ name: 'cite', arguments: { source: 'after loading' } }] },
      { toolCalls: [{ name: 'load_skill', arguments: { key: 'research' } }] },
      'researched',
    ];
    return steps[call] ?? 'fresh run';
  },
  unknown_skill: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'went on'
      : { toolCalls: [{ name: 'load_skill', arguments: { key: 'nope' } }] },
  stylist: () => 'styled',
});

let kit: DriverKit;
beforeAll(async () => {
  kit = await startDriverKit({
    agents: [
      defineAgent({ name: 'researcher', availableSkills: [research] }),
      defineAgent({ name: 'unknown_skill', availableSkills: [research, style] }),
      defineAgent({ name: 'stylist', skills: [style] }),
    ],
    model,
  });
});
afterAll(async () => kit?.stop());
afterEach(() => resetConfiguration());

describe('skills and load_skill', () => {
  it('SC-02 a skill’s tools are not offered or callable before load_skill, are offered after, and do not leak into a new run', async () => {
    const run = await kit.client.run('researcher', 'Research otters', { promptMode: 'full' });
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('researched');
    const requests = model.callsFor('researcher').map((c) => c.request);
    expect(toolNames(requests[0]!)).toEqual(['load_skill']);
    expect(requests[0]!.instructions).toContain('<available_skills>');
    expect(requests[0]!.instructions).toContain('- research: Research — How to research &lt;carefully&gt;.');
    expect(requests[0]!.instructions).not.toContain('Always cite two sources.');
    expect(toolNames(requests[1]!)).toEqual(['load_skill']);
    // After loading: offered, and the skill's content is in the loaded_skills section.
    expect(toolNames(requests[2]!)).toEqual(['cite', 'load_skill']);
    expect(requests[2]!.instructions).toContain(
      '<loaded_skills>\n<skill key="research" name="Research">\nAlways cite two sources.',
    );
    expect(requests[2]!.instructions).not.toContain('<available_skills>');
    const executions = await run.toolExecutions();
    expect(executions.map((e) => [e.toolName, e.status])).toEqual([
      ['cite', 'failed'],
      ['load_skill', 'completed'],
      ['cite', 'completed'],
      ['load_skill', 'completed'],
    ]);
    expect(executions[0]!.error?.message).toBe('unknown tool: cite');
    expect(citations).toEqual(['after loading']);
    expect(executions[1]!.result).toEqual({
      key: 'research',
      name: 'Research',
      content: 'Always cite two sources.',
    });
    // Loading twice is a no-op.
    expect(executions[3]!.result).toEqual({ key: 'research', name: 'Research', already_loaded: true });

    await (await kit.client.run('researcher', 'Again', { promptMode: 'full' })).result();
    const fresh = model.callsFor('researcher').at(-1)!.request;
    expect(toolNames(fresh)).toEqual(['load_skill']);
    expect(fresh.instructions).not.toContain('<loaded_skills>');
  });

  it('SC-02 an unknown skill key fails that load_skill execution with the available keys; the turn goes on', async () => {
    const run = await kit.client.run('unknown_skill', 'Load nonsense');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('went on');
    const [execution] = await run.toolExecutions();
    expect(execution!.status).toBe('failed');
    expect(execution!.error?.message).toBe('unknown skill "nope"; available: research, style');
  });

  it('an always-loaded skill is in the loaded_skills section of every turn', async () => {
    await (await kit.client.run('stylist', 'Style')).result();
    const request = model.callsFor('stylist').at(-1)!.request;
    expect(request.instructions).toContain('<skill key="style" name="style">\nWrite in short sentences.');
    expect(toolNames(request)).toEqual([]);
  });

  it('CORE-30 skill de-duplication: global available skills come first and the first key wins', () => {
    const globalResearch = defineSkill({ key: 'research', content: 'Global version.' });
    configure({ availableSkills: [globalResearch] });
    const agent = defineAgent({ name: 'dedup', availableSkills: [research, style] });
    expect(agent.availableSkills.map((s) => [s.key, s.content])).toEqual([
      ['research', 'Global version.'],
      ['style', 'Write in short sentences.'],
    ]);
    expect(() => defineAgent({ name: 'twice', skills: [style, style] })).toThrow(ArgumentError);
    // The global version has no tools; an agent that opts out of globals gets the clash.
    expect(
      defineAgent({ name: 'clash', tools: [cite], availableSkills: [research] }).effectiveTools,
    ).toHaveLength(2);
    expect(() =>
      defineAgent({ name: 'clash', tools: [cite], availableSkills: [research], inheritGlobals: false }),
    ).toThrow(ArgumentError);
  });

  it('SP-05 read-only specialists ignore global available skills and reject mutating skills', () => {
    configure({ availableSkills: [research] });
    const advisor = oracle({ root: tmpdir() });
    expect(advisor.availableSkills).toEqual([]);
    expect(advisor.effectiveTools.map((t) => t.name)).toEqual(['read_file']);
    expect(() => oracle({ root: tmpdir(), availableSkills: [research] })).toThrow(ArgumentError);
    const safe = defineSkill({
      key: 'safe',
      content: 'Read only.',
      tools: [
        readOnlyTool({ name: 'peek', description: 'Peeks.', input: z.object({}), execute: () => ({}) }),
      ],
    });
    expect(oracle({ root: tmpdir(), availableSkills: [safe] }).availableSkills.map((s) => s.key)).toEqual([
      'safe',
    ]);
  });
});

describe('skill files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'turnkit-skills-'));
  writeFileSync(
    join(dir, 'triage.md'),
    '---\nname: Triage\ndescription: "Sorts tickets: urgent first"\n---\n\n# Triage\nUrgent first.\n',
  );
  writeFileSync(join(dir, 'plain.markdown'), 'No front matter at all.\n');
  writeFileSync(join(dir, 'notes.txt'), 'not a skill');
  const broken = mkdtempSync(join(tmpdir(), 'turnkit-skills-broken-'));
  writeFileSync(join(broken, 'bad.md'), '---\nname: [unclosed\n---\nbody\n');
  writeFileSync(join(broken, 'open.md'), '---\nname: never closed\nbody\n');
  writeFileSync(join(broken, 'typed.md'), '---\nname: 12\n---\nbody\n');
  writeFileSync(join(broken, 'list.md'), '---\n- a\n- b\n---\nbody\n');

  it('a markdown file with YAML front matter, and a directory of them, become skills', () => {
    const triage = skillFromFile(join(dir, 'triage.md'), { tools: [cite] });
    expect(triage).toMatchObject({
      key: 'triage',
      name: 'Triage',
      description: 'Sorts tickets: urgent first',
      content: '# Triage\nUrgent first.',
    });
    expect(triage.tools.map((t) => t.name)).toEqual(['cite']);
    const all = skillsFromDirectory(dir, { tools: { triage: [cite] } });
    expect(all.map((s) => [s.key, s.name])).toEqual([
      ['plain', 'plain'],
      ['triage', 'Triage'],
    ]);
    expect(all[0]!.content).toBe('No front matter at all.');
  });

  it('broken front matter, a missing closing line, a wrong field type or a non-mapping is a ConfigError naming the file', () => {
    for (const name of ['bad.md', 'open.md', 'typed.md', 'list.md']) {
      expect(() => skillFromFile(join(broken, name))).toThrow(ConfigError);
      expect(() => skillFromFile(join(broken, name))).toThrow(name);
    }
    expect(() => skillsFromDirectory(broken)).toThrow(ConfigError);
    expect(() => skillFromFile(join(broken, 'missing.md'))).toThrow(ConfigError);
  });
});
