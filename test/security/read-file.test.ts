/**
 * Issue 28, finding 5: the oracle's `read_file` defaults to the working directory, which holds
 * `.env`, `.git/config` and the TurnKit store next to the code. A prompt-injected oracle must
 * not read them, whether it names them, reaches them through a symlink, or probes for them.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArgumentError, ToolError } from '../../src/errors.js';
import { oracle, readFileTool } from '../../src/specialists/oracle.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { call } from '../specialists/context.js';

let root = '';
beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'tk-readfile-'));
  writeFileSync(join(root, 'README.md'), 'the project');
  writeFileSync(join(root, '.env'), 'OPENAI_API_KEY=sk-do-not-leak');
  writeFileSync(join(root, '.env.production'), 'TURNKIT_SIGNING_KEY=do-not-leak');
  mkdirSync(join(root, '.git'));
  writeFileSync(join(root, '.git', 'config'), '[remote] url = https://token-do-not-leak@github.com/x/y');
  mkdirSync(join(root, 'deploy'));
  writeFileSync(join(root, 'deploy', 'server.pem'), '-----BEGIN PRIVATE KEY----- do-not-leak');
  writeFileSync(join(root, 'deploy', 'id_ed25519'), 'do-not-leak');
  writeFileSync(join(root, '.npmrc'), '//registry.npmjs.org/:_authToken=do-not-leak');
  // A real TurnKit store where the CLI puts it.
  const store = await SqliteStore.open(join(root, '.turnkit', 'turnkit.sqlite'));
  await store.createConversation({ agentName: 'do-not-leak' });
  await store.close();
  symlinkSync(join(root, '.env'), join(root, 'notes.txt'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function read(path: string, tool = readFileTool({ root })): Promise<string> {
  try {
    return JSON.stringify(await call(tool, { path }));
  } catch (error) {
    expect(error).toBeInstanceOf(ToolError);
    return `refused: ${(error as Error).message}`;
  }
}

describe('read_file: no secrets from the working directory', () => {
  it('security: .env*, .git/config, the .turnkit store, keys and .npmrc are refused by default (also through a symlink, also via ./ and ..); nothing of them reaches the model', async () => {
    const secrets = [
      '.env',
      '.ENV',
      '.env.production',
      '.git/config',
      '.turnkit/turnkit.sqlite',
      '.turnkit/turnkit.sqlite-wal',
      'deploy/server.pem',
      'deploy/id_ed25519',
      '.npmrc',
      './.env',
      'deploy/../.env',
      'notes.txt',
    ];
    const answers = await Promise.all(secrets.map((path) => read(path)));
    expect(answers.filter((answer) => !answer.startsWith('refused: path is not readable'))).toEqual([]);
    expect(answers.join('\n')).not.toMatch(/do-not-leak/);
    expect(await read('README.md')).toContain('the project');
  });

  it('security: a denied path is refused before it is looked up: a missing .env reads exactly like an existing one', async () => {
    expect(await read('.env.missing')).toBe(
      'refused: path is not readable (secrets, keys and databases are not): .env.missing',
    );
    expect(await read('.env.production')).toBe(
      'refused: path is not readable (secrets, keys and databases are not): .env.production',
    );
  });

  it('security: the oracle agent uses the deny list; an explicit deny list replaces it (deny: [] reads everything) and a bad one is an ArgumentError', async () => {
    const agent = oracle({ root });
    const tool = agent.tools.find((t) => t.name === 'read_file')!;
    expect(await read('.env', tool)).toMatch(/^refused/);
    const open = oracle({ root, deny: [] }).tools.find((t) => t.name === 'read_file')!;
    expect(await read('.env', open)).toContain('sk-do-not-leak');
    expect(await read('README.md', readFileTool({ root, deny: ['*.md'] }))).toMatch(/^refused/);
    expect(() => readFileTool({ root, deny: ['../x'] })).toThrow(ArgumentError);
  });
});
