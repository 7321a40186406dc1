/**
 * Skills (spec §1.4, §4.6): instructions plus optional tools. An agent's `skills` are always
 * in its prompt; its `availableSkills` are listed, and the model loads one into the turn with
 * the generated `load_skill` tool. A loaded skill is a completed `load_skill` execution in the
 * store, so it survives a crash and a worker change; the tools a skill owns are offered (and
 * callable) only once it is loaded, and only in that turn.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ArgumentError, ConfigError, ToolError } from '../errors.js';
import type { ToolExecutionRecord } from '../store/types.js';
import type { ToolDefinition } from './tool.js';
import type { OutputConstraint, OutputPolicy, OutputPolicyOption } from './output-policy.js';
import { resolveOutputPolicies } from './output-policy.js';
import { buildTool } from './tool.js';

export interface Skill {
  readonly key: string;
  readonly name: string;
  readonly description: string;
  /** The instructions the model reads once the skill is loaded. */
  readonly content: string;
  readonly tools: readonly ToolDefinition[];
  /** Output checks that apply to a turn once it loaded the skill (always, for an agent's `skills`). */
  readonly outputPolicies: readonly OutputPolicy[];
  readonly outputConstraints: readonly OutputConstraint[];
}

export interface SkillOptions {
  key: string;
  name?: string;
  description?: string;
  content: string;
  tools?: readonly ToolDefinition[];
  /** Like the agent's `outputPolicy`: policies (code or a markdown file) and constraints. */
  outputPolicy?: OutputPolicyOption | readonly OutputPolicyOption[] | null;
}

const SKILL_KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

export const LOAD_SKILL = 'load_skill';

/** Defines a skill in code. */
export function defineSkill(options: SkillOptions): Skill {
  if (!options || typeof options !== 'object') throw new ArgumentError('defineSkill needs options');
  if (typeof options.key !== 'string' || !SKILL_KEY.test(options.key))
    throw new ArgumentError(
      `a skill key must be letters, digits, "_", "-" or "." (got ${JSON.stringify(options.key)})`,
    );
  if (typeof options.content !== 'string' || options.content.trim() === '')
    throw new ArgumentError(`skill ${options.key} needs content`);
  for (const field of ['name', 'description'] as const) {
    if (options[field] !== undefined && typeof options[field] !== 'string')
      throw new ArgumentError(`skill ${options.key}: ${field} must be a string`);
  }
  const tools = [...(options.tools ?? [])];
  if (tools.some((tool) => !tool || typeof tool.name !== 'string' || typeof tool.execute !== 'function'))
    throw new ArgumentError(`skill ${options.key}: tools must be built with defineTool`);
  const checks = resolveOutputPolicies(`skill ${options.key}`, options.outputPolicy);
  return Object.freeze({
    key: options.key,
    name: options.name ?? options.key,
    description: options.description ?? '',
    content: options.content,
    tools: Object.freeze(tools),
    outputPolicies: Object.freeze(checks.policies),
    outputConstraints: Object.freeze(checks.constraints),
  });
}

const FRONT_MATTER = /^---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/;

/**
 * A skill from a markdown file with YAML front matter (`name`, `description`, optional
 * `key`; the key defaults to the file name without its extension). Broken front matter, or a
 * field of the wrong type, is a ConfigError naming the file.
 */
