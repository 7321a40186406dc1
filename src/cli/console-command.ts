/**
 * `turnkit console [--port] [--host] [--temporal-ui-url]`: serves the web console (decision 46,
 * docs/console.md) until interrupted. The agents module's `consoleAuth` export is its auth
 * hook; without one it listens on loopback only, and says so.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Command } from 'commander';
import { consoleAssets } from '../console/assets.js';
import { createConsoleHandler, isLoopbackAddress } from '../console/handler.js';
import { ConfigError } from '../errors.js';
import { CliError } from './project.js';
import { EXIT_CODES, write } from './render.js';
import type { ScheduleCommandContext } from './schedule-commands.js';

interface ConsoleFlags {
  port: string;
  host?: string;
  temporalUiUrl?: string;
  assets?: string;
}

export function addConsoleCommand(program: Command, ctx: ScheduleCommandContext): void {
  program
    .command('console')
    .description('serve the web console (turns, transcripts, approvals, controls) until interrupted')
    .option('--port <n>', 'port to listen on (0: any free one)', '4280')
    .option('--host <address>', 'address to listen on (default 127.0.0.1; another needs an auth hook)')
    .option(
      '--temporal-ui-url <url>',
      'Temporal Web UI for the links (default: TEMPORAL_UI_URL, else http://127.0.0.1:8233)',
    )
    .option(
      '--assets <dir>',
      'serve the console from this build (default: the packaged one; in a checkout, built from console/ on first use)',
    )
    .action(
      ctx.run(false, async (client, module, flags: ConsoleFlags) => {
        const port = Number(flags.port);
        if (!Number.isInteger(port) || port < 0 || port > 65_535)
          throw new CliError(`--port must be a port number, got ${flags.port}`, EXIT_CODES.usage);
        const authenticate = module?.consoleAuth;
        const host = flags.host ?? '127.0.0.1';
        const loopback = isLoopbackAddress(host) || host === 'localhost';
        if (!authenticate && !loopback)
          throw new CliError(
            `--host ${host}: without an auth hook (the agents module's \`consoleAuth\`) the console listens on loopback only`,
            EXIT_CODES.usage,
          );
        let assetsDir: string;
        try {
          assetsDir = await consoleAssets({
            ...(flags.assets ? { given: flags.assets } : {}),
            log: (line) => write(ctx.err, line),
          });
        } catch (error) {
          if (error instanceof ConfigError) throw new CliError(`turnkit console: ${error.message}`);
          throw error;
        }
        const handler = createConsoleHandler({
          client,
          temporalUiUrl: flags.temporalUiUrl ?? process.env['TEMPORAL_UI_URL'] ?? 'http://127.0.0.1:8233',
          ...(authenticate ? { authenticate } : {}),
          assetsDir,
        });
        const server = createServer((request, response) => void handler(request, response));
        await new Promise<void>((listening, failed) => {
          server.once('error', (error) =>
            failed(new CliError(`the console cannot listen on ${host}:${port}: ${error.message}`)),
          );
          server.listen(port, host, listening);
        });
        const address = server.address() as AddressInfo;
        const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
        write(
          ctx.err,
          `turnkit console: http://${shown}:${address.port}/` +
            (authenticate ? ' (auth hook: consoleAuth)\n' : ' (no auth hook: loopback only)\n'),
        );
        await new Promise<void>((stopped) => {
          const stop = () => {
            server.close(() => stopped());
            // Live streams and keep-alive sockets would hold the server open.
            server.closeAllConnections();
          };
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
        });
      }),
    );
}
