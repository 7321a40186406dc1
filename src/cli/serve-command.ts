/**
 * `turnkit serve [--port] [--host] [--serve a,b]`: the agents to any client until interrupted
 * (docs/protocols.md): MCP at `/mcp`, A2A at `/a2a/<agent>`, AG-UI at `/agui/<agent>`. The
 * agents module's `consoleAuth` export is the auth hook of every door (it maps a request to a
 * principal); without one the server listens on loopback only, and says so.
 */
import type { Command } from 'commander';
import { createA2AHandler } from '../protocols/a2a-server.js';
import { createAgUiHandler } from '../protocols/ag-ui-endpoint.js';
import type { ProtocolDoorOptions, ProtocolHandler } from '../protocols/door.js';
import { createMcpHandler } from '../protocols/mcp-server.js';
import { listenAddress, serveUntilStopped } from './http-door.js';
import type { HttpDoorFlags } from './http-door.js';
import { CliError } from './project.js';
import { EXIT_CODES } from './render.js';
import type { ScheduleCommandContext } from './schedule-commands.js';

interface ServeFlags extends HttpDoorFlags {
  serve?: string;
  publicUrl?: string;
}

export function addServeCommand(program: Command, ctx: ScheduleCommandContext): void {
  program
    .command('serve')
    .description(
      'serve the agents over MCP (/mcp), A2A (/a2a/<agent>) and AG-UI (/agui/<agent>) until interrupted',
    )
    .option('--port <n>', 'port to listen on (0: any free one)', '4281')
    .option('--host <address>', 'address to listen on (default 127.0.0.1; another needs an auth hook)')
    .option('--serve <agents>', 'the agents to serve, comma-separated (default: every agent of the module)')
    .option(
      '--public-url <url>',
      'the URL clients reach this server at, for the A2A cards (default: from Host)',
    )
    .action(
      ctx.run(true, async (client, module, flags: ServeFlags) => {
        const authenticate = module?.consoleAuth;
        const address = listenAddress(flags, 'the server', authenticate !== undefined);
        const agents = flags.serve?.split(',').map((name) => name.trim());
        for (const name of agents ?? []) {
          if (!client.agents.names.includes(name))
            throw new CliError(`--serve: no agent ${name} in the agents module`, EXIT_CODES.usage);
        }
        const door: ProtocolDoorOptions = {
          client,
          ...(agents ? { agents } : {}),
          ...(authenticate ? { authenticate } : {}),
        };
        const publicUrl = flags.publicUrl?.replace(/\/+$/, '');
        const routes: [string, ProtocolHandler][] = [
          ['/mcp', createMcpHandler(door)],
          ['/a2a', createA2AHandler({ ...door, ...(publicUrl ? { publicUrl: `${publicUrl}/a2a` } : {}) })],
          ['/agui', createAgUiHandler(door)],
        ];
        await serveUntilStopped(
          (request, response) => {
            const path = new URL(request.url ?? '/', 'http://serve.invalid').pathname;
            const route = routes.find(([prefix]) => path === prefix || path.startsWith(`${prefix}/`));
            if (!route)
              return void response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
            void route[1](request, response);
          },
          address,
          'turnkit serve',
          ctx.err,
          (url) =>
            `turnkit serve: ${url}/ (mcp, a2a/<agent>, agui/<agent>)` +
            (authenticate ? ' (auth hook: consoleAuth)\n' : ' (no auth hook: loopback only)\n'),
        );
      }),
    );
}
