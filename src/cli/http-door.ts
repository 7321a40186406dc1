/**
 * What every `turnkit` command that serves HTTP shares (console, serve, codec-server): the
 * port and host flags, loopback only without an auth hook, a start line naming the address,
 * and a clean stop on SIGINT or SIGTERM.
 */
import type { RequestListener } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isLoopbackAddress } from '../console/handler.js';
import { CliError } from './project.js';
import { EXIT_CODES, write } from './render.js';

export interface HttpDoorFlags {
  port: string;
  host?: string;
}

/** The port and host a door listens on; a non-loopback host without an auth hook is a usage error. */
export function listenAddress(
  flags: HttpDoorFlags,
  what: string,
  hasAuthHook: boolean,
): { port: number; host: string } {
  const port = Number(flags.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new CliError(`--port must be a port number, got ${flags.port}`, EXIT_CODES.usage);
  const host = flags.host ?? '127.0.0.1';
  if (!hasAuthHook && !(isLoopbackAddress(host) || host === 'localhost'))
    throw new CliError(
      `--host ${host}: without an auth hook (the agents module's \`consoleAuth\`) ${what} listens on loopback only`,
      EXIT_CODES.usage,
    );
  return { port, host };
}

/**
 * Serves `handler` on the address until SIGINT or SIGTERM. `started` gets the URL it listens
 * on and returns the start line written to `err`.
 */
export async function serveUntilStopped(
  handler: RequestListener,
  address: { port: number; host: string },
  what: string,
  err: NodeJS.WritableStream,
  started: (url: string) => string,
): Promise<void> {
  const server = createServer(handler);
  await new Promise<void>((listening, failed) => {
    server.once('error', (error) =>
      failed(new CliError(`${what} cannot listen on ${address.host}:${address.port}: ${error.message}`)),
    );
    server.listen(address.port, address.host, listening);
  });
  const bound = server.address() as AddressInfo;
  const shown = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  write(err, started(`http://${shown}:${bound.port}`));
  await new Promise<void>((stopped) => {
    const stop = () => {
      server.close(() => stopped());
      // Live streams and keep-alive sockets would hold the server open.
      server.closeAllConnections();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
