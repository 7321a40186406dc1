import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/agents/tool.js';
import { ArgumentError, ToolError, ToolValidationError } from '../../src/errors.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { GitHubReadResult, GitHubTransport } from '../../src/specialists/librarian.js';
import {
  encodeRepositoryPath,
  fetchTransport,
  githubRepositoryTool,
  librarian,
  parseRepository,
} from '../../src/specialists/librarian.js';
import { readOnlyTool } from '../../src/specialists/read-only.js';
import { call } from './context.js';

const TOKEN = 'ghp_secret_token_123';
const README = '# Title\nSome text with ünïcödé.\n';

/** A local stand-in for api.github.com. Records every request it receives. */
const received: { url: string; authorization: string | undefined; accept: string | undefined }[] = [];
let stubOrigin = '';
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  const url = req.url ?? '';
  received.push({ url, authorization: req.headers.authorization, accept: req.headers.accept });
  const json = (status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
  if (url === '/repos/owner/name') {
    return json(200, { full_name: 'owner/name', html_url: 'https://github.com/owner/name' });
  }
  if (url === '/repos/owner/name/contents/docs/my%20file%2Bv2.md?ref=main') {
    // GitHub wraps base64 at 60 columns.
    const encoded = Buffer.from(README)
      .toString('base64')
      .replace(/(.{20})/g, '$1\n');
    return json(200, {
      type: 'file',
      encoding: 'base64',
      content: encoded,
      path: 'docs/my file+v2.md',
      html_url: 'https://github.com/owner/name/blob/main/docs/my%20file%2Bv2.md',
    });
  }
  if (url === '/repos/owner/name/contents/moved.md') {
    return json(301, { message: 'Moved Permanently' }, { location: `${stubOrigin}/elsewhere` });
  }
  if (url === '/repos/owner/name/issues?state=closed&page=2') {
    return json(200, [{ number: 7, title: 'Bug', html_url: 'https://github.com/owner/name/issues/7' }]);
  }
  if (url === '/repos/owner/name/issues/7/comments') return json(200, [{ body: 'Me too' }]);
  if (url === '/repos/owner/name/compare/main...feature%2Fx') {
    return json(200, { status: 'ahead', html_url: 'https://github.com/owner/name/compare/main...feature/x' });
  }
  if (url === '/repos/owner/name/contents/docs') return json(200, [{ name: 'my file+v2.md', type: 'file' }]);
  if (url === '/repos/owner/name/commits?sha=main&path=docs%2Fa%20b.md&page=3')
    return json(200, [{ sha: 'abc' }]);
  if (url === '/elsewhere') return json(200, { hijacked: true });
  // Unknown: a 404 whose message echoes the credentials, as a hostile or buggy server might.
  return json(404, { message: `Not Found (you sent ${req.headers.authorization ?? 'nothing'})` });
});

/** Keeps the URL the library builds (asserted to be api.github.com) but sends it to the stub. */
const requestedUrls: string[] = [];
const stubTransport: GitHubTransport = async (request) => {
  const url = new URL(request.url);
  requestedUrls.push(request.url);
  if (url.protocol !== 'https:' || url.host !== 'api.github.com')
    throw new Error(`unexpected URL ${request.url}`);
  return fetchTransport({ ...request, url: `${stubOrigin}${url.pathname}${url.search}` });
};

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  stubOrigin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  received.length = 0;
  requestedUrls.length = 0;
});

const tool = (token: string | null) =>
  githubRepositoryTool({ repository: 'owner/name', token: token ?? undefined, transport: stubTransport });
const read = async (args: Record<string, string | number>, token: string | null = TOKEN) =>
  (await call(tool(token), args)) as GitHubReadResult;

