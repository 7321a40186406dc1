/**
 * `turnkit codec-server [--port] [--host] [--origin …]`: serves TurnKit's Temporal codec server
 * (decision 75, docs/data-lifecycle.md) until interrupted, with the keys of TURNKIT_CODEC_KEYS.
 * The agents module's `consoleAuth` export is its auth hook, as for the console; without one
 * it listens on loopback only.
 */
import type { Command } from 'commander';
import { CODEC_KEYS_ENV } from '../codec/codec-keys.js';
import { createCodecHandler, DEFAULT_CODEC_ORIGINS } from '../codec/codec-server.js';
import type { GlobalOptions } from './project.js';
import { CliError, cliPayloadCodecs, loadAgentsModule } from './project.js';
import { listenAddress, serveUntilStopped } from './http-door.js';
import type { HttpDoorFlags } from './http-door.js';
import { EXIT_CODES } from './render.js';

interface CodecServerFlags extends HttpDoorFlags {
  origin?: string[];
}

export function addCodecServerCommand(
  program: Command,
  io: { err: NodeJS.WriteStream },
  globals: () => GlobalOptions,
): void {
  program
    .command('codec-server')
    .description(`serve the Temporal codec server (POST /encode, /decode) with the keys of ${CODEC_KEYS_ENV}`)
    .option('--port <n>', 'port to listen on (0: any free one)', '8888')
    .option('--host <address>', 'address to listen on (default 127.0.0.1; another needs an auth hook)')
    .option(
      '--origin <url...>',
      `browser origins allowed (the Temporal Web UI's; default ${DEFAULT_CODEC_ORIGINS.join(' ')})`,
    )
    .action(async (flags: CodecServerFlags) => {
      const codecs = cliPayloadCodecs();
      if (codecs.length === 0)
        throw new CliError(`${CODEC_KEYS_ENV} is not set: the codec server has no keys`, EXIT_CODES.usage);
      const { agents, namespace } = globals();
      const path = agents ?? process.env['TURNKIT_AGENTS'];
      const authenticate = path ? (await loadAgentsModule(path)).consoleAuth : undefined;
      const address = listenAddress(flags, 'the codec server', authenticate !== undefined);
      let handler: ReturnType<typeof createCodecHandler>;
      try {
        handler = createCodecHandler({
          codecs,
          ...(authenticate ? { authenticate } : {}),
          ...(flags.origin ? { origins: flags.origin } : {}),
          // The global --namespace, when given, is the only one served (the X-Namespace header).
          ...(namespace ? { namespace } : {}),
        });
      } catch (error) {
        throw new CliError(error instanceof Error ? error.message : String(error), EXIT_CODES.usage);
      }
      await serveUntilStopped(
        (request, response) => void handler(request, response),
        address,
        'the codec server',
        io.err,
        (url) =>
          `turnkit codec-server: ${url} (keys ${codecs.length}; ` +
          (authenticate ? 'auth hook: consoleAuth)\n' : 'no auth hook: loopback only)\n'),
      );
    });
}