export function skillFromFile(
  path: string,
  options: Pick<SkillOptions, 'tools' | 'outputPolicy'> = {},
): Skill {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`skill file ${path} cannot be read: ${(error as Error).message}`, { cause: error });
  }
  const match = FRONT_MATTER.exec(text);
  let meta: unknown = {};
  if (match) {
    try {
      meta = parseYaml(match[1]!) ?? {};
    } catch (error) {
      throw new ConfigError(`skill file ${path} has broken front matter: ${(error as Error).message}`, {
        cause: error,
      });
    }
  } else if (text.startsWith('---')) {
    throw new ConfigError(`skill file ${path} has broken front matter: no closing "---"`);
  }
  if (!meta || typeof meta !== 'object' || Array.isArray(meta))
    throw new ConfigError(`skill file ${path}: front matter must be a mapping`);
  const fields = meta as Record<string, unknown>;
  for (const field of ['key', 'name', 'description']) {
    if (fields[field] !== undefined && typeof fields[field] !== 'string')
      throw new ConfigError(`skill file ${path}: front matter ${field} must be a string`);
  }
  const content = match ? text.slice(match[0].length) : text;
  try {
    return defineSkill({
      key: (fields['key'] as string | undefined) ?? basename(path, extname(path)),
      content: content.trim(),
      ...(fields['name'] !== undefined ? { name: fields['name'] as string } : {}),
      ...(fields['description'] !== undefined ? { description: fields['description'] as string } : {}),
      ...(options.tools ? { tools: options.tools } : {}),
      ...(options.outputPolicy !== undefined ? { outputPolicy: options.outputPolicy } : {}),
    });
  } catch (error) {
    throw new ConfigError(`skill file ${path}: ${(error as Error).message}`, { cause: error });
  }
}

/** Every `.md`/`.markdown` file of a directory, in name order; `tools` by skill key. */
export function skillsFromDirectory(
  dir: string,
  options: { tools?: Record<string, readonly ToolDefinition[]> } = {},
): Skill[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => /\.(md|markdown)$/i.test(name));
  } catch (error) {
    throw new ConfigError(`skill directory ${dir} cannot be read: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const skills = names.sort().map((name) => {
    const key = basename(name, extname(name));
    const tools = options.tools?.[key];
    return skillFromFile(join(dir, name), tools ? { tools } : {});
  });
  uniqueSkills(`skill directory ${dir}`, skills, false);
  return skills;
}

/**
 * Skills de-duplicated by key, first wins (spec §1.4: global available skills come first).
 * With `strict`, a repeated key is an ArgumentError instead.
 */
export function uniqueSkills(where: string, skills: readonly Skill[], strict = false): Skill[] {
  const seen = new Map<string, Skill>();
  for (const skill of skills) {
    if (!skill || typeof skill.key !== 'string' || typeof skill.content !== 'string')
      throw new ArgumentError(`${where}: skills must be built with defineSkill or skillFromFile`);
    if (seen.has(skill.key)) {
      if (strict) throw new ArgumentError(`${where}: skill ${skill.key} is listed twice`);
      continue;
    }
    seen.set(skill.key, skill);
  }
  return [...seen.values()];
}

/** Keys the turn loaded: its completed `load_skill` executions, read back from the store. */
export function loadedSkillKeys(executions: readonly ToolExecutionRecord[]): Set<string> {
  const keys = new Set<string>();
  for (const execution of executions) {
    if (execution.toolName !== LOAD_SKILL || execution.status !== 'completed') continue;
    const result = execution.result;
    if (result && typeof result === 'object' && !Array.isArray(result) && typeof result['key'] === 'string')
      keys.add(result['key']);
  }
  return keys;
}

/** The generated `load_skill` tool of an agent with available skills. */
export function loadSkillTool(available: readonly Skill[]): ToolDefinition {
  const keys = available.map((skill) => skill.key);
  return buildTool(
    {
      name: LOAD_SKILL,
      description: `Loads a skill's instructions (and its tools) into this turn. Available: ${keys.join(', ')}.`,
      input: z.object({ key: z.string().describe('The key of the skill to load.') }),
      recovery: 'replaySafe',
      execute: async ({ key }, context) => {
        const skill = available.find((candidate) => candidate.key === key);
        if (!skill)
          throw new ToolError(`unknown skill ${JSON.stringify(key)}; available: ${keys.join(', ')}`);
        const earlier = loadedSkillKeys(
          (await context.store.listToolExecutions({ turnId: context.turn.id })).filter(
            (row) => row.id !== context.execution.id,
          ),
        );
        // Loading twice is a no-op: the skill is in the prompt already.
        if (earlier.has(key)) return { key, name: skill.name, already_loaded: true };
        return { key, name: skill.name, content: skill.content };
      },
    },
    'ordinary',
  );
}
