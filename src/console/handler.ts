/**
 * The TurnKit web console's server side (decision 46): a Node `http` request handler that
 * serves the console's built assets and a JSON API over the store, the live UI message stream
 * of a turn, and the controls (approve, reject, pause, resume, steer, cancel), which go
 * through a TurnKitClient, so they are signed as the client's are and meet the workers'
 * authorization policy with the principal the `authenticate` hook returns.
 *
 * Without a hook the console is for this machine only: a request from a non-loopback address,
 * or naming a non-loopback Host (DNS rebinding), is refused with 403. Threat model:
 * docs/security.md, "The web console".
 */
import { createReadStream, existsSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { TurnKitClient } from '../client/turnkit-client.js';
import { toUIMessageStreamResponse } from '../client/ui-stream.js';
import {
  ArgumentError,
  AuthorizationError,
  ControlError,
  InputError,
  ContentErasedError,
  RecordNotFound,
  TurnKitError,
} from '../errors.js';
import { consoleReadsOf } from '../store/console-reads.js';
import { defaultConsoleAssetsDir, isConsoleBuild, MISSING_ASSETS_FIX } from './assets.js';
import type { ConsoleReads } from '../store/console-reads.js';
import type { Json, JsonObject, TurnRecord } from '../store/types.js';
import { turnWorkflowId } from '../workflows/contract.js';
import type { Scope } from './data.js';
import {
  eventPage,
  executionPage,
  listApprovals,
  listConversations,
  listTurnSummaries,
  parseTurnFilter,
  ScopeError,
  transcriptPage,
  turnPage,
} from './data.js';

/**
 * Who is asking: the principal the console's controls carry to the authorization policy.
 * Return `undefined` (or throw) to refuse the request (401). It sees every request, reads too.
 */
export type ConsoleAuthHook = (request: IncomingMessage) => Json | undefined | Promise<Json | undefined>;

export interface ConsoleHandlerOptions {
  /** The client the console reads the store through and sends controls with (its signing key, its policy). */
  client: TurnKitClient;
  /**
   * The principal of a request. Without it, only loopback requests are served, as principal
   * `localPrincipal`.
   */
  authenticate?: ConsoleAuthHook;
  /** The principal of a loopback request when there is no hook (default `null`). */
  localPrincipal?: Json;
  /** The Temporal Web UI, for the links to each turn's workflow (none without it). */
  temporalUiUrl?: string;
  /** The Temporal namespace of those links (default: the client's). */
  namespace?: string;
  /**
   * Where the built console is (default: the package's `dist/console-app`; `consoleAssets()`
   * finds or, in a checkout, builds one).
   */
  assetsDir?: string;
  /** The path the handler is mounted at, e.g. `/console` (default `/`). */
  basePath?: string;
  logger?: Pick<Console, 'error'>;
}

/** A Node `http` handler; it answers every request it is given (404 outside its base path). */
export type ConsoleHandler = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
};

/** The console's pages load nothing but their own files; media in transcripts only as data URLs. */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; " +
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/** The header every state-changing request must carry: a cross-site form cannot set it. */
export const CONSOLE_REQUEST_HEADER = 'x-turnkit-console';

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
  return plain === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(plain);
}

export function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '');
  return name === 'localhost' || isLoopbackAddress(name);
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const CONTROL_ACTIONS = ['approve', 'reject', 'pause', 'resume', 'steer', 'cancel'] as const;
type ConsoleControl = (typeof CONTROL_ACTIONS)[number];

/** Creates the console's request handler (mount it in your own server, or `turnkit console`). */
export function createConsoleHandler(options: ConsoleHandlerOptions): ConsoleHandler {
  const server = new ConsoleServer(options);
  return (request, response) => server.handle(request, response);
}

type Reply = (body: unknown, status?: number) => void;

class ConsoleServer {
  readonly #options: ConsoleHandlerOptions;
  readonly #client: TurnKitClient;
  readonly #assets: string;
  readonly #base: string;
  readonly #logger: Pick<Console, 'error'>;
  readonly #namespace: string;
  readonly #ui: string | undefined;
  readonly #reads: ConsoleReads;

  constructor(options: ConsoleHandlerOptions) {
    this.#options = options;
    this.#client = options.client;
    this.#reads = consoleReadsOf(options.client.store);
    this.#assets = resolve(options.assetsDir ?? defaultConsoleAssetsDir());
    this.#base = `/${(options.basePath ?? '/').replace(/^\/+|\/+$/g, '')}`.replace(/^\/$/, '');
    this.#logger = options.logger ?? console;
    this.#namespace = options.namespace ?? options.client.temporal.options.namespace;
    this.#ui = options.temporalUiUrl?.replace(/\/+$/, '');
  }

