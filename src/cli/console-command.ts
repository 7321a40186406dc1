/**
 * `turnkit console [--port] [--host] [--temporal-ui-url]`: serves the web console (decision 46,
 * docs/console.md) until interrupted. The agents module's `consoleAuth` export is its auth
 * hook; without one it listens on loopback only, and says so.
 */
import type { Command } from 'commander';
import { consoleAssets } from '../console/assets.js';
import { createConsoleHandler } from '../console/handler.js';
import { ConfigError } from '../errors.js';
import { listenAddress, serveUntilStopped } from './http-door.js';
import type { HttpDoorFlags } from './http-door.js';
import { CliError } from './project.js';
import { write } from './render.js';
import type { ScheduleCommandContext } from './schedule-commands.js';

interface ConsoleFlags extends HttpDoorFlags {
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
        const authenticate = module?.consoleAuth;
        const address = listenAddress(flags, 'the console', authenticate !== undefined);
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
        await serveUntilStopped(
          (request, response) => void handler(request, response),
          address,
          'the console',
          ctx.err,
          (url) =>
            `turnkit console: ${url}/` +
            (authenticate ? ' (auth hook: consoleAuth)\n' : ' (no auth hook: loopback only)\n'),
        );
      }),
    );
}
