/**
 * Issue 28, finding 6: an MCP server started with a token in its arguments, or reached at a URL
 * with a key in its query string, must not hand that secret to the model (tool errors), the store
 * (the tool manifest) or Temporal history (a replay-safe call's failure), through its default
 * name, an error message or its stderr.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import type { McpToolSet } from '../../src/agents/mcp.js';
import { checkMcpManifests, mcpTools } from '../../src/agents/mcp.js';
import { defaultServerName, redactText } from '../../src/agents/mcp-redact.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { ConfigError } from '../../src/errors.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { call, toolContext } from '../specialists/context.js';

const root = resolve(import.meta.dirname, '../..');
const TOKEN = 'ghp_0123456789abcdefDoNotLeak';
const KEY = 'k3y-do-not-leak';
let dir = '';
let store: SqliteStore;
let tools: McpToolSet;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tk-mcp-names-'));
  store = await SqliteStore.open(join(dir, 'store.sqlite'));
  tools = await mcpTools({
    stdio: {
      command: process.execPath,
      args: [
        '--import',
        'tsx',
        join(root, 'test/fixtures/mcp-server.ts'),
        '--token',
        TOKEN,
        `--api-key=${KEY}`,
      ],
      cwd: root,
    },
    replaySafe: true,
  });
}, 30_000);
afterAll(async () => {
  await tools?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('MCP server names and errors carry no credentials', () => {
  it('security: a stdio server started with --token and --api-key= gets a default name without them; its manifest row and a failed call (replay-safe: the error Temporal records) do not contain them', async () => {
    expect(tools.server).toBe('node --import tsx mcp-server.ts --token … --api-key=…');
    await checkMcpManifests(store, new AgentRegistry([defineAgent({ name: 'a', tools: [...tools] })]));
    const db = new Database(join(dir, 'store.sqlite'), { readonly: true });
    const rows = db.prepare("SELECT * FROM turnkit_conversations WHERE agent_name = 'turnkit:mcp'").all();
    db.close();
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).toContain('mcp-server.ts --token …');
    expect(JSON.stringify(rows)).not.toContain(TOKEN);
    const crash = tools.find((tool) => tool.name === 'crash')!;
    const error = await call(crash, {}, await toolContext(store)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    const message = (error as Error).message;
    expect(message).toContain('MCP call crash on node --import tsx mcp-server.ts');
    expect(message).not.toContain(TOKEN);
    expect(message).not.toContain(KEY);
  });

  it('security: a server reached at a URL with userinfo, a query key or a token path gets the origin and path only; a server that fails at boot shows its stderr with credentials hidden', async () => {
    expect(defaultServerName({ url: `https://bob:${KEY}@mcp.example.com/t/${TOKEN}/mcp?key=${KEY}#x` })).toBe(
      'https://mcp.example.com/t/…/mcp',
    );
    const error = await mcpTools({
      stdio: {
        command: process.execPath,
        args: [
          '-e',
          `console.error("auth failed for https://u:${KEY}@db.internal/x?token=${KEY} with ${TOKEN}"); process.exit(2)`,
        ],
      },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain('MCP server node -e … did not start');
    expect(message).toContain('auth failed for https://db.internal/x with …');
    expect(message).not.toMatch(new RegExp(`${KEY}|${TOKEN}`));
  });

  it('security: redaction keeps ordinary words, package names and paths readable', () => {
    expect(
      defaultServerName({
        stdio: { command: '/usr/bin/npx', args: ['-y', '@modelcontextprotocol/server-github'] },
      }),
    ).toBe('npx -y @modelcontextprotocol/server-github');
    expect(
      redactText('skills failed: Authorization: Bearer abc.def, password=hunter2; see /srv/app/skills.md'),
    ).toBe('skills failed: Authorization: Bearer …, password=…; see /srv/app/skills.md');
  });
});