  async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      const url = new URL(request.url ?? '/', 'http://console.invalid');
      const base = this.#base;
      if (base && url.pathname !== base && !url.pathname.startsWith(`${base}/`))
        throw new HttpError(404, 'not the console');
      if (base && url.pathname === base) {
        // Relative asset URLs need the trailing slash.
        response.writeHead(308, { location: `${base}/${url.search}` });
        return void response.end();
      }
      const path = url.pathname.slice(base.length) || '/';
      const principal = await this.#principalOf(request);
      if (path === '/api' || path.startsWith('/api/'))
        await this.#api(request, response, path.slice(4), url, principal);
      else if (request.method === 'GET' || request.method === 'HEAD') this.#serveAsset(response, path);
      else throw new HttpError(405, 'method not allowed');
    } catch (error) {
      if (response.headersSent) {
        response.destroy();
        return;
      }
      const [status, message] = statusOf(error, this.#logger);
      response.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: message }));
    }
  }

  #temporalLink = (turnId: string): string | null =>
    this.#ui
      ? `${this.#ui}/namespaces/${encodeURIComponent(this.#namespace)}/workflows/${encodeURIComponent(turnWorkflowId(turnId))}`
      : null;

  /**
   * What this principal may read: the client's authorization policy asked with the same read
   * actions as the client's read APIs, naming the turn, its conversation and its owner.
   */
  #scope(principal: Json): Scope {
    return async (action, turn) => {
      try {
        await this.#client.authorize(action, principal, ownedResource(turn));
        return true;
      } catch (error) {
        if (error instanceof AuthorizationError) return false;
        throw error;
      }
    };
  }

  async #readable(turnId: string, principal: Json, action: 'read_control' | 'read_messages') {
    const turn = await this.#client.store.loadTurn(turnId);
    if (!(await this.#scope(principal)(action, turn))) throw new ScopeError();
    return turn;
  }

  async #principalOf(request: IncomingMessage): Promise<Json> {
    const { authenticate } = this.#options;
    if (!authenticate) {
      if (!isLoopbackAddress(request.socket.remoteAddress))
        throw new HttpError(403, 'the console has no auth hook: it serves loopback requests only');
      if (!isLoopbackHost(request.headers.host))
        throw new HttpError(403, 'the console has no auth hook: it answers loopback host names only');
      return this.#options.localPrincipal ?? null;
    }
    let principal: Json | undefined;
    try {
      principal = await authenticate(request);
    } catch {
      principal = undefined;
    }
    if (principal === undefined) throw new HttpError(401, 'not authenticated');
    return principal;
  }

  async #api(request: IncomingMessage, response: ServerResponse, path: string, url: URL, principal: Json) {
    const method = request.method ?? 'GET';
    const reply: Reply = (body, status = 200) => {
      response.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    const store = this.#client.store;
    const reads = this.#reads;
    const scope = this.#scope(principal);
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    if (method === 'GET' && parts.length === 1) {
      if (path === '/info')
        return reply({
          temporalUiUrl: this.#ui ?? null,
          namespace: this.#namespace,
          authenticated: this.#options.authenticate !== undefined,
          principal,
        });
      if (path === '/turns')
        return reply(await listTurnSummaries(reads, parseTurnFilter(url.searchParams), scope));
      if (path === '/conversations')
        return reply(await listConversations(reads, parseTurnFilter(url.searchParams), scope));
      if (path === '/approvals') return reply(await listApprovals(reads, url.searchParams, scope));
    }
    if (parts[0] === 'turns' && parts.length === 2 && method === 'GET')
      return reply(
        await turnPage(store, reads, parts[1]!, {
          temporalLink: this.#temporalLink,
          scope,
          ...(url.searchParams.get('since') ? { since: url.searchParams.get('since')! } : {}),
        }),
      );
    if (parts[0] === 'turns' && parts.length === 3 && parts[2] === 'messages' && method === 'GET')
      return reply(await transcriptPage(store, reads, parts[1]!, url.searchParams, scope));
    if (parts[0] === 'turns' && parts.length === 3 && parts[2] === 'executions' && method === 'GET')
      return reply(await executionPage(store, reads, parts[1]!, url.searchParams, scope));
    if (parts[0] === 'turns' && parts.length === 3 && parts[2] === 'events' && method === 'GET')
      return reply(await eventPage(store, parts[1]!, url.searchParams, scope));
    if (parts[0] === 'turns' && parts.length === 3 && parts[2] === 'stream' && method === 'GET') {
      await this.#readable(parts[1]!, principal, 'read_messages');
      return this.#stream(response, parts[1]!);
    }
    if (parts[0] === 'turns' && parts.length === 3 && method === 'POST') {
      const action = parts[2] as ConsoleControl;
      if (!CONTROL_ACTIONS.includes(action)) throw new HttpError(404, `no control ${parts[2]}`);
      if (request.headers[CONSOLE_REQUEST_HEADER] !== '1')
        throw new HttpError(403, `a control needs the ${CONSOLE_REQUEST_HEADER} header`);
      // A turn this principal may not see is not there for it; the control itself is then
      // authorized by the workers' policy, which names the turn's owner too.
      await this.#readable(parts[1]!, principal, 'read_control');
      return reply(await this.#control(parts[1]!, action, await readJson(request), principal));
    }
    throw new HttpError(404, `no such console API: ${method} ${path}`);
  }

  async #control(turnId: string, action: ConsoleControl, body: JsonObject, principal: Json) {
    const run = await this.#client.handle(turnId);
    const text = (name: string, required: boolean) => {
      const value = body[name];
      if (value === undefined && !required) return undefined;
      if (typeof value !== 'string' || (required && value.trim() === ''))
        throw new ArgumentError(`${action}: ${name} must be a ${required ? 'non-empty ' : ''}string`);
      return value;
    };
    switch (action) {
      case 'approve': {
        const note = text('note', false);
        return run.approve(text('toolCallId', true)!, { principal, ...(note ? { note } : {}) });
      }
      case 'reject': {
        const reason = text('reason', false);
        return run.reject(text('toolCallId', true)!, { principal, ...(reason ? { reason } : {}) });
      }
      case 'pause':
        return run.pause({ principal });
      case 'resume':
        return run.resume({ principal });
      case 'steer':
        return run.steer(text('text', true)!, { principal });
      case 'cancel':
        await run.cancel({
          principal,
          descendants: body['descendants'] === 'cascade' ? 'cascade' : 'retain',
        });
        return { cancelled: true };
    }
  }

  /** The run's UI message stream (`useChat`'s resume): `toUIMessageStreamResponse` over Node's response. */
  async #stream(response: ServerResponse, turnId: string) {
    const run = await this.#client.handle(turnId);
    const web = toUIMessageStreamResponse(run, { logger: this.#logger });
    const headers: Record<string, string> = { ...SECURITY_HEADERS };
    web.headers.forEach((value, key) => (headers[key] = value));
    response.writeHead(web.status, headers);
    if (!web.body) return void response.end();
    const body = Readable.fromWeb(web.body as WebReadableStream<Uint8Array>);
    response.on('close', () => body.destroy());
    body.pipe(response);
    await new Promise<void>((done) => {
      body.on('end', done);
      body.on('error', done);
      body.on('close', done);
    });
  }

  #serveAsset(response: ServerResponse, path: string) {
    const relative = path === '/' || path === '' ? 'index.html' : normalize(path).replace(/^([/\\])+/, '');
    if (!isConsoleBuild(this.#assets))
      throw new HttpError(
        503,
        `the console's front end is not built at ${this.#assets}: ${MISSING_ASSETS_FIX}`,
      );
    const file = join(this.#assets, relative);
    // The console routes in the hash: any other path is a file of the build, or nothing.
    if (!file.startsWith(this.#assets + sep) || !existsSync(file) || !statSync(file).isFile())
      throw new HttpError(404, `no such file: ${path}`);
    response.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream',
      // Hashed asset names never change; the page itself is always fetched anew.
      ...(relative.startsWith('assets/') ? { 'cache-control': 'public, max-age=31536000, immutable' } : {}),
    });
    createReadStream(file).pipe(response);
  }
}

/** What a policy sees of a turn: its id, its conversation and its owner's principal. */
function ownedResource(turn: TurnRecord): Record<string, unknown> {
  return { turn: turn.id, conversation: turn.conversationId, owner: turn.options['principal'] ?? null };
}

/** The HTTP status and the message a client may see; anything unexpected is logged, not shown. */
function statusOf(error: unknown, logger: Pick<Console, 'error'>): [number, string] {
  if (error instanceof HttpError) return [error.status, error.message];
  if (error instanceof ScopeError) return [404, 'not found'];
  if (error instanceof RecordNotFound) return [404, 'not found'];
  if (error instanceof ContentErasedError) return [410, `ContentErasedError: ${error.message}`];
  if (error instanceof AuthorizationError) return [403, error.message];
  if (error instanceof ArgumentError || error instanceof InputError) return [400, error.message];
  if (error instanceof ControlError) return [409, error.message];
  if (error instanceof TurnKitError) return [500, `${error.name}: ${error.message}`];
  logger.error('turnkit console: request failed:', error);
  return [500, 'the request failed (see the server log)'];
}

const MAX_BODY = 64 * 1024;

async function readJson(request: IncomingMessage): Promise<JsonObject> {
  if (!/^application\/json\b/i.test(request.headers['content-type'] ?? ''))
    throw new HttpError(415, 'a control is JSON (content-type: application/json)');
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new HttpError(413, 'the request body is too large');
    chunks.push(chunk);
  }
  let body: unknown;
  try {
    body = chunks.length === 0 ? {} : JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'the request body is not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new HttpError(400, 'the request body must be a JSON object');
  return body as JsonObject;
}
