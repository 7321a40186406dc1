/**
 * The web console behind authentication, mounted in an operations server (docs/deployment.md):
 * operators sign in with HTTP Basic (the browser asks), each with a long random token whose
 * SHA-256 is in TURNKIT_CONSOLE_OPERATORS ("ana=<hex>,bo=<hex>"). Behind TLS only. With a
 * single-sign-on proxy in front, `authenticate` reads the identity the proxy verified instead.
 *
 *   TURNKIT_CONSOLE_OPERATORS="ana=$(printf %s "$TOKEN" | sha256sum | cut -c1-64)" \
 *     npx tsx examples/deployment/console-server.ts
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import { createServer } from 'node:http';
import type { TurnKitClient } from '../../src/index.js';
import { createConsoleHandler } from '../../src/console.js';

/** `ana=<sha256 hex>,bo=<sha256 hex>` as operator → digest; anything malformed is refused. */
export function operatorsFrom(setting: string | undefined): Map<string, Buffer> {
  const operators = new Map<string, Buffer>();
  for (const entry of (setting ?? '').split(',').filter(Boolean)) {
    const [name, digest] = entry.trim().split('=');
    if (!name || !/^[0-9a-f]{64}$/.test(digest ?? ''))
      throw new Error(`TURNKIT_CONSOLE_OPERATORS: "${name ?? entry}" needs <name>=<sha256 hex of the token>`);
    operators.set(name, Buffer.from(digest!, 'hex'));
  }
  if (operators.size === 0) throw new Error('TURNKIT_CONSOLE_OPERATORS names no operator');
  return operators;
}

/** The operator a request's Basic credentials name, or undefined. */
function operatorOf(request: IncomingMessage, operators: Map<string, Buffer>): string | undefined {
  const [scheme, encoded] = (request.headers.authorization ?? '').split(' ');
  if (scheme !== 'Basic' || !encoded) return undefined;
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const name = decoded.slice(0, colon);
  const expected = operators.get(name);
  const given = createHash('sha256')
    .update(decoded.slice(colon + 1))
    .digest();
  return colon > 0 && expected && timingSafeEqual(given, expected) ? name : undefined;
}

export function createOpsServer(options: {
  client: TurnKitClient;
  operators: Map<string, Buffer>;
  temporalUiUrl?: string;
}): Server {
  const console = createConsoleHandler({
    client: options.client,
    basePath: '/ops/turnkit',
    ...(options.temporalUiUrl ? { temporalUiUrl: options.temporalUiUrl } : {}),
    // The principal the console's controls carry to your authorization policy; undefined: 401.
    authenticate: (request) => {
      const name = operatorOf(request, options.operators);
      return name ? { id: name, role: 'operator' } : undefined;
    },
  });
  return createServer((request, response) => {
    if (!request.url?.startsWith('/ops/turnkit')) {
      response.writeHead(404).end();
      return;
    }
    // Ask the browser for credentials; the console's own 401 carries no challenge.
    if (!operatorOf(request, options.operators)) {
      response.writeHead(401, { 'www-authenticate': 'Basic realm="TurnKit console", charset="UTF-8"' });
      response.end();
      return;
    }
    void console(request, response);
  });
}
