/**
 * The workflow code a worker runs: bundled from source at boot, or the prebuilt bundles that
 * `npm run build` writes into `dist/` (docs/operations.md; docs/decisions/034-bundles-and-worker-versioning.md).
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { ArgumentError } from './errors.js';
import { OTEL_WORKFLOW_INTERCEPTORS } from './worker-tracing.js';

/** The workflow entry point, whether running from compiled JavaScript or from source. */
export function turnWorkflowsPath(): string {
  const js = fileURLToPath(new URL('./workflows/index.js', import.meta.url));
  return existsSync(js) ? js : fileURLToPath(new URL('./workflows/index.ts', import.meta.url));
}

/**
 * TurnKit's failure converter (decision 81): in the workflow bundle and for activities, so a
 * failure's message travels in a payload the codecs seal.
 */
export function turnFailureConverterPath(): string {
  const js = fileURLToPath(new URL('./codec/failure-converter.js', import.meta.url));
  return existsSync(js) ? js : fileURLToPath(new URL('./codec/failure-converter.ts', import.meta.url));
}

let bundled: Promise<{ code: string }> | undefined;
let bundledTraced: Promise<{ code: string }> | undefined;

/**
 * Bundles TurnKit's workflows once per process (bundling takes seconds); `traced`: with
 * Temporal's OpenTelemetry workflow interceptors (a bundle of its own).
 */
export function bundleTurnWorkflows(options: { traced?: boolean } = {}): Promise<{ code: string }> {
  if (options.traced) {
    bundledTraced ??= bundleWorkflowCode({
      workflowsPath: turnWorkflowsPath(),
      failureConverterPath: turnFailureConverterPath(),
      workflowInterceptorModules: [OTEL_WORKFLOW_INTERCEPTORS],
      logger: quietBundlerLogger,
    }).catch(forget(() => (bundledTraced = undefined)));
    return bundledTraced;
  }
  bundled ??= bundleWorkflowCode({
    workflowsPath: turnWorkflowsPath(),
    failureConverterPath: turnFailureConverterPath(),
    logger: quietBundlerLogger,
  }).catch(forget(() => (bundled = undefined)));
  return bundled;
}

/** A failed bundle is not cached: the next worker bundles again. */
const forget =
  (clear: () => void) =>
  (error: unknown): never => {
    clear();
    throw error;
  };

/** The prebuilt bundles' file names, in `dist/` of the package (`npm run build` writes them). */
export const WORKFLOW_BUNDLE_FILES = {
  plain: 'workflow-bundle.js',
  traced: 'workflow-bundle-traced.js',
} as const;

/**
 * Writes both workflow bundles, plain and traced, into `dir` (`npm run build` does this for
 * `dist/`, see scripts/build-workflow-bundles.mjs); returns their paths.
 */
export async function writeTurnWorkflowBundles(dir: string): Promise<{ plain: string; traced: string }> {
  mkdirSync(dir, { recursive: true });
  const plain = join(dir, WORKFLOW_BUNDLE_FILES.plain);
  const traced = join(dir, WORKFLOW_BUNDLE_FILES.traced);
  writeFileSync(plain, (await bundleTurnWorkflows()).code);
  writeFileSync(traced, (await bundleTurnWorkflows({ traced: true })).code);
  return { plain, traced };
}

/**
 * Where a worker looks for prebuilt bundles: the option, else TURNKIT_WORKFLOW_BUNDLES, else
 * the directory of this module when it is the compiled package (a bundle there was built from
 * the same files). From source (tsx, tests) there is none unless one is named.
 */
function workflowBundleDir(option: string | false | undefined): { dir: string; named: boolean } | undefined {
  if (option === false) return undefined;
  const named = option ?? process.env['TURNKIT_WORKFLOW_BUNDLES'];
  if (named) return { dir: resolve(named), named: true };
  const here = fileURLToPath(import.meta.url);
  return here.endsWith('.js') ? { dir: dirname(here), named: false } : undefined;
}

/**
 * The workflow code a worker runs: a prebuilt bundle when one is found (loading it takes
 * milliseconds), else bundled now from source (seconds of CPU at every start). A directory
 * named by the option or the environment must hold the bundle.
 */
export async function turnWorkflowBundle(options: {
  traced?: boolean;
  dir?: string | false;
}): Promise<{ codePath: string } | { code: string }> {
  const found = workflowBundleDir(options.dir);
  if (found) {
    const codePath = join(found.dir, WORKFLOW_BUNDLE_FILES[options.traced ? 'traced' : 'plain']);
    if (existsSync(codePath)) return { codePath };
    if (found.named) {
      throw new ArgumentError(
        `workflowBundles: ${codePath} does not exist (build it with writeTurnWorkflowBundles, or unset TURNKIT_WORKFLOW_BUNDLES)`,
      );
    }
  }
  return bundleTurnWorkflows({ traced: options.traced ?? false });
}

const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string) => console.warn(message),
  error: (message: string) => console.error(message),
};
