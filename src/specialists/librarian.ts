/**
 * The librarian (spec §7.4): a read-only researcher over one GitHub repository. Its tool can
 * only ever talk to `https://api.github.com` about the repository fixed at definition; the
 * model chooses an operation and its parameters, never a URL, and redirects are refused so a
 * response cannot steer the request (or the token) anywhere else.
 */
import { z } from 'zod';
import type { Agent } from '../agents/agent.js';
import { defineAgent } from '../agents/agent.js';
import type { ToolDefinition } from '../agents/tool.js';
import { ArgumentError, ToolError, ToolValidationError } from '../errors.js';
import type { Json, JsonObject } from '../store/types.js';
import type { SpecialistAgentOptions } from './read-only.js';
import { assertReadOnly, assertReadOnlySkills, joinInstructions, readOnlyTool } from './read-only.js';

const GITHUB_API = 'https://api.github.com';
const GITHUB_HTML = 'https://github.com';

const GITHUB_OPERATIONS = ['repository', 'file', 'history', 'diff', 'issues', 'issue', 'comments'] as const;
export type GitHubOperation = (typeof GITHUB_OPERATIONS)[number];

export interface GitHubRequest {
  url: string;
  headers: Record<string, string>;
  signal: AbortSignal;
}
export interface GitHubResponse {
  status: number;
  body: string;
}
/** Sends one GET. Must not follow redirects: a 3xx is returned as it is. */
export type GitHubTransport = (request: GitHubRequest) => Promise<GitHubResponse>;

export interface GitHubReadResult {
  repository: string;
  operation: GitHubOperation;
  /** The github.com page for what was read, when there is one. */
  source: string | null;
  data: Json;
}

/** The default transport: global fetch, redirects handed back instead of followed. */
export const fetchTransport: GitHubTransport = async ({ url, headers, signal }) => {
  const response = await fetch(url, { method: 'GET', headers, signal, redirect: 'manual' });
  return { status: response.status, body: await response.text() };
};

// GitHub logins: alphanumerics and single inner hyphens, at most 39; names: [A-Za-z0-9._-], not . or ..
const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;
const NAME = /^[A-Za-z0-9._-]{1,100}$/;

/** Validates `owner/name`; anything else (URLs, extra segments, `..`) is an ArgumentError. */
export function parseRepository(repository: unknown): { owner: string; name: string; full: string } {
  if (typeof repository !== 'string') throw new ArgumentError('repository must be a string "owner/name"');
  const parts = repository.split('/');
  const [owner, name] = parts;
  if (
    parts.length !== 2 ||
    !owner ||
    !name ||
    !OWNER.test(owner) ||
    !NAME.test(name) ||
    name === '.' ||
    name === '..'
  ) {
    throw new ArgumentError(`invalid repository ${JSON.stringify(repository)}: expected "owner/name"`);
  }
  return { owner, name, full: `${owner}/${name}` };
}

/** Percent-encodes each segment of a repository path (space → %20, + → %2B); `.`/`..` refused. */
export function encodeRepositoryPath(path: string): string {
  const segments = path.split('/').filter((segment) => segment !== '');
  if (segments.length === 0) throw new ToolValidationError('path must name a file or directory');
  if (segments.some((segment) => segment === '.' || segment === '..')) {
    throw new ToolValidationError('path must not contain . or .. segments');
  }
  return segments.map(encodeURIComponent).join('/');
}

function query(params: Record<string, string | number | undefined>): string {
  const pairs = Object.entries(params).filter(
    (entry): entry is [string, string | number] => entry[1] !== undefined,
  );
  if (pairs.length === 0) return '';
  return `?${pairs.map(([key, value]) => `${key}=${encodeURIComponent(String(value))}`).join('&')}`;
}

