/**
 * Temporal's env config against the real dev server (decision 44): a TOML file
 * (TEMPORAL_CONFIG_FILE) whose `dev` profile names the server, and whose `default` profile names
 * an address where nothing listens. createWorker and TurnKitClient.connect given no address
 * connect through the profile and run a turn; `turnkit ls --profile dev` finds it; `--address`
 * wins over the profile; an unknown profile is a ConfigError naming it.
 */
import type { Connection } from '@temporalio/client';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { ConfigError } from '../../src/errors.js';
import type { ModelClient } from '../../src/models/types.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import { runCli } from '../helpers/cli.js';
import { requireTemporal, temporalAddress, temporalNamespace } from '../helpers/temporal.js';
import { waitUntil } from '../helpers/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'turnkit-envconfig-'));
const configFile = join(dir, 'temporal.toml');
const server = temporalAddress();
const namespace = temporalNamespace();
const nowhere = '127.0.0.1:1';
const agentName = `envconfig-${process.pid}-${Date.now()}`;
const taskQueue = `turnkit-envconfig-${process.pid}-${Date.now()}`;

writeFileSync(
  configFile,
  `[profile.default]
address = "${nowhere}"
namespace = "${namespace}"

[profile.dev]
address = "${server}"
namespace = "${namespace}"

[profile.keyed]
address = "${server}"
namespace = "${namespace}"
api_key = "key-of-the-test"
[profile.keyed.tls]
disabled = true
[profile.keyed.grpc_meta]
x-turnkit-test = "envconfig"
`,
);

// The environment of this process and of the commands: the file, and no TEMPORAL_* that would
// win over it (the environment overrides the file's profile, as in Temporal's docs).
const ENV_KEYS = [
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'TEMPORAL_PROFILE',
  'TEMPORAL_API_KEY',
  'TEMPORAL_TLS',
];
const saved = Object.fromEntries(ENV_KEYS.map((key) => [key, process.env[key]]));
const childEnv = (extra: Record<string, string> = {}) => {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const key of ENV_KEYS) delete env[key];
  return {
    ...env,
    TEMPORAL_CONFIG_FILE: configFile,
    // The store the in-process worker and client use (opened in beforeAll): `ls` marks turns it holds.
    TURNKIT_DATABASE_URL: join(dir, 'in-process.sqlite'),
    TURNKIT_TASK_QUEUE: taskQueue,
    NO_COLOR: '1',
    ...extra,
  };
};

const turnkit = (args: string[], extra: Record<string, string> = {}) => runCli(args, childEnv(extra), dir);

const model: ModelClient = {
  async chat() {
    return {
      parts: [{ type: 'text', text: 'answered through the profile' }],
      usage: { inputTokens: 1, outputTokens: 1 },
    };
  },
};

const online = await requireTemporal();
let store: Store;

beforeAll(async () => {
  for (const key of ENV_KEYS) delete process.env[key];
  process.env['TEMPORAL_CONFIG_FILE'] = configFile;
  store = await openStore(join(dir, 'in-process.sqlite'));
});

afterAll(async () => {
  await store?.close();
  delete process.env['TEMPORAL_CONFIG_FILE'];
  for (const [key, value] of Object.entries(saved)) if (value !== undefined) process.env[key] = value;
});

describe.skipIf(!online)('envconfig: the dev server through a TOML profile', () => {
  it('envconfig: createWorker and TurnKitClient.connect without an address use the profile; turnkit ls --profile dev lists the turn', async () => {
    const agents = new AgentRegistry([defineAgent({ name: agentName })]);
    const worker = await createWorker({ store, agents, model, taskQueue, profile: 'dev' });
    expect(worker.worker.options.namespace).toBe(namespace);
    const running = worker.run();
    // The client names its profile through TEMPORAL_PROFILE, as Temporal's SDKs read it.
    process.env['TEMPORAL_PROFILE'] = 'dev';
    const client = await TurnKitClient.connect({ store, agents, taskQueue }).finally(
      () => delete process.env['TEMPORAL_PROFILE'],
    );
    try {
      expect((client.temporal.connection as Connection).options.address).toBe(server);
      const run = await client.run(agentName, 'Answer through the profile');
      const turn = await run.result();
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('answered through the profile');

      let listed: { turnId: string; agent: string }[] = [];
      await waitUntil(async () => {
        const result = await turnkit(['--json', 'ls', '--profile', 'dev', '--agent', agentName]);
        expect(result.stderr).toBe('');
        listed = JSON.parse(result.stdout) as typeof listed;
        return listed.some((row) => row.turnId === run.turnId);
      }, 30_000);
      expect(listed.every((row) => row.agent === agentName)).toBe(true);
    } finally {
      await client.close();
      worker.shutdown();
      await running;
    }
  });

  it("envconfig: without --profile the file's default profile applies; --address wins over it, and so does TEMPORAL_ADDRESS", async () => {
    const fallback = await turnkit(['ls', '--agent', agentName]);
    expect(fallback.code).not.toBe(0);
    expect(fallback.stderr).toContain(`the Temporal server at ${nowhere} does not answer`);
    const flag = await turnkit(['ls', '--profile', 'default', '--address', server, '--agent', agentName]);
    expect(flag.stderr).toBe('');
    expect(flag.code).toBe(0);
    const env = await turnkit(['ls', '--agent', agentName], { TEMPORAL_ADDRESS: server });
    expect(env.stderr).toBe('');
    expect(env.code).toBe(0);
  });

  it("envconfig: a profile's API key and gRPC metadata reach the connection TurnKitClient.connect opens", async () => {
    const client = await TurnKitClient.connect({ store, agents: new AgentRegistry(), profile: 'keyed' });
    try {
      const connection = client.temporal.connection as Connection;
      // The key the SDK sends as `Authorization: Bearer` on every call (a private field, read here).
      expect(connection['apiKeyFnRef'].fn?.()).toBe('key-of-the-test');
      expect(connection.options.metadata).toMatchObject({ 'x-turnkit-test': 'envconfig' });
      expect(client.temporal.options.namespace).toBe(namespace);
      // The dev server accepts the key (it checks none): the connection works.
      const info = await connection.workflowService.getSystemInfo({});
      expect(info.capabilities).toBeTruthy();
    } finally {
      await client.close();
    }
  });
});

describe('envconfig: an unknown profile', () => {
  it('envconfig: is a ConfigError naming it, from createWorker, TurnKitClient.connect and the CLI, before any connection', async () => {
    const agents = new AgentRegistry([defineAgent({ name: agentName })]);
    await expect(createWorker({ store, agents, model, taskQueue, profile: 'staging' })).rejects.toThrow(
      new ConfigError(
        `Temporal profile "staging" is not in the Temporal config file ${configFile} (TEMPORAL_CONFIG_FILE)`,
      ),
    );
    await expect(TurnKitClient.connect({ store, agents, profile: 'staging' })).rejects.toBeInstanceOf(
      ConfigError,
    );
    const cli = await turnkit(['ls', '--profile', 'staging']);
    expect(cli.code).toBe(1);
    expect(cli.stderr.trim()).toBe(
      `turnkit: ConfigError: Temporal profile "staging" is not in the Temporal config file ${configFile} (TEMPORAL_CONFIG_FILE)`,
    );
    const worker = await turnkit(['worker', '--profile', 'staging'], {
      TURNKIT_AGENTS: join(root, 'test/fixtures/cli-agents.ts'),
    });
    expect(worker.code).toBe(1);
    expect(worker.stderr).toContain('Temporal profile "staging" is not in');
  });
});
