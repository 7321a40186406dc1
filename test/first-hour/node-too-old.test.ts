/**
 * Issue 45, the first hour: on a Node too old for the SQLite store (the machine's Node 20 on a
 * checkout where `npm run demo` provisioned Node 24 into .node/bin), opening the store says
 * exactly what to run and leaves no empty database behind.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const TOO_OLD_FOR_SQLITE = '22.13.1';

/** A Node older than 22.14: the machine's when it is (Node 20 here), else one provisioned as the scripts do. */
async function oldNode(): Promise<string> {
  const machine = await exec('bash', ['-c', 'command -v node && node -p process.versions.node'], {
    env: { ...process.env, PATH: '/usr/local/bin:/usr/bin:/bin' },
  }).then(
    ({ stdout }) => stdout.trim().split('\n'),
    () => [],
  );
  const [path, version = ''] = machine;
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (path && (major < 22 || (major === 22 && minor < 14))) return path;
  const dir = mkdtempSync(join(tmpdir(), 'turnkit-old-node-'));
  await exec('bash', ['-c', `source scripts/node.sh && provision_node ${TOO_OLD_FOR_SQLITE} "${dir}"`], {
    cwd: root,
  });
  return join(dir, 'bin/node');
}

let node = '';
beforeAll(async () => {
  node = await oldNode();
}, 300_000);

describe('first hour: a Node too old for the SQLite store', () => {
  it('first hour: in a checkout with .node/bin, opening the store says to export PATH with .node/bin and creates no file', async () => {
    const checkout = mkdtempSync(join(tmpdir(), 'turnkit-checkout-'));
    mkdirSync(join(checkout, '.node/bin'), { recursive: true });
    writeFileSync(join(checkout, '.node/bin/node'), '');
    const script = join(checkout, 'open.mjs');
    const store = pathToFileURL(join(root, 'src/store/index.ts')).href;
    writeFileSync(
      script,
      `const { openStore } = await import(${JSON.stringify(store)});\nawait openStore('.turnkit/reviewers.sqlite');\n`,
    );
    const result = await exec(
      node,
      ['--import', pathToFileURL(join(root, 'node_modules/tsx/dist/loader.mjs')).href, script],
      { cwd: checkout },
    ).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/ConfigError: the SQLite store needs Node >= 22\.14 \(this is (20|22)\./);
    expect(result.stderr).toContain('run `export PATH="$PWD/.node/bin:$PATH"`, then the same command again');
    // Nothing was written: no empty database, not even its folder.
    expect(existsSync(join(checkout, '.turnkit')) ? readdirSync(join(checkout, '.turnkit')) : []).toEqual([]);
  }, 120_000);
});
