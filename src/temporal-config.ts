/**
 * Where TurnKit connects to Temporal (docs/decisions/044-temporal-envconfig.md): through Temporal's own
 * env config (`@temporalio/envconfig`), so a profile of the TOML file (TEMPORAL_CONFIG_FILE, else
 * ~/.config/temporalio/temporal.toml), TEMPORAL_PROFILE, TEMPORAL_API_KEY, the TEMPORAL_TLS*
 * variables and TEMPORAL_GRPC_META_* reach workers, clients and the CLI the way they reach
 * Temporal's SDKs and CLI. Precedence, as in Temporal's docs: an explicit option (`--address`,
 * `--namespace`, `address:`, `namespace:`) wins over the environment, which wins over the file's
 * profile, which wins over the defaults 127.0.0.1:7233 and `default`.
 */
import type { NativeConnectionOptions } from '@temporalio/worker';
import { loadClientConfigProfile, toClientOptions } from '@temporalio/envconfig';
import { ConfigError } from './errors.js';

const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';
const DEFAULT_TEMPORAL_NAMESPACE = 'default';

/** What a caller says about the Temporal it wants; anything left out comes from the env config. */
export interface TemporalTarget {
  /** Temporal frontend; wins over the profile and TEMPORAL_ADDRESS. */
  address?: string | undefined;
  /** Temporal namespace; wins over the profile and TEMPORAL_NAMESPACE. */
  namespace?: string | undefined;
  /** A profile of Temporal's config file; default TEMPORAL_PROFILE, else `default` (when present). */
  profile?: string | undefined;
  /** The environment to read, default `process.env` (tests pass their own). */
  env?: Record<string, string | undefined>;
}

/** The options both `Connection.connect` and `NativeConnection.connect` take. */
type TemporalConnectionOptions = Pick<NativeConnectionOptions, 'apiKey' | 'tls' | 'metadata'> & {
  address: string;
};

export interface TemporalConnectConfig {
  connectionOptions: TemporalConnectionOptions;
  namespace: string;
}

/** The env config's client options for the profile (the file, then the environment on top). */
function loadConnectConfig(target: TemporalTarget, env: Record<string, string | undefined>) {
  const profile = target.profile ?? env['TEMPORAL_PROFILE'];
  const file = env['TEMPORAL_CONFIG_FILE'];
  const where = file ? `the Temporal config file ${file} (TEMPORAL_CONFIG_FILE)` : "Temporal's config file";
  try {
    const loaded = loadClientConfigProfile({
      ...(profile ? { profile } : {}),
      overrideEnvVars: Object.fromEntries(
        Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined),
      ),
    });
    // Reads the TLS files the profile names: a missing one fails here too.
    return toClientOptions(loaded);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (profile && /^Profile '.*' not found/.test(reason))
      throw new ConfigError(`Temporal profile "${profile}" is not in ${where}`);
    throw new ConfigError(`cannot load ${where}${profile ? `, profile "${profile}"` : ''}: ${reason}`);
  }
}

/**
 * The connection options and namespace for `target`: the env config's profile (file and
 * environment), with the target's explicit address and namespace on top. An unknown profile or a
 * file that does not parse is a ConfigError naming it.
 */
export function temporalConnectConfig(target: TemporalTarget = {}): TemporalConnectConfig {
  const env = target.env ?? process.env;
  const { connectionOptions, namespace } = loadConnectConfig(target, env);
  const options: TemporalConnectionOptions = {
    address: target.address ?? connectionOptions.address ?? DEFAULT_TEMPORAL_ADDRESS,
  };
  if (connectionOptions.apiKey !== undefined) options.apiKey = connectionOptions.apiKey;
  if (connectionOptions.tls != null) options.tls = connectionOptions.tls;
  if (connectionOptions.metadata) options.metadata = connectionOptions.metadata;
  return {
    connectionOptions: options,
    namespace: target.namespace ?? namespace ?? DEFAULT_TEMPORAL_NAMESPACE,
  };
}
