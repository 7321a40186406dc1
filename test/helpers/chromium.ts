/**
 * Chromium for the browser suites (Debian's, driven by playwright-core): in CI a missing
 * browser fails the suite; elsewhere the suite is skipped with a warning.
 */
import { existsSync } from 'node:fs';

export const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

/** Whether chromium is there; throws in CI when it is not. */
export function chromiumAvailable(suite: string): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env['CI']) throw new Error(`chromium is not at ${CHROMIUM}: .ci/run installs it`);
  console.warn(`turnkit: WARNING: no chromium at ${CHROMIUM}; ${suite} is skipped`);
  return false;
}
