/**
 * Output policies (spec §3.11): rules an LLM judge checks the output against, written in code
 * or in a markdown file, plus the deterministic `requireImage` / `requireMediaAnalysis`.
 * Deterministic constraints are plain functions (`OutputConstraint`) or `{ check }` objects.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, extname } from 'node:path';
import { ArgumentError, ConfigError } from '../errors.js';
import type { ModelClient, Thinking } from '../models/types.js';
import type { ModelChoice } from '../models/model-chain.js';
import { optionalModelChain } from '../models/model-chain.js';
import type { Json, JsonObject, TurnRecord } from '../store/types.js';

export interface OutputViolation {
  rule: string;
  message: string;
  metadata?: JsonObject;
}

export type ConstraintResult =
  | void
  | null
  | boolean
  | string
  | Partial<OutputViolation>
  | { clean: boolean; violations: readonly Partial<OutputViolation>[] }
  | readonly ConstraintResult[];

/** What a constraint receives besides the output (structured output when there is one, else the text). */
export interface ConstraintContext {
  turn: TurnRecord | null;
  outputText: string | null;
  outputData: Json;
}

/** A deterministic output check: return nothing/true/false when fine, else violation(s). */
export type OutputConstraint = (
  output: Json,
  context: ConstraintContext,
) => ConstraintResult | Promise<ConstraintResult>;

/** A constraint as an object with `check` (TurnKit's duck type). */
export interface OutputCheck {
  check: OutputConstraint;
}

export type OutputPolicyKind = 'llm' | 'require_image' | 'require_media_analysis';

/** An LLM-judged policy, or one of the deterministic media requirements. */
export interface OutputPolicy {
  readonly kind: OutputPolicyKind;
  /** The default rule of its violations. */
  readonly name: string;
  /** The policy text the judge applies (null for the media requirements). */
  readonly content: string | null;
  /**
   * The judge's model or fallback chain; else the agent's `outputPolicyModel`, the
   * runtime's, the turn's chain.
   */
  readonly model: readonly string[] | undefined;
  /** The judge's thinking; else the agent's `outputPolicyThinking`, the runtime's, `{effort: 'low'}`. */
  readonly thinking: Thinking | null | undefined;
  /** The judge's client; else the agent's client, else the worker's. */
  readonly client: ModelClient | undefined;
}

export interface OutputPolicyOptions {
  content: string;
  name?: string;
  model?: ModelChoice;
  thinking?: Thinking | null;
  client?: ModelClient;
}

const POLICY_FILE = /\.(md|markdown|txt)$/i;

function freezePolicy(policy: OutputPolicy): OutputPolicy {
  return Object.freeze(policy);
}

/** An LLM-judged output policy defined in code. */
export function outputPolicy(options: OutputPolicyOptions): OutputPolicy {
  if (!options || typeof options.content !== 'string' || options.content.trim() === '') {
    throw new ArgumentError('an output policy needs non-empty content');
  }
  if (options.name !== undefined && (typeof options.name !== 'string' || options.name.trim() === '')) {
    throw new ArgumentError('an output policy name must be a non-empty string');
  }
  return freezePolicy({
    kind: 'llm',
    name: options.name ?? 'output_policy',
    content: options.content,
    model: optionalModelChain(options.model, 'an output policy model'),
    thinking: options.thinking,
    client: options.client,
  });
}

/** Splits `---` YAML front matter off a policy file, keeping a `name:` if it has one. */
function frontMatter(text: string): { name?: string; body: string } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(text);
  if (!match) return { body: text };
  const name = /^name:\s*["']?(.+?)["']?\s*$/m.exec(match[1]!)?.[1];
  return { ...(name ? { name } : {}), body: text.slice(match[0].length) };
}

/**
 * An LLM-judged policy from a `.md`, `.markdown` or `.txt` file, read once at definition: a
 * missing or empty file is a ConfigError at boot, never a stuck turn.
 */
export function outputPolicyFromFile(path: string, options: Omit<OutputPolicyOptions, 'content'> = {}) {
  if (typeof path !== 'string' || !POLICY_FILE.test(path)) {
    throw new ArgumentError(
      `an output policy file must end in .md, .markdown or .txt: ${JSON.stringify(path)}`,
    );
  }
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw new ConfigError(`output policy file not found: ${path}`);
  }
  const { name, body } = frontMatter(readFileSync(path, 'utf8'));
  if (body.trim() === '') throw new ConfigError(`output policy file is empty: ${path}`);
  return outputPolicy({
    ...options,
    content: body.trim(),
    name: options.name ?? name ?? basename(path, extname(path)),
  });
}

/** The output must include an image the turn produced (an `image` message, or image output data). */
export function requireImage(): OutputPolicy {
  return freezePolicy({
    kind: 'require_image',
    name: 'require_image',
    content: null,
    model: undefined,
    thinking: undefined,
    client: undefined,
  });
}

/** The output must include a media analysis the turn produced. */
export function requireMediaAnalysis(): OutputPolicy {
  return freezePolicy({
    kind: 'require_media_analysis',
    name: 'require_media_analysis',
    content: null,
    model: undefined,
    thinking: undefined,
    client: undefined,
  });
}

export function isOutputPolicy(value: unknown): value is OutputPolicy {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as OutputPolicy).kind === 'string' &&
    ['llm', 'require_image', 'require_media_analysis'].includes((value as OutputPolicy).kind) &&
    typeof (value as OutputPolicy).name === 'string'
  );
}

/** What `defineAgent({ outputPolicy })` accepts: a policy, a policy file path, a constraint, `{ check }`. */
export type OutputPolicyOption = OutputPolicy | string | OutputConstraint | OutputCheck;

/** Sorts `outputPolicy` entries into judged/media policies and deterministic constraints. */
export function resolveOutputPolicies(
  agent: string,
  option: OutputPolicyOption | readonly OutputPolicyOption[] | undefined | null,
): { policies: OutputPolicy[]; constraints: OutputConstraint[] } {
  const entries = option === undefined || option === null ? [] : Array.isArray(option) ? option : [option];
  const policies: OutputPolicy[] = [];
  const constraints: OutputConstraint[] = [];
  (entries as readonly OutputPolicyOption[]).forEach((entry, index) => {
    if (typeof entry === 'string') {
      if (!POLICY_FILE.test(entry)) {
        throw new ArgumentError(
          `agent ${agent}: outputPolicy[${index}] is a string but not a .md/.markdown/.txt path`,
        );
      }
      policies.push(outputPolicyFromFile(entry));
    } else if (isOutputPolicy(entry)) policies.push(entry);
    else if (typeof entry === 'function') constraints.push(entry);
    else if (entry && typeof entry === 'object' && typeof (entry as OutputCheck).check === 'function') {
      const check = entry as OutputCheck;
      constraints.push((output, context) => check.check(output, context));
    } else {
      throw new ArgumentError(
        `agent ${agent}: outputPolicy[${index}] is not a policy, a policy file, a function or a { check } object`,
      );
    }
  });
  return { policies, constraints };
}
