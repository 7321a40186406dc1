/**
 * The connection options TurnKit builds from Temporal's env config (decision 44), read from a
 * real TOML file and a given environment: the profile's API key, TLS settings and gRPC metadata
 * reach them; explicit address and namespace win over the environment, which wins over the file.
 * No server: what a TLS or API-key connection gets is the options object itself.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { temporalConnectConfig } from '../../src/temporal-config.js';

const dir = mkdtempSync(join(tmpdir(), 'turnkit-envconfig-'));
const caFile = join(dir, 'ca.pem');
writeFileSync(caFile, '-----BEGIN CERTIFICATE-----\nCA OF THE TEST\n-----END CERTIFICATE-----\n');
const configFile = join(dir, 'temporal.toml');
writeFileSync(
  configFile,
  `[profile.default]
address = "file-default.example:7233"
namespace = "file-default-ns"

[profile.cloud]
address = "acme.tmprl.cloud:7233"
namespace = "acme.a1b2c"
api_key = "key-of-the-profile"

[profile.mtls]
address = "mtls.tmprl.cloud:7233"
namespace = "mtls.a1b2c"
[profile.mtls.tls]
server_name = "mtls.internal"
server_ca_cert_path = "${caFile}"
client_cert_data = "CERT OF THE TEST"
client_key_data = "KEY OF THE TEST"
[profile.mtls.grpc_meta]
x-team = "agents"

[profile.plain]
address = "plain.example:7233"
api_key = "key-over-plaintext"
[profile.plain.tls]
disabled = true
`,
);
const env = { TEMPORAL_CONFIG_FILE: configFile };
const text = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? []).toString('utf8');

describe('envconfig: connection options from the profile', () => {
  it('envconfig: a profile with an API key gives its address, namespace, the key and TLS on', () => {
    expect(temporalConnectConfig({ profile: 'cloud', env })).toEqual({
      connectionOptions: { address: 'acme.tmprl.cloud:7233', apiKey: 'key-of-the-profile', tls: true },
      namespace: 'acme.a1b2c',
    });
  });

  it("envconfig: a profile's TLS settings (server name, CA file, client pair) and gRPC metadata reach the options", () => {
    const { connectionOptions, namespace } = temporalConnectConfig({ profile: 'mtls', env });
    expect(namespace).toBe('mtls.a1b2c');
    expect(connectionOptions.address).toBe('mtls.tmprl.cloud:7233');
    expect(connectionOptions.apiKey).toBeUndefined();
    expect(connectionOptions.metadata).toEqual({ 'x-team': 'agents' });
    const tls = connectionOptions.tls;
    if (typeof tls !== 'object' || tls === null) throw new Error(`expected a TLS config, got ${String(tls)}`);
    expect(tls.serverNameOverride).toBe('mtls.internal');
    expect(text(tls.serverRootCACertificate)).toContain('CA OF THE TEST');
    expect(text(tls.clientCertPair?.crt)).toBe('CERT OF THE TEST');
    expect(text(tls.clientCertPair?.key)).toBe('KEY OF THE TEST');
  });

  it('envconfig: TLS disabled in the profile stays off even with an API key', () => {
    expect(temporalConnectConfig({ profile: 'plain', env }).connectionOptions).toEqual({
      address: 'plain.example:7233',
      apiKey: 'key-over-plaintext',
      tls: false,
    });
  });

  it('envconfig: TEMPORAL_API_KEY and TEMPORAL_TLS from the environment alone, without a file', () => {
    const config = temporalConnectConfig({
      env: {
        TEMPORAL_CONFIG_FILE: join(dir, 'no-such-file.toml'),
        TEMPORAL_ADDRESS: 'env.example:7233',
        TEMPORAL_API_KEY: 'key-of-the-env',
        TEMPORAL_TLS: 'true',
        TEMPORAL_TLS_SERVER_NAME: 'env.internal',
      },
    });
    expect(config.namespace).toBe('default');
    expect(config.connectionOptions).toMatchObject({
      address: 'env.example:7233',
      apiKey: 'key-of-the-env',
      tls: { serverNameOverride: 'env.internal' },
    });
  });

  it('envconfig: nothing configured is 127.0.0.1:7233 and namespace default, plain', () => {
    expect(temporalConnectConfig({ env: { TEMPORAL_CONFIG_FILE: join(dir, 'absent.toml') } })).toEqual({
      connectionOptions: { address: '127.0.0.1:7233' },
      namespace: 'default',
    });
  });

  it("envconfig: precedence is explicit options, then TEMPORAL_ADDRESS/NAMESPACE, then the file's profile", () => {
    // With no profile named, the file's `default` profile applies.
    expect(temporalConnectConfig({ env })).toEqual({
      connectionOptions: { address: 'file-default.example:7233' },
      namespace: 'file-default-ns',
    });
    const withEnv = { ...env, TEMPORAL_ADDRESS: 'env.example:7233', TEMPORAL_NAMESPACE: 'env-ns' };
    const fromEnv = temporalConnectConfig({ profile: 'cloud', env: withEnv });
    // The environment overrides the profile's address and namespace; its API key stays.
    expect(fromEnv).toEqual({
      connectionOptions: { address: 'env.example:7233', apiKey: 'key-of-the-profile', tls: true },
      namespace: 'env-ns',
    });
    const explicit = temporalConnectConfig({
      profile: 'cloud',
      address: 'flag.example:7233',
      namespace: 'flag-ns',
      env: withEnv,
    });
    expect(explicit.connectionOptions.address).toBe('flag.example:7233');
    expect(explicit.namespace).toBe('flag-ns');
    expect(explicit.connectionOptions.apiKey).toBe('key-of-the-profile');
    // TEMPORAL_PROFILE names the profile when none is passed; a passed one wins.
    expect(temporalConnectConfig({ env: { ...env, TEMPORAL_PROFILE: 'cloud' } }).namespace).toBe(
      'acme.a1b2c',
    );
    expect(
      temporalConnectConfig({ profile: 'mtls', env: { ...env, TEMPORAL_PROFILE: 'cloud' } }).namespace,
    ).toBe('mtls.a1b2c');
  });
});

describe('envconfig: bad configuration is a ConfigError naming it', () => {
  it('envconfig: a missing profile, passed or from TEMPORAL_PROFILE, names itself and the file', () => {
    const missing = () => temporalConnectConfig({ profile: 'staging', env });
    expect(missing).toThrow(ConfigError);
    expect(missing).toThrow(`Temporal profile "staging" is not in the Temporal config file ${configFile}`);
    expect(() => temporalConnectConfig({ env: { ...env, TEMPORAL_PROFILE: 'prod' } })).toThrow(
      /Temporal profile "prod" is not in/,
    );
  });

  it('envconfig: a config file that does not parse, or a missing TLS file, is a ConfigError', () => {
    const broken = join(dir, 'broken.toml');
    writeFileSync(broken, '[profile.default\naddress = ');
    expect(() => temporalConnectConfig({ env: { TEMPORAL_CONFIG_FILE: broken } })).toThrow(ConfigError);
    const missingCa = join(dir, 'missing-ca.toml');
    writeFileSync(missingCa, `[profile.default.tls]\nserver_ca_cert_path = "${join(dir, 'nope.pem')}"\n`);
    expect(() => temporalConnectConfig({ env: { TEMPORAL_CONFIG_FILE: missingCa } })).toThrow(
      /cannot load the Temporal config file .*missing-ca\.toml/,
    );
  });
});