const input = z.object({
  operation: z
    .enum(GITHUB_OPERATIONS)
    .describe(
      'repository: metadata; file: a file or directory (needs path); history: commits (optional path, ref); ' +
        'diff: compare base...head; issues: list (optional state); issue / comments: one issue (needs number).',
    ),
  path: z.string().optional().describe('File or directory path inside the repository.'),
  ref: z.string().optional().describe('Branch, tag or commit SHA (default: the default branch).'),
  base: z.string().optional().describe('Base ref of a diff.'),
  head: z.string().optional().describe('Head ref of a diff.'),
  number: z.number().int().positive().optional().describe('Issue or pull request number.'),
  state: z.enum(['open', 'closed', 'all']).optional().describe('Issue state filter (default open).'),
  page: z.number().int().positive().optional().describe('Page of a list result (1-based).'),
});
type GitHubArgs = z.infer<typeof input>;

function required<T>(value: T | undefined, name: string, operation: string): T {
  if (value === undefined || value === '') {
    throw new ToolValidationError(`missing required argument for ${operation}: ${name}`);
  }
  return value;
}

interface Planned {
  path: string;
  source: string | null;
  /** The page to cite when `file` turns out to be a directory. */
  directorySource?: string;
}

/** Maps an operation onto one API path and the github.com page it corresponds to. */
function plan(repo: string, args: GitHubArgs): Planned {
  const api = `/repos/${repo}`;
  const html = `${GITHUB_HTML}/${repo}`;
  const ref = args.ref === undefined || args.ref === '' ? undefined : args.ref;
  switch (args.operation) {
    case 'repository':
      return { path: api, source: html };
    case 'file': {
      const path = encodeRepositoryPath(required(args.path, 'path', 'file'));
      return {
        path: `${api}/contents/${path}${query({ ref })}`,
        source: `${html}/blob/${encodeURIComponent(ref ?? 'HEAD')}/${path}`,
        directorySource: `${html}/tree/${encodeURIComponent(ref ?? 'HEAD')}/${path}`,
      };
    }
    case 'history': {
      const path = args.path ? encodeRepositoryPath(args.path) : undefined;
      return {
        path: `${api}/commits${query({ sha: ref, path: args.path ? args.path : undefined, page: args.page })}`,
        source: `${html}/commits/${encodeURIComponent(ref ?? 'HEAD')}${path ? `/${path}` : ''}`,
      };
    }
    case 'diff': {
      const range = `${encodeURIComponent(required(args.base, 'base', 'diff'))}...${encodeURIComponent(required(args.head, 'head', 'diff'))}`;
      return {
        path: `${api}/compare/${range}${query({ page: args.page })}`,
        source: `${html}/compare/${range}`,
      };
    }
    case 'issues':
      return {
        path: `${api}/issues${query({ state: args.state, page: args.page })}`,
        source: `${html}/issues`,
      };
    case 'issue': {
      const number = required(args.number, 'number', 'issue');
      return { path: `${api}/issues/${number}`, source: `${html}/issues/${number}` };
    }
    case 'comments': {
      const number = required(args.number, 'number', 'comments');
      return {
        path: `${api}/issues/${number}/comments${query({ page: args.page })}`,
        source: `${html}/issues/${number}`,
      };
    }
  }
}

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** File contents come base64-encoded; the model gets the text. */
function decodeFile(data: Json): Json {
  if (!isObject(data) || data['encoding'] !== 'base64' || typeof data['content'] !== 'string') return data;
  const content = Buffer.from(data['content'].replace(/\s/g, ''), 'base64').toString('utf8');
  return { ...data, content, encoding: 'utf-8' };
}

export interface GitHubToolOptions {
  repository: string;
  /** Sent as `Authorization: Bearer <token>`; never echoed in results or errors. */
  token?: string;
  transport?: GitHubTransport;
}

