/**
 * The web console's assets for the tests, built with vite's API from console/ into a temp
 * directory: the tests never depend on an earlier `npm run build`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');

export async function buildConsoleAssets(): Promise<string> {
  const { build } = await import('vite');
  const outDir = join(mkdtempSync(join(tmpdir(), 'turnkit-console-')), 'app');
  await build({
    configFile: join(root, 'console/vite.config.ts'),
    build: { outDir, emptyOutDir: true },
    logLevel: 'error',
  });
  return outDir;
}
