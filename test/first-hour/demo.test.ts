/**
 * Issue 45, the first hour: `examples/demo.ts` (what `npm run demo` runs once the server is
 * up) on the real dev server, as scripts/demo.sh leaves the environment. Its hints carry the
 * address, UI and store it actually used, it says which server it used, whether it started it
 * and how to stop it, and that its prices are examples.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { temporalAddress } from '../helpers/temporal.js';

const exec = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

/** The environment scripts/demo.sh leaves when it started the dev server, offline: no provider key. */
function demoEnv(store: string, ui: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_ADDRESS: temporalAddress(),
    TEMPORAL_UI_URL: ui,
    TURNKIT_DATABASE_URL: store,
    TURNKIT_TEMPORAL_ORIGIN: 'started',
  };
  for (const key of [
    'TURNKIT_MODEL',
    'ANTHROPIC_API_KEY',
    'OPENAI_API_KEY',
    'TURNKIT_OPENAI_COMPATIBLE_BASE_URL',
  ])
    delete env[key];
  return env;
}

describe('first hour: the demo says what it used', () => {
  it('first hour: with a custom UI port and store, the demo hints carry them, name the server it started and how to stop it, and call its rates examples', async () => {
    const store = join(mkdtempSync(join(tmpdir(), 'turnkit-demo-')), 'demo.sqlite');
    const ui = 'http://127.0.0.1:18233';
    const { stdout } = await exec(
      process.execPath,
      ['--import', import.meta.resolve('tsx'), 'examples/demo.ts'],
      {
        cwd: root,
        env: demoEnv(store, ui),
      },
    );
    const cli = `npm run turnkit --${temporalAddress() === '127.0.0.1:7233' ? '' : ` --address ${temporalAddress()}`} --ui ${ui} --store ${store}`;
    expect(stdout).toMatch(
      /^TurnKit demo — model: scripted \(offline\), store: .*demo\.sqlite, task queue: turnkit-[0-9a-f]{12}\n/,
    );
    expect(stdout).toContain(
      `Temporal: the dev server at ${temporalAddress()}, UI ${ui}, started by this demo; it keeps running (stop it: ./temporal-dev.sh stop)`,
    );
    expect(stdout).toContain(
      'Costs below use example rates for the scripted model ($3 in / $15 out per million tokens): nothing is charged.',
    );
    expect(stdout).toMatch(
      new RegExp(`Watch it live: ${cli.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} watch turn_\\w+\\n`),
    );
    expect(stdout).toMatch(
      /On the command line: .* --ui http:\/\/127\.0\.0\.1:18233 --store .*demo\.sqlite show turn_\w+ /,
    );
    expect(stdout).toContain('Status: completed');
    expect(stdout).toMatch(/cost \$0\.0086 \(example rates: nothing was charged\)/);
    // The seven message.created lines said nothing the streamed text does not.
    expect(stdout).not.toContain('message.created');
  }, 180_000);
});
