/**
 * TurnKit's compaction policy (spec §3.6): its keys and defaults, layered as defaults, then
 * global (`configure({compaction})`), then agent (`defineAgent({compaction})`), then an
 * override (manual `compact({...})`). `false` at any level disables it; `true` or absent
 * keeps the layers below; an unknown key is a ConfigError.
 */
import { ConfigError } from '../errors.js';
import type { ModelClient } from '../models/types.js';
import type { ModelChoice } from '../models/model-chain.js';
import { modelChain } from '../models/model-chain.js';

export interface CompactionPolicy {
  enabled: boolean;
  /** Fraction of the usable context at which automatic compaction runs. */
  threshold: number;
  contextLimit: number;
  reservedTokens: number;
  /** Oldest messages never summarized. */
  headMessages: number;
  /** Newest messages kept as they are (at most), and at most `tailTokens` of them. */
  tailMessages: number;
  tailTokens: number;
  /** Target summary length as a fraction of the summarized tokens, clamped to min/max. */
  summaryRatio: number;
  minSummaryTokens: number;
  maxSummaryTokens: number;
  /** Tool results longer than this are truncated for the summarizer. */
  toolOutputMaxChars: number;
  /** Summary model or fallback chain; absent → the turn's chain. */
  model: ModelChoice | null;
  /** Summary client; absent → the agent's, then the worker's. */
  client: ModelClient | null;
}

export type CompactionSetting = boolean | Partial<CompactionPolicy> | undefined | null;

export const DEFAULT_COMPACTION: Readonly<CompactionPolicy> = Object.freeze({
  enabled: true,
  threshold: 0.75,
  contextLimit: 128_000,
  reservedTokens: 20_000,
  headMessages: 0,
  tailMessages: 12,
  tailTokens: 8_000,
  summaryRatio: 0.2,
  minSummaryTokens: 1_000,
  maxSummaryTokens: 12_000,
  toolOutputMaxChars: 2_000,
  model: null,
  client: null,
});

const NUMBERS: readonly (keyof CompactionPolicy)[] = [
  'threshold',
  'contextLimit',
  'reservedTokens',
  'headMessages',
  'tailMessages',
  'tailTokens',
  'summaryRatio',
  'minSummaryTokens',
  'maxSummaryTokens',
  'toolOutputMaxChars',
];
const KEYS = Object.keys(DEFAULT_COMPACTION);

/** Checks one layer: a boolean, nothing, or an object of known keys with the right types. */
export function checkCompactionSetting(where: string, setting: unknown): CompactionSetting {
  if (setting === undefined || setting === null || typeof setting === 'boolean') return setting;
  if (typeof setting !== 'object' || Array.isArray(setting))
    throw new ConfigError(`${where}: compaction must be true, false or an object of policy keys`);
  for (const [key, value] of Object.entries(setting)) {
    if (!KEYS.includes(key))
      throw new ConfigError(`${where}: unknown compaction key ${key} (known: ${KEYS.join(', ')})`);
    if (NUMBERS.includes(key as keyof CompactionPolicy) && !(typeof value === 'number' && value >= 0))
      throw new ConfigError(`${where}: compaction ${key} must be a non-negative number`);
    if (key === 'enabled' && typeof value !== 'boolean')
      throw new ConfigError(`${where}: compaction enabled must be a boolean`);
    if (key === 'model' && value !== null) {
      try {
        modelChain(value as ModelChoice, `${where}: compaction model`);
      } catch (error) {
        throw new ConfigError((error as Error).message, { cause: error });
      }
    }
    if (key === 'client' && value !== null && typeof (value as ModelClient)?.chat !== 'function')
      throw new ConfigError(`${where}: compaction client must be a model client`);
  }
  return setting as Partial<CompactionPolicy>;
}

/** The effective policy of the layers, lowest first; null when any layer disables it. */
export function layerCompaction(layers: readonly CompactionSetting[]): CompactionPolicy | null {
  let policy: CompactionPolicy = { ...DEFAULT_COMPACTION };
  for (const layer of layers) {
    if (layer === false) return null;
    if (layer && typeof layer === 'object') policy = { ...policy, ...layer };
  }
  return policy.enabled ? policy : null;
}
