/**
 * `turnkit codec-server` as an operator runs it (issue 49, part 2): the keys of
 * TURNKIT_CODEC_KEYS, a clear usage error for a bad value, and the protocol over HTTP.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EXIT_CODES } from '../../src/cli/render.js';
import { runCli } from '../helpers/cli.js';

const bin = fileURLToPath(new URL('../../src/cli/bin.ts', import.meta.url));
const tsx = import.meta.resolve('tsx');
const KEYS = `current:${randomBytes(32).toString('base64')},old:${randomBytes(32).toString('base64')}`;
const b64 = (text: string) => Buffer.from(text).toString('base64');

describe('privacy: turnkit codec-server', () => {
  it('privacy: a bad TURNKIT_CODEC_KEYS is a usage error naming the entry; none at all says so', async () => {
    const bad = await runCli(['codec-server', '--port', '0'], {
      ...process.env,
      TURNKIT_CODEC_KEYS: `current:${b64('too short')}`,
    });
    expect(bad.code).toBe(EXIT_CODES.usage);
    expect(bad.stderr).toContain('TURNKIT_CODEC_KEYS, entry 1 (key "current"): the key must be 32 bytes');
    const none = await runCli(['codec-server', '--port', '0'], { ...process.env, TURNKIT_CODEC_KEYS: '' });
    expect(none.code).toBe(EXIT_CODES.usage);
    expect(none.stderr).toContain('TURNKIT_CODEC_KEYS is not set');
  });

  it('privacy: serves /encode and /decode with the current key, and stops on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', tsx, bin, 'codec-server', '--port', '0'], {
      env: { ...process.env, TURNKIT_CODEC_KEYS: KEYS, TURNKIT_AGENTS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((done) => child.on('exit', done));
    try {
      let err = '';
      const url = await new Promise<string>((found, failed) => {
        child.stderr.on('data', (chunk: Buffer) => {
          err += chunk.toString();
          const match = /turnkit codec-server: (http:\/\/[^ ]+) /.exec(err);
          if (match) found(match[1]!);
        });
        void exited.then((code) => failed(new Error(`turnkit codec-server exited ${code}: ${err}`)));
      });
      const call = async (path: string, body: unknown) => {
        const response = await fetch(`${url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-namespace': 'default' },
          body: JSON.stringify(body),
        });
        expect(response.status).toBe(200);
        return (await response.json()) as { payloads: { metadata: Record<string, string>; data: string }[] };
      };
      const plain = { payloads: [{ metadata: { encoding: b64('json/plain') }, data: b64('"hello"') }] };
      const sealed = await call('/encode', plain);
      expect(Buffer.from(sealed.payloads[0]!.metadata['encoding']!, 'base64').toString()).toBe(
        'binary/encrypted',
      );
      expect(Buffer.from(sealed.payloads[0]!.metadata['encryption-key-id']!, 'base64').toString()).toBe(
        'current',
      );
      expect(await call('/decode', sealed)).toEqual(plain);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});
