/**
 * The agent-side vocabulary of TurnKit's system prompt (spec §3.7): section names, custom
 * sections, a replacement `systemPrompt`, and context contributors. Rendering lives in
 * `engine/model/system-prompt.ts`, and runs in the model activity, never in workflow code.
 */
import { ArgumentError, ConfigError } from '../errors.js';
import type { ConversationRecord, Json, JsonObject, TurnRecord } from '../store/types.js';

/** TurnKit's default section order; `subject`, `live_context`, `environment` are the dynamic tail. */
export const DEFAULT_PROMPT_SECTIONS = [
  'agent',
  'instructions',
  'behavior',
  'loaded_skills',
  'available_skills',
  'tools',
  'subject',
  'live_context',
  'environment',
] as const;

/** Every built-in section; `sub_agent` only appears in `minimal` mode. */
const BUILT_IN_SECTIONS = [...DEFAULT_PROMPT_SECTIONS, 'sub_agent'] as const;
export type PromptSectionName = (typeof BUILT_IN_SECTIONS)[number];

export const DYNAMIC_SECTIONS: ReadonlySet<string> = new Set(['subject', 'live_context', 'environment']);

/** What `minimal` mode (the default for delegated sub-agents) renders, in this order. */
export const MINIMAL_SECTIONS: readonly PromptSectionName[] = [
  'agent',
  'sub_agent',
  'instructions',
  'behavior',
  'loaded_skills',
  'available_skills',
  'tools',
  'environment',
];

/** What a custom section or a `systemPrompt` function is given (copies: mutating them changes nothing). */
interface PromptContext {
  agentName: string;
  turn: TurnRecord;
  mode: string;
  model: string;
}

/** A section of the application's own, placed by its position in `promptSections`. */
export interface CustomPromptSection {
  name: string;
  /** Trusted text (not escaped); a function returning nothing drops the section for that call. */
  content: string | ((context: PromptContext) => string | null | undefined);
  /** Part of the dynamic tail instead of the stable, cacheable part. */
  dynamic?: boolean;
}

export type PromptSectionEntry = PromptSectionName | CustomPromptSection;

/** One rendered section. */
export interface RenderedSection {
  name: string;
  text: string;
  dynamic: boolean;
}

/** What a `systemPrompt` function receives: the generated prompt, section by section. */
export interface SystemPromptView extends PromptContext {
  sections: readonly RenderedSection[];
  stable: string;
  dynamic: string;
}

/** A string replaces the generated prompt; a function may return a string or both parts. */
export type SystemPromptOption =
  string | ((prompt: SystemPromptView) => string | { stable: string; dynamic?: string });

/** What a context contributor receives: copies, so mutating them never reaches the store. */
export interface ContributorContext {
  agent: { name: string; description: string };
  turn: TurnRecord;
  conversation: ConversationRecord;
  model: string;
}

export interface ContextContribution {
  name: string;
  content: string;
  /** Trusted data goes in a `prompt_data` block, anything else in an `untrusted_text` block. */
  trusted?: boolean;
  maxChars?: number;
}

/** Returns nothing (no block), a string (an untrusted block) or a contribution. */
export type ContextContributor = (
  context: ContributorContext,
) => void | null | string | ContextContribution | Promise<void | null | string | ContextContribution>;

const SECTION_NAME = /^[a-z][a-z0-9_]*$/;

/** Validates `promptSections` at definition time: an unknown name is a ConfigError. */
export function resolvePromptSections(
  agent: string,
  sections: readonly PromptSectionEntry[] | undefined,
): readonly PromptSectionEntry[] | undefined {
  if (sections === undefined) return undefined;
  if (!Array.isArray(sections)) throw new ArgumentError(`${agent}: promptSections must be an array`);
  const seen = new Set<string>();
  const entries = sections.map((entry: unknown, index): PromptSectionEntry => {
    let name: string;
    if (typeof entry === 'string') {
      if (!(BUILT_IN_SECTIONS as readonly string[]).includes(entry)) {
        throw new ConfigError(
          `${agent}: unknown prompt section ${JSON.stringify(entry)} (known: ${BUILT_IN_SECTIONS.join(', ')})`,
        );
      }
      name = entry;
    } else if (
      entry &&
      typeof entry === 'object' &&
      typeof (entry as CustomPromptSection).name === 'string'
    ) {
      const custom = entry as CustomPromptSection;
      if (!SECTION_NAME.test(custom.name) || (BUILT_IN_SECTIONS as readonly string[]).includes(custom.name))
        throw new ConfigError(
          `${agent}: custom prompt section name ${JSON.stringify(custom.name)} must be snake_case and not a built-in name`,
        );
      if (typeof custom.content !== 'string' && typeof custom.content !== 'function')
        throw new ArgumentError(`${agent}: prompt section ${custom.name} needs a string or function content`);
      name = custom.name;
    } else {
      throw new ArgumentError(`${agent}: promptSections[${index}] is neither a section name nor a section`);
    }
    if (seen.has(name)) throw new ArgumentError(`${agent}: prompt section ${name} is listed twice`);
    seen.add(name);
    return typeof entry === 'string'
      ? (entry as PromptSectionName)
      : (Object.freeze({ ...(entry as object) }) as CustomPromptSection);
  });
  return Object.freeze(entries);
}

export function resolveSystemPrompt(
  agent: string,
  value: SystemPromptOption | undefined,
): SystemPromptOption | undefined {
  if (value === undefined || typeof value === 'string' || typeof value === 'function') return value;
  throw new ArgumentError(`${agent}: systemPrompt must be a string or a function`);
}

export function resolveDataMaxChars(agent: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1)
    throw new ArgumentError(`${agent}: promptDataMaxChars must be a positive integer`);
  return value;
}

export function resolveContributors(
  agent: string,
  value: readonly ContextContributor[] | undefined,
): ContextContributor[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.some((entry) => typeof entry !== 'function'))
    throw new ArgumentError(`${agent}: contextContributors must be an array of functions`);
  return [...value];
}

/** A JSON-able copy for code the application hands to us (contributors, prompt functions). */
export function copyForCallback<T extends Json | TurnRecord | ConversationRecord | JsonObject>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
