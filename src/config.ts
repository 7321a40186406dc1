/**
 * Global defaults (TurnKit's `configure`, spec §1.3). Agents snapshot them when they are
 * defined (`defineAgent`), so changing a default later never changes an existing agent; an
 * agent with `inheritGlobals: false` (the specialists) takes none of them.
 */
import type { BudgetLimits } from './agents/agent.js';
import type { ContextContributor, PromptSectionEntry } from './agents/prompt.js';
import { resolveContributors, resolveDataMaxChars, resolvePromptSections } from './agents/prompt.js';
import type { CompactionSetting } from './agents/compaction-policy.js';
import { checkCompactionSetting } from './agents/compaction-policy.js';
import type { Skill } from './agents/skill.js';
import { ArgumentError } from './errors.js';
import type { ModelChoice } from './models/model-chain.js';
import { modelChain } from './models/model-chain.js';

export interface TurnKitDefaults {
  /**
   * Model id, or fallback chain of ids, when agent, conversation and turn name none
   * (`claude-sonnet-4-5`).
   */
  defaultModel: ModelChoice;
  /** Budget limits agents start from. */
  limits: BudgetLimits;
  /** Prompt sections for `full` and `task` mode when an agent gives none. */
  promptSections: readonly PromptSectionEntry[] | undefined;
  /** Replaces the behavior section's text. */
  promptBehavior: string | undefined;
  /** Truncation of data blocks (subject, live context) in prompts. */
  promptDataMaxChars: number;
  /** Contributors copied into agents when they are defined. */
  contextContributors: readonly ContextContributor[];
  /** Available skills copied into agents when they are defined (before the agent's own). */
  availableSkills: readonly Skill[];
  /** `false` disables compaction for agents defined from now on; an object overrides policy keys. */
  compaction: CompactionSetting;
  /** Whether model clients may split the stable prompt out for provider caching. */
  promptCache: boolean;
}

export const DEFAULT_LIMITS: BudgetLimits = Object.freeze({
  maxIterations: 25,
  maxToolExecutions: 100,
  maxToolExecutionsByName: {},
  maxSpend: null,
  maxDepth: 3,
  timeout: 300,
});

const BUILT_IN: TurnKitDefaults = Object.freeze({
  defaultModel: 'claude-sonnet-4-5',
  limits: DEFAULT_LIMITS,
  promptSections: undefined,
  promptBehavior: undefined,
  promptDataMaxChars: 20_000,
  contextContributors: Object.freeze([]),
  availableSkills: Object.freeze([]),
  compaction: true,
  promptCache: true,
});

let current: TurnKitDefaults = BUILT_IN;

export type TurnKitConfiguration = Partial<Omit<TurnKitDefaults, 'limits'>> & {
  limits?: Partial<BudgetLimits>;
};

const KEYS: readonly string[] = Object.keys(BUILT_IN);

/**
 * Sets global defaults for agents defined from now on (and the default model of runtimes).
 * Keys merge into the current defaults; `limits` merges key by key. Unknown keys are an
 * ArgumentError. Returns the defaults now in force.
 */
export function configure(settings: TurnKitConfiguration): TurnKitDefaults {
  if (!settings || typeof settings !== 'object') throw new ArgumentError('configure needs an object');
  for (const key of Object.keys(settings)) {
    if (!KEYS.includes(key)) throw new ArgumentError(`configure: unknown setting ${key}`);
  }
  const next: TurnKitDefaults = {
    ...current,
    ...(settings as Partial<TurnKitDefaults>),
    limits: Object.freeze({ ...current.limits, ...(settings.limits ?? {}) }),
    contextContributors: Object.freeze([...(settings.contextContributors ?? current.contextContributors)]),
    availableSkills: Object.freeze([...(settings.availableSkills ?? current.availableSkills)]),
  };
  checkCompactionSetting('configure', next.compaction);
  next.promptSections = resolvePromptSections('configure', next.promptSections);
  if (next.promptBehavior !== undefined && typeof next.promptBehavior !== 'string')
    throw new ArgumentError('configure: promptBehavior must be a string');
  resolveDataMaxChars('configure', next.promptDataMaxChars);
  resolveContributors('configure', next.contextContributors);
  if (typeof next.promptCache !== 'boolean')
    throw new ArgumentError('configure: promptCache must be a boolean');
  next.defaultModel = modelChain(next.defaultModel, 'configure: defaultModel');
  current = Object.freeze(next);
  return current;
}

/** The defaults in force now. */
export function globalDefaults(): TurnKitDefaults {
  return current;
}

/** Whether `configure` set the default model (else the built-in one stands). */
export function defaultModelConfigured(): boolean {
  return current.defaultModel !== BUILT_IN.defaultModel;
}

/** Back to the built-in defaults (for tests). */
export function resetConfiguration(): void {
  current = BUILT_IN;
}