describe('librarian', () => {
  it('SP-02 librarian requests api.github.com /repos/owner/name/contents/… with a Bearer token and decodes base64 content', async () => {
    const result = await read({ operation: 'file', path: 'docs/my file+v2.md', ref: 'main' });
    expect(requestedUrls).toEqual([
      'https://api.github.com/repos/owner/name/contents/docs/my%20file%2Bv2.md?ref=main',
    ]);
    expect(received).toHaveLength(1);
    expect(received[0]!.url).toBe('/repos/owner/name/contents/docs/my%20file%2Bv2.md?ref=main');
    expect(received[0]!.authorization).toBe(`Bearer ${TOKEN}`);
    expect(received[0]!.accept).toBe('application/vnd.github+json');
    expect(result.repository).toBe('owner/name');
    expect(result.operation).toBe('file');
    expect(result.source).toBe('https://github.com/owner/name/blob/main/docs/my%20file%2Bv2.md');
    expect(result.data).toMatchObject({ content: README, path: 'docs/my file+v2.md' });
  });

  it('SP-02 librarian: path segments are percent-encoded (space → %20, + → %2B)', () => {
    expect(encodeRepositoryPath('docs/my file+v2.md')).toBe('docs/my%20file%2Bv2.md');
    expect(encodeRepositoryPath('/a/b c/')).toBe('a/b%20c');
    expect(encodeRepositoryPath('100%/#x?y')).toBe('100%25/%23x%3Fy');
    expect(() => encodeRepositoryPath('a/../b')).toThrow(ToolValidationError);
  });

  it('SP-02 librarian: source is the GitHub HTML URL; without a token no Authorization header is sent', async () => {
    const repository = await read({ operation: 'repository' }, null);
    expect(repository.source).toBe('https://github.com/owner/name');
    expect(received[0]!.authorization).toBeUndefined();
    const issues = await read({ operation: 'issues', state: 'closed', page: 2 });
    expect(issues.source).toBe('https://github.com/owner/name/issues');
    expect(issues.data).toEqual([expect.objectContaining({ number: 7 })]);
    const comments = await read({ operation: 'comments', number: 7 });
    expect(comments.source).toBe('https://github.com/owner/name/issues/7');
    const diff = await read({ operation: 'diff', base: 'main', head: 'feature/x' });
    expect(diff.source).toBe('https://github.com/owner/name/compare/main...feature/x');
    const directory = await read({ operation: 'file', path: 'docs' });
    expect(directory.source).toBe('https://github.com/owner/name/tree/HEAD/docs');
    const history = await read({ operation: 'history', path: 'docs/a b.md', ref: 'main', page: 3 });
    expect(history.data).toEqual([{ sha: 'abc' }]);
    expect(history.source).toBe('https://github.com/owner/name/commits/main/docs/a%20b.md');
    expect(requestedUrls.every((url) => url.startsWith('https://api.github.com/repos/owner/name'))).toBe(
      true,
    );
  });

  it('SP-02 librarian: an invalid repository is an ArgumentError', () => {
    for (const repository of [
      'owner',
      'owner/name/extra',
      '../name',
      'owner/..',
      'https://github.com/o/n',
      '-o/n',
      'o/n m',
      '',
    ]) {
      expect(() => librarian({ repository })).toThrow(ArgumentError);
    }
    expect(() => librarian({ repository: 42 as unknown as string })).toThrow(ArgumentError);
    expect(parseRepository('rails/rails.github.io')).toMatchObject({
      owner: 'rails',
      name: 'rails.github.io',
    });
  });

  it('SP-02 librarian: a 3xx is not followed (ToolError), by the tool or by the default fetch transport', async () => {
    const error = await read({ operation: 'file', path: 'moved.md' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolError);
    expect((error as ToolError).message).toMatch(/301/);
    expect(received.map((r) => r.url)).toEqual(['/repos/owner/name/contents/moved.md']);
    const direct = await fetchTransport({
      url: `${stubOrigin}/repos/owner/name/contents/moved.md`,
      headers: {},
      signal: new AbortController().signal,
    });
    expect(direct.status).toBe(301);
    expect(received.some((r) => r.url === '/elsewhere')).toBe(false);
  });

  it('SP-02 librarian: a 404 is a ToolError with the status and never the token', async () => {
    const error = await read({ operation: 'issue', number: 999 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolError);
    expect((error as ToolError).message).toMatch(/404/);
    expect((error as ToolError).message).not.toContain(TOKEN);
    expect((error as ToolError).details).toEqual({ status: 404 });
    expect(received[0]!.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it('SP-02 librarian: operations check their own parameters (ToolValidationError)', async () => {
    await expect(read({ operation: 'file' })).rejects.toThrow(ToolValidationError);
    await expect(read({ operation: 'diff', base: 'main' })).rejects.toThrow(/head/);
    await expect(read({ operation: 'issue' })).rejects.toThrow(/number/);
    await expect(read({ operation: 'delete' })).rejects.toThrow(ToolValidationError);
    expect(received).toHaveLength(0);
  });

  it('SP-02 librarian: an Agent named librarian with its model, a read-only GitHub tool and extra read-only tools', () => {
    const client = new ScriptedModel({});
    const notes = readOnlyTool({
      name: 'notes',
      description: 'Reads notes.',
      input: z.object({}),
      execute: () => '',
    });
    const agent = librarian({
      repository: 'owner/name',
      model: 'm',
      client,
      tools: [notes],
      instructions: 'Be brief.',
    });
    expect(agent.name).toBe('librarian');
    expect(agent.model).toBe('m');
    expect(agent.client).toBe(client);
    expect(agent.tools.map((t) => t.name)).toEqual(['github_repository_read', 'notes']);
    expect(agent.tools.every((t) => t.readOnly && t.recovery === 'replaySafe')).toBe(true);
    expect(agent.instructions.endsWith('\n\nBe brief.')).toBe(true);
    const mutate = defineTool({
      name: 'mutate',
      description: 'Writes.',
      input: z.object({}),
      execute: () => 1,
    });
    expect(() => librarian({ repository: 'owner/name', tools: [mutate] })).toThrow(ArgumentError);
    expect(() => githubRepositoryTool({ repository: 'owner/name', token: 'a\nb' })).toThrow(ArgumentError);
  });
});
