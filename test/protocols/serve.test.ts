/**
 * Issue 48: `turnkit serve` as an operator runs it (a spawned CLI process with the CLI tests'
 * agents module): the MCP SDK's client lists the served agents and fetches an A2A card; a
 * non-loopback host without an auth hook is a usage error.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'src/cli/bin.ts');
const agentsModule = join(root, 'test/fixtures/cli-agents.ts');
const tsx = import.meta.resolve('tsx');

/** `turnkit serve ...` as a process: its base URL once it listens, and a stop. */
function serve(args: string[]): Promise<{ url: string; stop: () => Promise<number | null> }> {
  const child = spawn(
    process.execPath,
    ['--import', tsx, bin, '--store', tempSqliteUrl(), '--agents', agentsModule, 'serve', ...args],
    { env: process.env },
  );
  const exited = new Promise<number | null>((done) => child.on('close', (code) => done(code)));
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (chunk) => {
      err += chunk;
      const url = /turnkit serve: (http:\/\/[^ ]+\/)/.exec(err)?.[1];
      if (url)
        resolve({
          url,
          stop: () => {
            child.kill('SIGINT');
            return exited;
          },
        });
    });
    void exited.then((code) => reject(new Error(`turnkit serve exited ${code}: ${err}`)));
  });
}

describe('protocols: turnkit serve', () => {
  it('protocols: serves the chosen agents over MCP and A2A on loopback, and stops on SIGINT', async () => {
    const served = await serve(['--port', '0', '--serve', 'helper,slow']);
    const mcp = new Client({ name: 'serve-test', version: '1' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${served.url}mcp`)));
    expect((await mcp.listTools()).tools.map((t) => t.name)).toEqual(['helper', 'slow', 'turnkit_decide']);
    await mcp.close();
    const card = await fetch(`${served.url}a2a/slow/.well-known/agent-card.json`);
    expect(card.status).toBe(200);
    expect(await card.json()).toMatchObject({ name: 'slow' });
    expect((await fetch(`${served.url}a2a/careful/.well-known/agent-card.json`)).status).toBe(404);
    expect(await served.stop()).toBe(0);
  });

  it('protocols: a non-loopback host without an auth hook, or an unknown agent, is a usage error', async () => {
    const base = ['--store', tempSqliteUrl(), '--agents', agentsModule, 'serve', '--port', '0'];
    const open = await runCli([...base, '--host', '0.0.0.0'], process.env);
    expect(open.code).toBe(2);
    expect(open.stderr).toMatch(/loopback only/);
    const unknown = await runCli([...base, '--serve', 'nobody'], process.env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no agent nobody/);
  });
});
