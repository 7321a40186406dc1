/**
 * What the `turnkit` command works against: the store, the Temporal connection and, for the
 * commands that need them, the application's agents module. Every failure here is a CliError
 * with one line a person can act on.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import type { Agent } from '../agents/agent.js';
import { AgentRegistry } from '../agents/registry.js';
import type { EvalVariant } from '../eval/evaluate.js';
import type { ScorerInput } from '../eval/scorers.js';
import type { ConsoleAuthHook } from '../console/handler.js';
import { payloadCodecsFromEnv } from '../codec/codec-keys.js';
import type { AuthorizationPolicy } from '../engine/runtime.js';
import { TurnKitError } from '../errors.js';
import type { ModelClient } from '../models/types.js';
import { openStore } from '../store/index.js';
import type { Store } from '../store/types.js';
import type { TemporalConnectConfig } from '../temporal-config.js';
import { temporalConnectConfig } from '../temporal-config.js';
import { EXIT_CODES } from './render.js';

/** A failure the command line reports as one line on stderr (with a stack only under --debug). */
export class CliError extends TurnKitError {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** A number flag, or a usage error (exit 2) that names it. */
export function numberFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (value.trim() === '' || !Number.isFinite(number))
    throw new CliError(`${flag} must be a number, got ${value}`, EXIT_CODES.usage);
  return number;
}

export interface GlobalOptions {
  store?: string;
  address?: string;
  namespace?: string;
  profile?: string;
  taskQueue?: string;
  agents?: string;
  ui?: string;
  json?: boolean;
  debug?: boolean;
}

/** What an agents module may export (named, or as its default export). */
export interface AgentsModule {
  agents: AgentRegistry;
  model?: ModelClient;
  store?: string | Store;
  authorization?: AuthorizationPolicy;
  defaultModel?: string;
  /** `turnkit eval`'s variants (`--variants A,B` names two) and scorers. */
  variants?: EvalVariant[];
  scorers?: ScorerInput[];
  /** The web console's auth hook (`turnkit console`): a request's principal, or undefined to refuse. */
  consoleAuth?: ConsoleAuthHook;
}

function isAgent(value: unknown): value is Agent {
  return typeof value === 'object' && value !== null && 'name' in value && 'limits' in value;
}

function registryOf(value: unknown): AgentRegistry | null {
  if (value instanceof AgentRegistry) return value;
  if (Array.isArray(value) && value.length > 0 && value.every(isAgent)) return new AgentRegistry(value);
  if (isAgent(value)) return new AgentRegistry([value]);
  return null;
}

/** Loads `--agents <module>`: it exports `agents` (an AgentRegistry or Agent[]) and optionally more. */
export async function loadAgentsModule(path: string): Promise<AgentsModule> {
  const file = resolve(path);
  if (!existsSync(file)) throw new CliError(`agents module ${path} does not exist`);
  let exported: Record<string, unknown>;
  try {
    exported = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new CliError(`agents module ${path} does not load: ${reason}`);
  }
  const fromDefault =
    exported['default'] && typeof exported['default'] === 'object' && !isAgent(exported['default'])
      ? (exported['default'] as Record<string, unknown>)
      : {};
  const pick = (key: string) => exported[key] ?? fromDefault[key];
  const agents = registryOf(pick('agents')) ?? registryOf(exported['default']);
  if (!agents) {
    throw new CliError(
      `agents module ${path} exports no agents: export \`agents\` (an AgentRegistry or an array of agents)`,
    );
  }
  const module: AgentsModule = { agents };
  const model = pick('model');
  if (model !== undefined) {
    if (typeof model !== 'object' || model === null || typeof (model as ModelClient).chat !== 'function') {
      throw new CliError(`agents module ${path}: \`model\` is not a model client (it has no chat())`);
    }
    module.model = model as ModelClient;
  }
  const store = pick('store');
  if (store !== undefined) module.store = store as string | Store;
  const authorization = pick('authorization');
  if (
    typeof authorization === 'function' ||
    (typeof authorization === 'object' && authorization !== null && 'authorize' in authorization)
  ) {
    module.authorization = authorization as AuthorizationPolicy;
  }
  const defaultModel = pick('defaultModel');
  if (typeof defaultModel === 'string') module.defaultModel = defaultModel;
  const variants = pick('variants');
  if (Array.isArray(variants)) module.variants = variants as EvalVariant[];
  const scorers = pick('scorers');
  if (Array.isArray(scorers)) module.scorers = scorers as ScorerInput[];
  const consoleAuth = pick('consoleAuth');
  if (consoleAuth !== undefined) {
    if (typeof consoleAuth !== 'function')
      throw new CliError(`agents module ${path}: \`consoleAuth\` is not a function (request → principal)`);
    module.consoleAuth = consoleAuth as ConsoleAuthHook;
  }
  return module;
}

/**
 * Temporal's env config (decision 44) under `--address`, `--namespace` and `--profile`; an
 * unknown profile or a config file that does not parse is a ConfigError naming it.
 */
function temporalConfig(options: GlobalOptions): TemporalConnectConfig {
  return temporalConnectConfig({
    address: options.address,
    namespace: options.namespace,
    profile: options.profile,
  });
}

export function temporalAddress(options: GlobalOptions): string {
  return temporalConfig(options).connectionOptions.address;
}

export function temporalNamespace(options: GlobalOptions): string {
  return temporalConfig(options).namespace;
}

export function uiUrl(options: GlobalOptions): string {
  return (options.ui ?? process.env['TEMPORAL_UI_URL'] ?? 'http://127.0.0.1:8233').replace(/\/$/, '');
}

/**
 * Opens the store: `--store`, else the agents module's, else TURNKIT_DATABASE_URL or the default
 * file. `existing`: a command that only acts on what the store holds never creates one (a
 * mistyped path is an error, and no file or folder is made).
 */
export async function openProjectStore(
  options: GlobalOptions,
  module?: AgentsModule,
  { existing = false }: { existing?: boolean } = {},
): Promise<Store> {
  if (!options.store && module?.store && typeof module.store === 'object') return module.store;
  const url = options.store ?? (typeof module?.store === 'string' ? module.store : undefined);
  try {
    return await openStore(url, existing ? { create: false } : {});
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const missing = existing && /there is no SQLite database/.test(reason);
    throw new CliError(
      `cannot open the store: ${reason}` +
        (missing
          ? ': check --store or TURNKIT_DATABASE_URL (`turnkit worker` and `turnkit run` create a store)'
          : ''),
    );
  }
}

/** TurnKit's encryption codec when TURNKIT_CODEC_KEYS is set (decision 75); a bad value is a usage error. */
export function cliPayloadCodecs(): PayloadCodec[] {
  try {
    return payloadCodecsFromEnv();
  } catch (error) {
    throw new CliError(error instanceof Error ? error.message : String(error), EXIT_CODES.usage);
  }
}

/** Connects to Temporal, failing within a few seconds with one line when nothing answers. */
export async function connectTemporal(
  options: GlobalOptions,
): Promise<{ client: Client; connection: Connection }> {
  const { connectionOptions, namespace } = temporalConfig(options);
  const address = connectionOptions.address;
  const payloadCodecs = cliPayloadCodecs();
  try {
    const connection = await Connection.connect({ ...connectionOptions, connectTimeout: '5 seconds' });
    return { connection, client: new Client({ connection, namespace, dataConverter: { payloadCodecs } }) };
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new CliError(`the Temporal server at ${address} does not answer: ${reason}`);
  }
}