/** `github_repository_read`, scoped to one repository (validated here: ArgumentError). */
export function githubRepositoryTool(options: GitHubToolOptions): ToolDefinition {
  const repo = parseRepository(options?.repository);
  const { token } = options;
  if (token !== undefined && (typeof token !== 'string' || token === '' || /[\r\n]/.test(token))) {
    throw new ArgumentError('token must be a non-empty single-line string');
  }
  const transport = options.transport ?? fetchTransport;
  if (typeof transport !== 'function') throw new ArgumentError('transport must be a function');
  const redact = (text: string): string => (token ? text.split(token).join('[redacted]') : text);

  return readOnlyTool({
    name: 'github_repository_read',
    description: `Read the GitHub repository ${repo.full}: metadata, files, history, diffs, issues and comments.`,
    input,
    execute: async (args, context): Promise<GitHubReadResult> => {
      const planned = plan(repo.full, args);
      const url = `${GITHUB_API}${planned.path}`;
      // The path is built here from validated pieces; this guards the invariant, not the model.
      if (new URL(url).origin !== GITHUB_API)
        throw new ToolError('refusing a request outside api.github.com');
      const headers: Record<string, string> = {
        Accept: 'application/vnd.github+json',
        'User-Agent': 'turnkit-librarian',
        'X-GitHub-Api-Version': '2022-11-28',
        ...(token ? { Authorization: `Bearer ${token}` } : {}),
      };
      let response: GitHubResponse;
      try {
        response = await transport({ url, headers, signal: context.signal });
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        throw new ToolError(redact(`GitHub request failed: ${message}`));
      }
      const { status } = response;
      if (status >= 300 && status < 400) {
        throw new ToolError(`GitHub answered ${status} (a redirect); redirects are not followed`, {
          details: { status },
        });
      }
      if (status < 200 || status >= 300) {
        let reason = '';
        try {
          const body: unknown = JSON.parse(response.body);
          if (isObject(body) && typeof body['message'] === 'string') reason = `: ${body['message']}`;
        } catch {
          // Not JSON: the status alone says enough.
        }
        throw new ToolError(
          redact(`GitHub answered ${status} for ${args.operation}${reason}`.slice(0, 500)),
          {
            details: { status },
          },
        );
      }
      let data: Json;
      try {
        data = JSON.parse(response.body) as Json;
      } catch {
        throw new ToolError(`GitHub answered ${status} with a body that is not JSON`);
      }
      if (args.operation === 'file') data = decodeFile(data);
      const html = isObject(data) && typeof data['html_url'] === 'string' ? data['html_url'] : null;
      // A directory comes back as a list of entries: its page is a tree, not a blob.
      const fallback =
        Array.isArray(data) && planned.directorySource ? planned.directorySource : planned.source;
      const source = html && html.startsWith(`${GITHUB_HTML}/`) ? html : fallback;
      return { repository: repo.full, operation: args.operation, source, data };
    },
  });
}

export const LIBRARIAN_INSTRUCTIONS =
  'You are the librarian, a read-only researcher. Answer from the repository itself: read the files, ' +
  'history, diffs and issues you need, and cite the GitHub source of each fact. You cannot change anything.';

export type LibrarianOptions = SpecialistAgentOptions &
  GitHubToolOptions & {
    /** Further read-only tools, offered after `github_repository_read`. */
    tools?: readonly ToolDefinition[];
    /** Appended to the librarian's own instructions. */
    instructions?: string;
    /** Rejected: a read-only specialist cannot delegate. */
    subAgents?: never;
  };

/** An ordinary agent named `librarian` that reads one GitHub repository (spec §7.4). */
export function librarian(options: LibrarianOptions): Agent {
  if (!options || typeof options !== 'object') throw new ArgumentError('librarian needs options');
  const { repository, token, transport, tools, instructions, subAgents, name, ...agentOptions } = options;
  const checked = assertReadOnly('librarian', tools, subAgents);
  assertReadOnlySkills('librarian', agentOptions);
  const github = githubRepositoryTool({ repository, token, transport });
  return defineAgent({
    ...agentOptions,
    // Specialists take no global defaults (skills, contributors, limits): spec §7.4.
    inheritGlobals: false,
    name: name ?? 'librarian',
    description:
      agentOptions.description ?? `A read-only researcher for the GitHub repository ${repository}.`,
    instructions: joinInstructions(`${LIBRARIAN_INSTRUCTIONS}\nRepository: ${repository}.`, instructions),
    tools: [github, ...checked],
  });
}
