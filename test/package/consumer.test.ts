/**
 * The package as a user gets it: `npm pack` (which builds through `prepack`), installed into a
 * fresh app of its own, the README's "Using it" code block type-checked and run there against
 * the dev server, on Node 24 and on the oldest Node 22 it runs on (provisioned from PyPI).
 */
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { requireTemporal, temporalAddress, temporalNamespace } from '../helpers/temporal.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
// engines says >=22; the SQLite store (better-sqlite3 13's prebuilt binary) needs 22.14.
const FLOOR_NODE = '22.14.0';
const TOO_OLD_FOR_SQLITE = '22.13.1';
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/** The first ```ts block under "## Using it", exactly as README.md has it now. */
function readmeExample(): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Using it\n'));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  if (!match) throw new Error('README.md has no ```ts block under "## Using it"');
  return match[1]!;
}

/** Runs `node <script>` in the app (default example.ts); resolves with its output once it exits by itself. */
function runExample(app: string, node: string, args: string[], queue: string, script = 'example.ts') {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
    const child = spawn(node, [...args, script], {
      cwd: app,
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: temporalAddress(),
        TEMPORAL_NAMESPACE: temporalNamespace(),
        TURNKIT_TASK_QUEUE: queue,
        TURNKIT_DATABASE_URL: join(app, `.turnkit/${queue}.sqlite`),
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

/** Entry points and the runtime names each exports: the snapshot api-surface.test.ts keeps. */
const surface = JSON.parse(readFileSync(join(import.meta.dirname, 'api-surface.json'), 'utf8')) as Record<
  string,
  { values: string[] }
>;
const PUBLIC_API = Object.fromEntries(Object.entries(surface).map(([entry, { values }]) => [entry, values]));

describe.skipIf(!(await requireTemporal()))('the published package', () => {
  let app = '';
  let floorNode = '';
  let oldNode = '';

  beforeAll(async () => {
    const work = mkdtempSync(join(tmpdir(), 'turnkit-consumer-'));
    const packed = await run('npm', ['pack', '--pack-destination', work], { cwd: root });
    const tarball = join(work, packed.stdout.trim().split('\n').pop()!);
    app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({ name: 'readme-app', private: true, type: 'module' }, null, 2),
    );
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          target: 'es2022',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          allowImportingTsExtensions: true,
          types: ['node'],
        },
        include: ['example.ts', 'public-api.ts', 'plugin-worker.ts', 'plugin-workflows.ts'],
      }),
    );
    writeFileSync(join(app, 'example.ts'), readmeExample());
    for (const file of ['public-api.ts', 'plugin-worker.ts', 'plugin-workflows.ts'])
      copyFileSync(join(import.meta.dirname, 'fixtures', file), join(app, file));
    await run(
      'npm',
      [
        'install',
        '--no-audit',
        '--no-fund',
        '--prefer-offline',
        tarball,
        `zod@${pkg.dependencies['zod']}`,
        `typescript@${pkg.devDependencies['typescript']}`,
        `@types/node@${pkg.devDependencies['@types/node']}`,
      ],
      { cwd: app },
    );
    const provision = async (version: string) => {
      const dir = join(root, `.node-${version}`);
      await run('bash', ['-c', `source scripts/node.sh && provision_node ${version} "${dir}"`], {
        cwd: root,
      });
      return join(dir, 'bin/node');
    };
    floorNode = await provision(FLOOR_NODE);
    oldNode = await provision(TOO_OLD_FOR_SQLITE);
  }, 300_000);

  it('README example in a fresh app: the example and the public API pins type-check against the installed package', async () => {
    const tsc = await run(process.execPath, [join(app, 'node_modules/typescript/bin/tsc'), '-p', app]).catch(
      (error: { stdout: string }) => error,
    );
    expect(tsc.stdout).toBe('');
  });

  it('README example in a fresh app: the turn completes on Node 24 (workflows bundled from node_modules/turnkit)', async () => {
    expect(process.versions.node.split('.')[0]).toBe('24');
    const result = await runExample(app, process.execPath, [], `readme-24-${process.pid}-${Date.now()}`);
    expect(result.stderr).not.toMatch(/Error/);
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe('completed Durable: lasting. 0 4');
  });

  it(`README example in a fresh app: the turn completes on Node ${FLOOR_NODE}, the oldest Node 22 the SQLite store runs on`, async () => {
    const version = (await run(floorNode, ['-v'])).stdout.trim();
    expect(version).toBe(`v${FLOOR_NODE}`);
    const result = await runExample(
      app,
      floorNode,
      ['--experimental-strip-types', '--no-warnings'],
      `readme-22-${process.pid}-${Date.now()}`,
    );
    expect(result.stderr).not.toMatch(/Error/);
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe('completed Durable: lasting. 0 4');
  });

  it('temporal app: an application worker built from the packed tarball, with TurnKitPlugin, runs its own workflow that calls an agent', async () => {
    const result = await runExample(
      app,
      process.execPath,
      [],
      `plugin-24-${process.pid}-${Date.now()}`,
      'plugin-worker.ts',
    );
    expect(result.stderr).not.toMatch(/Error/);
    expect(result.code).toBe(0);
    expect(result.stdout.trim().split('\n').pop()).toBe('completed Durable: lasting.');
  });

  it(`on Node ${TOO_OLD_FOR_SQLITE} the SQLite store is a ConfigError that says what to do, not a crash`, async () => {
    const result = await runExample(
      app,
      oldNode,
      ['--experimental-strip-types', '--no-warnings'],
      `readme-old-${process.pid}-${Date.now()}`,
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('ConfigError: the SQLite store needs Node >= 22.14 (this is 22.13.1)');
    expect(result.stderr).toContain('use PostgreSQL');
  });

  it('each entry point exports exactly the pinned public API, and internals are not reachable', async () => {
    const script = `
      const entries = ${JSON.stringify(Object.keys(PUBLIC_API))};
      const out = {};
      for (const entry of entries) out[entry] = Object.keys(await import(entry)).sort();
      for (const internal of ['turnkit/dist/store/fenced-store.js', 'turnkit/store/wait-graph', 'turnkit/dist/index.js']) {
        try { await import(internal); out[internal] = 'reachable'; } catch (error) { out[internal] = error.code; }
      }
      console.log(JSON.stringify(out));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app });
    const exported = JSON.parse(stdout) as Record<string, unknown>;
    for (const [entry, names] of Object.entries(PUBLIC_API))
      expect(exported[entry], entry).toEqual([...names].sort());
    expect(exported['turnkit/dist/store/fenced-store.js']).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
    expect(exported['turnkit/store/wait-graph']).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
    expect(exported['turnkit/dist/index.js']).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
    const all = Object.values(exported).flat();
    for (const internal of ['FencedStore', 'addWaits', 'waitsReady', 'deliver', 'Runtime'])
      expect(all).not.toContain(internal);
    const shipped = readdirSync(join(app, 'node_modules/turnkit'));
    expect(shipped).toEqual(expect.arrayContaining(['dist', 'package.json', 'README.md']));
    expect(shipped).not.toContain('test');
    // The web console is built into the package: `turnkit console` serves it, nothing is fetched.
    expect(readdirSync(join(app, 'node_modules/turnkit/dist/console-app'))).toEqual(
      expect.arrayContaining(['index.html', 'assets']),
    );
  });

  it('the installed package has the turnkit command: --help lists its commands, a bad turn id is one line', async () => {
    const bin = join(app, 'node_modules/.bin/turnkit');
    const help = await run(bin, ['--help'], { cwd: app });
    for (const command of [
      'worker',
      'run',
      'ls',
      'show',
      'watch',
      'cancel',
      'pending',
      'approve',
      'reject',
      'pause',
      'resume',
      'steer',
      'send',
      'console',
    ])
      expect(help.stdout).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    // A read-only command never creates a store: this one is made first, by the package itself.
    const storeFile = join(app, 'cli.sqlite');
    await run(
      process.execPath,
      [
        '-e',
        `import('turnkit/store').then(async (m) => (await m.openStore(${JSON.stringify(storeFile)})).close())`,
      ],
      { cwd: app },
    );
    const missing = await run(bin, ['--store', storeFile, 'show', 'turn_000000000000000000000000'], {
      cwd: app,
    }).catch((error: { code: number; stderr: string }) => error);
    expect(missing).toMatchObject({
      code: 1,
      stderr: `turnkit: no turn turn_000000000000000000000000 in the store ${storeFile} (another store? pass --store or set TURNKIT_DATABASE_URL)\n`,
    });
  });
});
