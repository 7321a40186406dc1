/**
 * Where the console's front end is (decision 62). An installed package serves the build it
 * ships (dist/console-app). A checkout has no build until `npm run build`, so `turnkit console`
 * builds the front end from console/ with vite on first use, into node_modules/.cache, and
 * again whenever a source file is newer than that build. Where neither is possible the error
 * says what to run.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { build as viteBuild } from 'vite';
import { ConfigError } from '../errors.js';

/** The build shipped in the package: dist/console-app next to dist/console. */
export function defaultConsoleAssetsDir(): string {
  return fileURLToPath(new URL('../console-app/', import.meta.url));
}

/** Whether `dir` holds a console build (its index.html). */
export function isConsoleBuild(dir: string): boolean {
  return existsSync(join(dir, 'index.html'));
}

/** The checkout this module runs from (it has console/vite.config.ts), or null in a package. */
function checkoutRoot(): string | null {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  return existsSync(join(root, 'console', 'vite.config.ts')) && existsSync(join(root, 'src', 'console'))
    ? root
    : null;
}

/** The newest modification time of the files under `dirs`. */
function newestMtime(dirs: readonly string[]): number {
  let newest = 0;
  const walk = (path: string) => {
    const stat = statSync(path);
    if (stat.isDirectory()) for (const entry of readdirSync(path)) walk(join(path, entry));
    else newest = Math.max(newest, stat.mtimeMs);
  };
  for (const dir of dirs) if (existsSync(dir)) walk(dir);
  return newest;
}

export const MISSING_ASSETS_FIX =
  'in a checkout run `npm run turnkit -- console` (it builds the front end) or `npm run build`; ' +
  'or pass --assets <dir> (assetsDir) naming a console build';

/**
 * The directory to serve: `given` (which must hold a build), else the packaged build, else in
 * a checkout a fresh build of console/ (built now when missing or older than its sources).
 */
export async function consoleAssets(
  options: { given?: string; log?: (line: string) => void } = {},
): Promise<string> {
  if (options.given !== undefined) {
    const dir = resolve(options.given);
    if (!isConsoleBuild(dir))
      throw new ConfigError(`no console build at ${dir} (no index.html): ${MISSING_ASSETS_FIX}`);
    return dir;
  }
  const packaged = defaultConsoleAssetsDir();
  const root = checkoutRoot();
  if (root === null) {
    if (isConsoleBuild(packaged)) return packaged;
    throw new ConfigError(`the console's front end is missing at ${packaged}: ${MISSING_ASSETS_FIX}`);
  }
  const outDir = join(root, 'node_modules', '.cache', 'turnkit', 'console-app');
  const newest = newestMtime(['console', 'src/console', 'src/ui'].map((dir) => join(root, dir)));
  // `npm run build`'s output when it is current, else this command's own build.
  for (const dir of [packaged, outDir])
    if (isConsoleBuild(dir) && statSync(join(dir, 'index.html')).mtimeMs >= newest) return dir;
  let build: typeof viteBuild;
  try {
    ({ build } = await import('vite'));
  } catch (error) {
    throw new ConfigError(
      `the console's front end is not built and vite is not installed (${(error as Error).message}): run \`npm ci\` in the checkout, then \`npm run turnkit -- console\``,
    );
  }
  options.log?.(
    `turnkit console: building the front end from ${join(root, 'console')} (a checkout, first run)…\n`,
  );
  await build({
    configFile: join(root, 'console', 'vite.config.ts'),
    build: { outDir, emptyOutDir: true },
    logLevel: 'error',
  });
  return outDir;
}
