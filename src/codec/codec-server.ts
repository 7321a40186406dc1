/**
 * A Temporal codec server (decision 75, docs/data-lifecycle.md): `POST /encode` and
 * `POST /decode` with `{"payloads": [...]}` (each payload's `metadata` values and `data` in
 * base64), the protocol the Temporal Web UI and `temporal --codec-endpoint` speak. It runs the
 * workers' codec list, so the UI shows what TurnKit's encryption sealed.
 *
 * Who may call it: the console's hook shape (`authenticate`; without one, loopback only), and
 * for browsers only the `origins` listed (the UI's), answered with credentials allowed and the
 * origin echoed, never `*`. Bodies are bounded by `maxBodyBytes`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { isLoopbackAddress, isLoopbackHost } from '../console/handler.js';
import type { ConsoleAuthHook } from '../console/handler.js';
import { ArgumentError, CodecKeyError } from '../errors.js';

export interface CodecHandlerOptions {
  /** The codecs, in the workers' order (`[appCodec, encryption]`): encode runs it forwards, decode backwards. */
  codecs: readonly PayloadCodec[];
  /** Who is asking; `undefined` (or a throw) refuses with 401. Without it, loopback requests only. */
  authenticate?: ConsoleAuthHook;
  /** Browser origins allowed (CORS), default the local dev server's UI: http://127.0.0.1:8233, http://localhost:8233. */
  origins?: readonly string[];
  /** Only this Temporal namespace (the `X-Namespace` header), when given; another is refused with 403. */
  namespace?: string;
  /** The largest request body, default 4 MiB (Temporal's default payload limit is 2 MiB). */
  maxBodyBytes?: number;
  /** The path the handler is mounted at, e.g. `/codec` (default `/`). */
  basePath?: string;
  logger?: Pick<Console, 'error'>;
}

export type CodecHandler = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

export const DEFAULT_CODEC_ORIGINS = ['http://127.0.0.1:8233', 'http://localhost:8233'];
const DEFAULT_MAX_BODY = 4 * 1024 * 1024;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

class CodecHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function fromBase64(value: unknown, where: string): Uint8Array {
  if (typeof value !== 'string' || !BASE64.test(value))
    throw new CodecHttpError(400, `${where} must be a base64 string`);
  return Buffer.from(value, 'base64');
}

/** A payload of the protocol's JSON (`{metadata: {k: base64}, data: base64}`). */
function payloadOf(json: unknown, index: number): Payload {
  const where = `payloads[${index}]`;
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new CodecHttpError(400, `${where} must be an object`);
  const { metadata, data } = json as { metadata?: unknown; data?: unknown };
  if (
    metadata !== undefined &&
    (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata))
  )
    throw new CodecHttpError(400, `${where}.metadata must be an object`);
  return {
    metadata: Object.fromEntries(
      Object.entries((metadata ?? {}) as Record<string, unknown>).map(([key, value]) => [
        key,
        fromBase64(value, `${where}.metadata.${key}`),
      ]),
    ),
    data: data === undefined ? new Uint8Array() : fromBase64(data, `${where}.data`),
  };
}

function jsonOf(payload: Payload): { metadata: Record<string, string>; data: string } {
  return {
    metadata: Object.fromEntries(
      Object.entries(payload.metadata ?? {}).map(([key, value]) => [
        key,
        Buffer.from(value ?? []).toString('base64'),
      ]),
    ),
    data: Buffer.from(payload.data ?? []).toString('base64'),
  };
}

async function readBody(request: IncomingMessage, limit: number): Promise<Payload[]> {
  if (!/^application\/json\b/i.test(request.headers['content-type'] ?? ''))
    throw new CodecHttpError(415, 'the body is JSON (content-type: application/json)');
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit)
    throw new CodecHttpError(413, 'the request body is too large');
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new CodecHttpError(413, 'the request body is too large');
    chunks.push(chunk);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new CodecHttpError(400, 'the request body is not JSON');
  }
  const payloads = (body as { payloads?: unknown } | null)?.payloads;
  if (!Array.isArray(payloads)) throw new CodecHttpError(400, 'the body must be {"payloads": [...]}');
  return payloads.map(payloadOf);
}

/** Creates the codec server's request handler (mount it in your own server, or `turnkit codec-server`). */
export function createCodecHandler(options: CodecHandlerOptions): CodecHandler {
  const origins = new Set(options.origins ?? DEFAULT_CODEC_ORIGINS);
  if (origins.has('*'))
    throw new ArgumentError('codec server origins: list the UI origins; "*" cannot carry credentials');
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY;
  const base = (options.basePath ?? '/').replace(/\/+$/, '');
  const logger = options.logger ?? console;
  const encode = async (payloads: Payload[]) => {
    for (const codec of options.codecs) payloads = await codec.encode(payloads);
    return payloads;
  };
  const decode = async (payloads: Payload[]) => {
    for (const codec of [...options.codecs].reverse()) payloads = await codec.decode(payloads);
    return payloads;
  };

  const authenticate = async (request: IncomingMessage): Promise<void> => {
    if (!options.authenticate) {
      if (!isLoopbackAddress(request.socket.remoteAddress) || !isLoopbackHost(request.headers.host))
        throw new CodecHttpError(403, 'the codec server has no auth hook: it serves loopback requests only');
      return;
    }
    let principal: unknown;
    try {
      principal = await options.authenticate(request);
    } catch {
      principal = undefined;
    }
    if (principal === undefined) throw new CodecHttpError(401, 'not authenticated');
  };

  return async (request, response) => {
    const origin = request.headers.origin;
    const send = (status: number, body: unknown) => {
      response.statusCode = status;
      response.setHeader('content-type', 'application/json');
      response.setHeader('cache-control', 'no-store');
      response.end(JSON.stringify(body));
    };
    try {
      // A browser's request from an origin not listed gets no CORS headers and is refused.
      if (origin !== undefined) {
        if (!origins.has(origin)) throw new CodecHttpError(403, `origin ${origin} is not allowed`);
        response.setHeader('access-control-allow-origin', origin);
        response.setHeader('access-control-allow-credentials', 'true');
        response.setHeader('vary', 'Origin');
      }
      const path = new URL(request.url ?? '/', 'http://codec').pathname;
      const route = path.startsWith(`${base}/`) ? path.slice(base.length) : undefined;
      if (route !== '/encode' && route !== '/decode') throw new CodecHttpError(404, 'not found');
      if (request.method === 'OPTIONS') {
        response.setHeader('access-control-allow-methods', 'POST, OPTIONS');
        response.setHeader('access-control-allow-headers', 'content-type, x-namespace, authorization');
        response.setHeader('access-control-max-age', '600');
        response.statusCode = 204;
        response.end();
        return;
      }
      if (request.method !== 'POST') throw new CodecHttpError(405, 'POST only');
      await authenticate(request);
      const namespace = request.headers['x-namespace'];
      if (options.namespace !== undefined && namespace !== undefined && namespace !== options.namespace)
        throw new CodecHttpError(403, `namespace ${String(namespace)} is not served here`);
      const payloads = await readBody(request, limit);
      const result = route === '/encode' ? await encode(payloads) : await decode(payloads);
      send(200, { payloads: result.map(jsonOf) });
    } catch (error) {
      if (error instanceof CodecHttpError) return send(error.status, { error: error.message });
      if (error instanceof CodecKeyError) return send(400, { error: error.message });
      logger.error('turnkit codec server: request failed:', error);
      send(500, { error: 'the request failed (see the server log)' });
    }
  };
}
