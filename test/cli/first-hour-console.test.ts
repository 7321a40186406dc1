/**
 * Issue 45 item 1: the console from a checkout. A clean copy of this checkout (its tracked
 * files, the installed node_modules linked in), the README's first command (`npm run demo`),
 * then `npm run turnkit -- console` with no other step: Chromium shows the turn list. Where the
 * front end is missing, the handler and the command say what to run.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  utimesSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { createConsoleHandler } from '../../src/console.js';
import { openStore } from '../../src/store/index.js';
import { connectClient } from '../helpers/temporal.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available && process.env['CI']) throw new Error(`chromium is not at ${CHROMIUM}: .ci/run installs it`);

/** A clean checkout: the tracked files as they are, node_modules linked, no build, no .turnkit. */
function cleanCheckout(): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'turnkit-first-hour-')), 'turnkit');
  const files = spawnSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).stdout.split('\0');
  for (const file of files.filter(Boolean)) {
    if (!existsSync(join(ROOT, file))) continue;
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    copyFileSync(join(ROOT, file), join(dir, file));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  // The installed tree is current: the demo's `npm ci` check must not reinstall through the link.
  utimesSync(join(dir, 'package-lock.json'), new Date(0), new Date(0));
  // The Temporal CLI this checkout already has, so the copy reuses the running server's tooling.
  const marker = join(ROOT, '.temporal', 'venv', 'turnkit-cli-path');
  if (existsSync(marker)) {
    mkdirSync(join(dir, '.temporal', 'venv'), { recursive: true });
    copyFileSync(marker, join(dir, '.temporal', 'venv', 'turnkit-cli-path'));
  }
  return dir;
}

const env = { ...process.env };

describe('first hour: the console from a checkout', () => {
  it.skipIf(!available)(
    'first hour: after `npm run demo` in a clean checkout, `npm run turnkit -- console` with no other step shows the turn list in Chromium',
    async () => {
      const dir = cleanCheckout();
      expect(existsSync(join(dir, 'dist'))).toBe(false);
      const demo = spawnSync('npm', ['run', 'demo'], { cwd: dir, env, encoding: 'utf8', timeout: 300_000 });
      expect(demo.status, `${demo.stdout}\n${demo.stderr}`).toBe(0);

      const child = spawn('npm', ['run', '--silent', 'turnkit', '--', 'console', '--port', '0'], {
        cwd: dir,
        env,
        detached: true,
      });
      const exited = new Promise<number | null>((done) => child.on('close', done));
      let err = '';
      const url = await new Promise<string>((found, failed) => {
        child.stderr.on('data', (chunk: Buffer) => {
          err += chunk.toString();
          const match = /turnkit console: (http:\/\/[^ ]+\/)/.exec(err);
          if (match) found(match[1]!);
        });
        void exited.then((code) => failed(new Error(`turnkit console exited ${code}: ${err}`)));
      });
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
      try {
        const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
        await page.goto(url);
        await page.getByRole('heading', { name: 'Turns' }).waitFor({ timeout: 30_000 });
        await page
          .locator('table.list')
          .or(page.getByText('No turns match.'))
          .first()
          .waitFor({ timeout: 30_000 });
        await page.screenshot({ path: join('test-results', 'first-hour-console.png') });
        expect(await page.getByRole('form', { name: 'Filter' }).isVisible()).toBe(true);
      } finally {
        await browser.close();
        // npm runs the command in a process group of its own (detached): stop that group.
        process.kill(-child.pid!, 'SIGINT');
        await exited;
      }
    },
    420_000,
  );

  it('first hour: where the front end is missing, the console answers 503 naming the command to run', async () => {
    const store = await openStore(tempSqliteUrl());
    const client = new TurnKitClient({
      store,
      agents: new AgentRegistry(),
      temporal: await connectClient(),
    });
    const empty = mkdtempSync(join(tmpdir(), 'turnkit-no-assets-'));
    const handler = createConsoleHandler({ client, assetsDir: empty });
    const server = createServer((request, response) => void handler(request, response));
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      expect(response.status).toBe(503);
      const { error } = (await response.json()) as { error: string };
      expect(error).toContain(empty);
      expect(error).toContain('npm run turnkit -- console');
    } finally {
      await new Promise((closed) => server.close(closed));
      await store.close();
    }
  });

  it('first hour: the README gives the console command that works in a checkout', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Web console'));
    expect(section.slice(0, 800)).toContain('npm run turnkit -- console');
  });
});
