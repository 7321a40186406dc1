/**
 * `turnkit`: run a worker, start runs, list, show, watch and cancel them, send messages,
 * schedule agents.
 * It reads the store directly (any process can) and talks to Temporal through its client;
 * `ls` uses Temporal visibility on TurnKit's search attributes. Exit codes: docs/cli.md.
 */
import { Command, CommanderError, Option } from 'commander';
import type { Client } from '@temporalio/client';
import { mcpToolSetsOf } from '../agents/mcp.js';
import { AgentRegistry } from '../agents/registry.js';
import type { RunHandle } from '../client/run-handle.js';
import { TurnKitClient } from '../client/turnkit-client.js';
import type { RepairFinding } from '../engine/end/repair.js';
import { readRunStream } from '../client/run-stream.js';
import { RecordNotFound, TurnKitError } from '../errors.js';
import type { PostPolicy } from '../contract/post-request.js';
import { POST_POLICIES } from '../contract/post-request.js';
import type { Json, Store, TurnRecord } from '../store/types.js';
import { TERMINAL_TURN_STATUSES, TURN_STATUSES } from '../store/types.js';
import type { LogLevel } from '@temporalio/worker';
import { Runtime as TemporalRuntime } from '@temporalio/worker';
import { conciseWorkerLogger, createWorker } from '../worker.js';
import type { ApprovalResult, ControlState } from '../workflows/contract.js';
import {
  TURNKIT_AGENT,
  TURNKIT_CONVERSATION_ID,
  TURNKIT_STATUS,
  TURN_WORKFLOW_ID_PREFIX,
} from '../workflows/contract.js';
import type { AgentsModule, GlobalOptions } from './project.js';
import {
  CliError,
  cliPayloadCodecs,
  connectTemporal,
  loadAgentsModule,
  openProjectStore,
  temporalAddress,
  temporalNamespace,
  uiUrl,
} from './project.js';
import {
  EXIT_CODES,
  executionLines,
  exitCodeFor,
  formatCost,
  head,
  isTerminal,
  messageLines,
  progressLine,
  progressOf,
  styleFor,
  terminalSafe,
  jsonText,
  treeLines,
  turnLink,
  write,
} from './render.js';
import { addConsoleCommand } from './console-command.js';
import { addServeCommand } from './serve-command.js';
import { addCodecServerCommand } from './codec-server-command.js';
import type { ScheduleCommandContext } from './schedule-commands.js';
import { addScheduleCommands } from './schedule-commands.js';
import { addForkCommands, forkSummary, showConversation } from './fork-commands.js';
import { addEvalCommand } from './eval-commands.js';
import { addPruneCommand } from './prune-command.js';
import { addEraseCommand } from './erase-command.js';

interface Io {
  out: NodeJS.WriteStream;
  err: NodeJS.WriteStream;
}

/** Resources a command opened, closed once it ends whatever happens. */
class Session {
  readonly #closers: (() => Promise<unknown>)[] = [];
  /** `existingStore`: the command acts on what the store holds, so it never creates one. */
  constructor(
    readonly options: GlobalOptions,
    readonly existingStore = false,
  ) {}

  async module(required: boolean): Promise<AgentsModule | undefined> {
    const path = this.options.agents ?? process.env['TURNKIT_AGENTS'];
    if (!path) {
      if (required)
        throw new CliError('this command needs the agents module: pass --agents <module>', EXIT_CODES.usage);
      return undefined;
    }
    const module = await loadAgentsModule(path);
    // The module's MCP servers were connected when it loaded: they close when the command ends.
    for (const set of mcpToolSetsOf(module.agents)) this.#closers.push(() => set.close());
    return module;
  }

  async store(module?: AgentsModule): Promise<Store> {
    const store = await openProjectStore(this.options, module, { existing: this.existingStore });
    this.#closers.push(() => store.close());
    return store;
  }

  /** The store alone, for the commands that only read (the agents module may name it). */
  async readStore(): Promise<Store> {
    return this.store(await this.module(false));
  }

  async temporal(): Promise<Client> {
    const { client, connection } = await connectTemporal(this.options);
    this.#closers.push(() => connection.close());
    return client;
  }

  async client(module?: AgentsModule): Promise<TurnKitClient> {
    const store = await this.store(module);
    const temporal = await this.temporal();
    return new TurnKitClient({
      store,
      temporal,
      agents: module?.agents ?? new AgentRegistry(),
      ...(this.options.taskQueue ? { taskQueue: this.options.taskQueue } : {}),
      ...(module?.authorization ? { authorization: module.authorization } : {}),
      ...(module?.defaultModel ? { defaultModel: module.defaultModel } : {}),
      // The Temporal UI's details of the turns this client starts link to the web console.
      ...(process.env['TURNKIT_CONSOLE_URL']
        ? { turnSettings: { consoleUrl: process.env['TURNKIT_CONSOLE_URL'] } }
        : {}),
      ...signingKey(),
    });
  }

  async close(): Promise<void> {
    for (const close of this.#closers.reverse()) await close().catch(() => undefined);
  }
}

function parseJson(what: string, text: string | undefined): Json | undefined {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as Json;
  } catch {
    const example =
      what === '--principal'
        ? ` (a JSON value: --principal '{"user":"${text}"}' or --principal '"${text}"')`
        : '';
    throw new CliError(`${what} is not JSON: ${text}${example}`, EXIT_CODES.usage);
  }
}

async function loadTurn(store: Store, turnId: string): Promise<TurnRecord> {
  try {
    return await store.loadTurn(turnId);
  } catch (error) {
    if (error instanceof RecordNotFound)
      throw new CliError(
        `no turn ${turnId} in the store ${store.identity.location} (another store? pass --store or set TURNKIT_DATABASE_URL)`,
      );
    throw error;
  }
}

/** Commands that act on what a store holds: they never create one (a mistyped --store is an error). */
const EXISTING_STORE_COMMANDS: ReadonlySet<string> = new Set([
  'show',
  'watch',
  'ls',
  'pending',
  'approve',
  'reject',
  'pause',
  'resume',
  'steer',
  'cancel',
  'send',
  'post',
  'repair',
]);

/** The worker's Temporal logger, one line per entry (TURNKIT_LOG_LEVEL=DEBUG: with stacks). */
function installWorkerLogger(): void {
  const level = (process.env['TURNKIT_LOG_LEVEL'] ?? 'INFO').toUpperCase();
  const known: readonly LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];
  try {
    TemporalRuntime.install({
      logger: conciseWorkerLogger(known.includes(level as LogLevel) ? (level as LogLevel) : 'INFO'),
    });
  } catch {
    // A runtime made before (another command in this process) keeps its logger.
  }
}

/** How the user runs this command line: `turnkit`, or `npm run turnkit --` in a checkout (scripts/turnkit.sh). */
function cliName(): string {
  return process.env['TURNKIT_CLI_NAME'] || 'turnkit';
}

async function inStore(store: Store, turnId: string): Promise<boolean> {
  try {
    await store.loadTurn(turnId);
    return true;
  } catch (error) {
    if (error instanceof RecordNotFound) return false;
    throw error;
  }
}

/** Which store and task queue a command uses, for its start line. */
function storeLine(store: Store, taskQueue: string): string {
  return `store ${store.identity.location} (${store.identity.id}), task queue ${taskQueue}`;
}

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * The text a turn streams, shown in a terminal above its progress line: finished lines are
 * printed for good, the line being written is redrawn (cut to the terminal's width).
 */
class StreamedText {
  text = '';
  #partial = '';
  #lines: string[] = [];
  #drawnPartial = false;

  add(delta: string): void {
    this.text += delta;
    // Model text: nothing in it may act on the terminal (escape sequences, controls).
    const lines = (this.#partial + terminalSafe(delta)).split('\n');
    this.#partial = lines.pop()!;
    this.#lines.push(...lines);
  }

  /** Ends the line being written (a step ended). */
  endLine(): void {
    if (this.#partial !== '') this.#lines.push(this.#partial);
    this.#partial = '';
  }

  /** Escape codes that clear the progress line (and the partial line), print, and leave the cursor on the progress line. */
  render(progress: string, columns: number): string {
    let out = '\r\u001b[2K';
    if (this.#drawnPartial) out += '\u001b[1A\r\u001b[2K';
    for (const line of this.#lines.splice(0)) out += `${line}\n`;
    this.#drawnPartial = this.#partial !== '';
    if (this.#drawnPartial) out += `${this.#partial.slice(-Math.max(1, columns - 1))}\n`;
    return out + progress;
  }
}

/** Shows progress (and, in a terminal, the text as it streams) until the turn is terminal. */
async function follow(
  store: Store,
  turnId: string,
  io: Io,
  json: boolean,
  intervalMs = 200,
): Promise<{ turn: TurnRecord; streamed: string }> {
  const style = styleFor(io.out);
  const live = io.out.isTTY === true && !json;
  const text = new StreamedText();
  let line = '';
  const draw = () => write(io.out, text.render(line, io.out.columns ?? 80));
  const stop = new AbortController();
  const reading = live
    ? showStream(store, (await loadTurn(store, turnId)).rootTurnId, turnId, text, draw, stop.signal)
    : null;
  let last = '';
  try {
    for (let tick = 0; ; tick += 1) {
      const turn = await loadTurn(store, turnId);
      const progress = await progressOf(store, turn);
      const done = isTerminal(turn);
      if (json) {
        const line = JSON.stringify({ ...progress, elapsedMs: undefined });
        if (line !== last || done) write(io.out, `${jsonText(progress)}\n`);
        last = line;
      } else if (live) {
        if (done) {
          // Its last parts follow the terminal write closely; a crash between them costs 2 s at most.
          await Promise.race([reading, new Promise((resolve) => setTimeout(resolve, 2_000))]);
          text.endLine();
        }
        line = progressLine(progress, style, done ? '' : SPINNER[tick % SPINNER.length], cliName());
        draw();
        if (done) write(io.out, '\n');
      } else {
        // Not a terminal: one line whenever something but the clock changed.
        const line = progressLine({ ...progress, elapsedMs: 0 }, style, '', cliName());
        if (line !== last || done) write(io.out, `${progressLine(progress, style, '', cliName())}\n`);
        last = line;
      }
      if (done) return { turn, streamed: text.text };
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  } finally {
    stop.abort();
  }
}

/** Feeds the turn's streamed text to the terminal until its stream ends (a restarted step starts over). */
async function showStream(
  store: Store,
  rootTurnId: string,
  turnId: string,
  text: StreamedText,
  draw: () => void,
  signal: AbortSignal,
): Promise<void> {
  try {
    for await (const part of readRunStream(store, rootTurnId, { signal })) {
      if (part.turnId !== turnId) continue;
      if (part.type === 'text.delta') text.add(part.text);
      else if (part.type === 'step.finished' || part.type === 'step.restarted') {
        text.endLine();
        if (part.type === 'step.restarted') text.add('(the model call is running again)\n');
      } else if (
        part.type === 'finish' ||
        (part.type === 'status' && TERMINAL_TURN_STATUSES.includes(part.status))
      )
        return;
      else continue;
      draw();
    }
  } catch {
    // The progress line goes on without the text.
  }
}

/** The output (unless it was just streamed to the terminal) and the error. */
function finalLines({ turn, streamed }: { turn: TurnRecord; streamed: string }): string[] {
  const lines: string[] = [];
  if (turn.outputText && !streamed.includes(turn.outputText)) lines.push(terminalSafe(turn.outputText));
  if (turn.error) lines.push(terminalSafe(`error: ${turn.error.class}: ${turn.error.message}`));
  return lines;
}

// The CLI's command table: one declaration per command, read top to bottom (issue 29 exempts it).
// eslint-disable-next-line max-lines-per-function
function buildProgram(io: Io, setExit: (code: number) => void): Command {
  const program = new Command('turnkit')
    .description('Durable LLM agents on Temporal: run a worker, start and watch runs.')
    .option(
      '--store <url>',
      'store URL or SQLite path (default: TURNKIT_DATABASE_URL, else .turnkit/turnkit.sqlite)',
    )
    .option(
      '--address <host:port>',
      "Temporal frontend (default: TEMPORAL_ADDRESS, else the profile's, else 127.0.0.1:7233)",
    )
    .option(
      '--namespace <name>',
      "Temporal namespace (default: TEMPORAL_NAMESPACE, else the profile's, else default)",
    )
    .option(
      '--profile <name>',
      "profile of Temporal's config file, TEMPORAL_CONFIG_FILE (default: TEMPORAL_PROFILE, else default)",
    )
    .option('--task-queue <name>', "task queue (default: TURNKIT_TASK_QUEUE, else the store's own)")
    .option(
      '--agents <module>',
      'module exporting `agents` and optionally `model`, `store` (default: TURNKIT_AGENTS)',
    )
    .option('--ui <url>', 'Temporal Web UI for links (default: TEMPORAL_UI_URL, else http://127.0.0.1:8233)')
    .option('--json', 'machine-readable output')
    .option('--debug', 'print stack traces')
    .configureOutput({ writeOut: (s) => write(io.out, s), writeErr: (s) => write(io.err, s) })
    .exitOverride()
    .showHelpAfterError(false);

  const globals = () => program.opts<GlobalOptions>();
  const action =
    <A extends unknown[]>(fn: (session: Session, ...args: A) => Promise<number | void>) =>
    async (...args: A) => {
      // Commander passes the command last: its name says whether it may create a store.
      const command = args.at(-1);
      const session = new Session(
        globals(),
        command instanceof Command && EXISTING_STORE_COMMANDS.has(command.name()),
      );
      try {
        setExit((await fn(session, ...args)) ?? 0);
      } finally {
        await session.close();
      }
    };

  program
    .command('worker')
    .description('run a worker for the agents module until interrupted')
    .option('--deployment <name>', 'Worker Versioning: the Worker Deployment this worker belongs to')
    .option('--build-id <id>', 'Worker Versioning: this build of the deployment (with --deployment)')
    .action(
      action(async (session, command: { deployment?: string; buildId?: string }) => {
        if (Boolean(command.deployment) !== Boolean(command.buildId))
          throw new CliError('--deployment and --build-id go together: pass both, or neither');
        const deployment =
          command.deployment && command.buildId
            ? { deployment: { name: command.deployment, buildId: command.buildId } }
            : {};
        const module = (await session.module(true))!;
        const store = await session.store(module);
        const options = globals();
        const address = temporalAddress(options);
        // One line per log entry (a failing provider: one line per retry); stacks at DEBUG.
        installWorkerLogger();
        const worker = await createWorker({
          store,
          agents: module.agents,
          address,
          namespace: temporalNamespace(options),
          ...(options.profile ? { profile: options.profile } : {}),
          ...(options.taskQueue ? { taskQueue: options.taskQueue } : {}),
          ...(module.model ? { model: module.model } : {}),
          ...(module.authorization ? { authorization: module.authorization } : {}),
          ...(module.defaultModel ? { defaultModel: module.defaultModel } : {}),
          ...signingKey(),
          ...deployment,
          payloadCodecs: cliPayloadCodecs(),
        }).catch((error: unknown) => {
          const reason = error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
          const unreachable = /transport|connect|refused|deadline|unavailable/i.test(reason);
          throw new CliError(
            `the worker cannot start against ${address}: ` +
              (unreachable
                ? `no Temporal server answers there (${head(reason, 160)}). Start one (in a checkout: ./temporal-dev.sh start), or point --address or TEMPORAL_ADDRESS at yours`
                : reason),
          );
        });
        const stop = () => worker.shutdown();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        write(
          io.err,
          `turnkit worker: agents ${module.agents.names.join(', ')} on task queue ` +
            `${worker.worker.options.taskQueue}, ${address}, store ${store.identity.location} (${store.identity.id})` +
            (command.deployment ? `, deployment ${command.deployment} build ${command.buildId}` : '') +
            '\n',
        );
        await worker.run();
      }),
    );

  program
    .command('run')
    .description('start a run of <agent> on <task>')
    .argument('<agent>')
    .argument('<task>')
    .option('--follow', 'watch it until it ends; the exit code is its status')
    .option('--principal <json>', 'who is asking (JSON)')
    .action(
      action(async (session, agent: string, task: string, opts: { follow?: boolean; principal?: string }) => {
        const module = (await session.module(true))!;
        if (!module.agents.has(agent)) {
          throw new CliError(`unknown agent ${agent}: the module has ${module.agents.names.join(', ')}`);
        }
        const client = await session.client(module);
        const principal = parseJson('--principal', opts.principal);
        const run = await client.run(agent, task, principal === undefined ? {} : { principal });
        const options = globals();
        const link = turnLink(uiUrl(options), temporalNamespace(options), run.turnId);
        if (!options.json) write(io.err, `turnkit run: ${storeLine(client.store, client.taskQueue)}\n`);
        if (!opts.follow) {
          if (options.json) write(io.out, `${jsonText({ turnId: run.turnId, link })}\n`);
          else write(io.out, `${run.turnId}\n  ${link}\n  watch: ${cliName()} watch ${run.turnId}\n`);
          return;
        }
        if (!options.json) write(io.err, `${run.turnId} ${link}\n`);
        const followed = await follow(client.store, run.turnId, io, options.json === true);
        if (!options.json) for (const line of finalLines(followed)) write(io.out, `${line}\n`);
        return exitCodeFor(followed.turn.status);
      }),
    );

  program
    .command('ls')
    .description(
      'list turns through Temporal visibility: open ones first, then closed ones by when they closed, most recent first; marks those not in the store',
    )
    .option('--agent <name>')
    .addOption(new Option('--status <status>').choices(TURN_STATUSES))
    .option('--conversation <id>')
    .option('--limit <n>', 'at most this many', '20')
    .action(
      action(
        async (session, opts: { agent?: string; status?: string; conversation?: string; limit: string }) => {
          const limit = Number(opts.limit);
          if (!Number.isInteger(limit) || limit < 1)
            throw new CliError(`--limit must be a positive integer`, EXIT_CODES.usage);
          const quote = (value: string) => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
          const query = [
            `WorkflowType = 'turnWorkflow'`,
            // A turn whose workflow continued as new is listed once, by its open (or last) run.
            `ExecutionStatus != 'ContinuedAsNew'`,
            ...(opts.agent ? [`${TURNKIT_AGENT.name} = ${quote(opts.agent)}`] : []),
            ...(opts.status ? [`${TURNKIT_STATUS.name} = ${quote(opts.status)}`] : []),
            ...(opts.conversation ? [`${TURNKIT_CONVERSATION_ID.name} = ${quote(opts.conversation)}`] : []),
          ].join(' AND ');
          const temporal = await session.temporal();
          const store = await session.readStore();
          const rows: {
            turnId: string;
            agent: string;
            status: string;
            conversation: string;
            started: string;
            closed: string | null;
            inStore: boolean;
          }[] = [];
          for await (const workflow of temporal.workflow.list({ query, pageSize: limit })) {
            const attribute = (key: { name: string }) => {
              const value = workflow.searchAttributes?.[key.name];
              return Array.isArray(value) && value.length > 0 ? String(value[0]) : '';
            };
            rows.push({
              turnId: workflow.workflowId.slice(TURN_WORKFLOW_ID_PREFIX.length),
              agent: attribute(TURNKIT_AGENT),
              status: attribute(TURNKIT_STATUS),
              conversation: attribute(TURNKIT_CONVERSATION_ID),
              started: workflow.startTime.toISOString(),
              closed: workflow.closeTime?.toISOString() ?? null,
              // Visibility lists the namespace's turns, whichever store holds them.
              inStore: await inStore(store, workflow.workflowId.slice(TURN_WORKFLOW_ID_PREFIX.length)),
            });
            if (rows.length >= limit) break;
          }
          if (globals().json) {
            write(io.out, `${jsonText(rows)}\n`);
            return;
          }
          const style = styleFor(io.out);
          if (rows.length === 0) write(io.err, 'no turns match\n');
          for (const row of rows) {
            write(
              io.out,
              `${row.turnId}  ${terminalSafe(row.agent).padEnd(16)} ${style.status(row.status.padEnd(9))} started ${row.started}` +
                `${row.closed ? ` closed ${row.closed}` : ''}${row.inStore ? '' : '  (not in this store)'}\n`,
            );
          }
          const missing = rows.filter((row) => !row.inStore).length;
          if (missing > 0)
            write(
              io.err,
              `${missing} of these turns ${missing === 1 ? 'is' : 'are'} not in the store ${store.identity.location}: ` +
                'another store holds them (pass --store to read it)\n',
            );
        },
      ),
    );

  program
    .command('show')
    .description(
      'a turn: status, output, transcript, tool executions, tree, usage, cost, links, forks (a conversation id: its messages and forks)',
    )
    .argument('<turnId>')
    .action(
      action(async (session, turnId: string) => {
        const store = await session.readStore();
        if (turnId.startsWith('conv_'))
          return showConversation(store, turnId, io.out, globals().json === true);
        const turn = await loadTurn(store, turnId);
        const forks = await forkSummary(store, turn.conversationId);
        const messages = (await store.listMessages(turn.conversationId)).filter(
          (m) => m.turnId === turn.id || m.sequence <= turn.contextMessageSequence,
        );
        const executions = await store.listToolExecutions({ turnId: turn.id });
        const tree = await store.listTurns({ rootTurnId: turn.rootTurnId });
        const options = globals();
        const link = turnLink(uiUrl(options), temporalNamespace(options), turn.id);
        if (options.json) {
          write(
            io.out,
            `${jsonText({ turn, messages, executions, tree: tree.map((t) => ({ id: t.id, agent: t.agentName, parent: t.parentTurnId, status: t.status })), link, ...forks.json })}\n`,
          );
          return exitCodeFor(turn.status);
        }
        const style = styleFor(io.out);
        const lines = [
          `${style.bold(turn.agentName)} ${turn.id} ${style.status(turn.status)}`,
          `  conversation ${turn.conversationId} · root ${turn.rootTurnId}${turn.parentTurnId ? ` · parent ${turn.parentTurnId}` : ''}`,
          `  ${turn.usage?.total_tokens ?? 0} tokens (${turn.usage?.input_tokens ?? 0} in, ${turn.usage?.output_tokens ?? 0} out) · ${formatCost(turn.cost)}`,
          `  ${link}`,
          ...finalLines({ turn, streamed: '' }).map((line) => `  ${head(line, 400)}`),
          style.bold('transcript'),
          ...messageLines(messages),
          ...(executions.length > 0 ? [style.bold('tool executions'), ...executionLines(executions)] : []),
          ...(tree.length > 1 ? [style.bold('tree'), ...treeLines(tree, turn.rootTurnId, style)] : []),
          ...forks.lines,
        ];
        write(io.out, `${lines.join('\n')}\n`);
        return exitCodeFor(turn.status);
      }),
    );

  program
    .command('watch')
    .description('live progress of a turn until it ends; the exit code is its status')
    .argument('<turnId>')
    .action(
      action(async (session, turnId: string) => {
        const followed = await follow(await session.readStore(), turnId, io, globals().json === true);
        if (!globals().json) for (const line of finalLines(followed)) write(io.out, `${line}\n`);
        return exitCodeFor(followed.turn.status);
      }),
    );

  program
    .command('cancel')
    .description('cancel a turn (a no-op for a finished one)')
    .argument('<turnId>')
    .option('--cascade', 'cancel its descendants too')
    .option('--principal <json>', 'who is asking (JSON)')
    .action(
      action(async (session, turnId: string, opts: { cascade?: boolean; principal?: string }) => {
        const client = await session.client(await session.module(false));
        const turn = await loadTurn(client.store, turnId);
        const principal = parseJson('--principal', opts.principal);
        if (isTerminal(turn)) {
          write(io.err, `${turnId} is already ${turn.status}: nothing to cancel\n`);
          return;
        }
        await client.cancel(turnId, {
          descendants: opts.cascade ? 'cascade' : 'retain',
          ...(principal === undefined ? {} : { principal }),
        });
        write(io.err, `cancel sent to ${turnId}\n`);
      }),
    );

  // A person in the loop: each control is the turn workflow's Update of the same name.
  const control = <T>(
    name: string,
    description: string,
    send: (run: RunHandle, args: string[], opts: Record<string, string | undefined>) => Promise<T>,
    options: { args?: string[]; flags?: [string, string][]; line: (answer: T, turnId: string) => string },
  ) => {
    const command = program.command(name).description(description).argument('<turnId>');
    for (const arg of options.args ?? []) command.argument(arg);
    for (const [flag, help] of options.flags ?? []) command.option(flag, help);
    command.option('--principal <json>', 'who is asking (JSON)').action(
      action(async (session, turnId: string, ...rest: unknown[]) => {
        const client = await session.client(await session.module(false));
        const args = rest.slice(0, (options.args ?? []).length) as string[];
        const opts = rest[(options.args ?? []).length] as Record<string, string | undefined>;
        const principal = parseJson('--principal', opts['principal']);
        const run = await client.handle(turnId);
        const answer = await send(run, args, {
          ...opts,
          ...(principal === undefined ? {} : { principal }),
        } as never);
        write(io.out, `${globals().json ? jsonText(answer) : terminalSafe(options.line(answer, turnId))}\n`);
      }),
    );
  };
  const decided = (answer: ApprovalResult & { turnId?: string }) =>
    `${answer.decision} ${answer.toolCallId} in turn ${answer.turnId ?? '-'} (signed principal: ${answer.verified ? 'verified' : 'no'})`;
  const controlled = (state: ControlState & { status?: string }) =>
    [
      state.paused
        ? 'paused'
        : state.pauseRequested
          ? 'pause requested (at the next boundary)'
          : 'not paused',
      `awaiting approval: ${state.awaitingApproval.length > 0 ? state.awaitingApproval.join(', ') : 'none'}`,
      `steering messages pending: ${state.pendingSteers}`,
      ...(state.finished ? ['finished'] : []),
    ].join(' · ');
  const who = (opts: Record<string, unknown>) =>
    opts['principal'] === undefined ? {} : { principal: opts['principal'] as Json };
  // A sub-agent's call is decided through the root's id; --turn names the turn when two share the call id.
  const TURN_FLAG: [string, string] = ['--turn <turnId>', 'the (sub-agent) turn the call belongs to'];
  const inTurn = (opts: Record<string, unknown>) =>
    typeof opts['turn'] === 'string' ? { turnId: opts['turn'] } : {};
  program
    .command('pending')
    .description('tool calls awaiting approval in a turn and its sub-agent turns')
    .argument('<turnId>')
    .action(
      action(async (session, turnId: string) => {
        const client = await session.client(await session.module(false));
        const pending = await (await client.handle(turnId)).pendingApprovals();
        if (globals().json) write(io.out, `${jsonText(pending)}\n`);
        else
          for (const call of pending)
            write(
              io.out,
              `${terminalSafe(call.toolCallId)} ${terminalSafe(call.toolName)} ${jsonText(call.arguments)} since ${call.requestedAt}` +
                `${call.turnId === turnId ? '' : ` in turn ${call.turnId} (${call.agentName})`}\n`,
            );
      }),
    );
  control(
    'approve',
    'approve a tool call awaiting approval',
    (run, [id], opts) =>
      run.approve(id!, {
        ...who(opts),
        ...inTurn(opts),
        ...(opts['note'] ? { note: opts['note'] } : {}),
      }),
    { args: ['<toolCallId>'], flags: [['--note <text>', 'a note for the record'], TURN_FLAG], line: decided },
  );
  control(
    'reject',
    'reject a tool call awaiting approval (the model reads the reason)',
    (run, [id], opts) =>
      run.reject(id!, {
        ...who(opts),
        ...inTurn(opts),
        ...(opts['reason'] ? { reason: opts['reason'] } : {}),
      }),
    {
      args: ['<toolCallId>'],
      flags: [['--reason <text>', 'why (the model reads it)'], TURN_FLAG],
      line: decided,
    },
  );
  control('pause', 'pause a turn at its next control boundary', (run, _args, opts) => run.pause(who(opts)), {
    line: controlled,
  });
  control('resume', 'resume a paused turn', (run, _args, opts) => run.resume(who(opts)), {
    line: controlled,
  });
  control(
    'steer',
    "append a person's message at the next control boundary",
    (run, [text], opts) => run.steer(text!, who(opts)),
    { args: ['<text>'], line: controlled },
  );

  program
    .command('send')
    .description('send a durable message to a conversation (delivered once per key)')
    .argument('<conversationId>')
    .argument('<text>')
    .requiredOption('--key <key>', 'idempotency key')
    .option('--principal <json>', 'who is sending (JSON)')
    .action(
      action(
        async (session, conversationId: string, text: string, opts: { key: string; principal?: string }) => {
          const client = await session.client(await session.module(false));
          const principal = parseJson('--principal', opts.principal);
          const delivery = await client.sendMessage(conversationId, text, {
            key: opts.key,
            ...(principal === undefined ? {} : { principal }),
          });
          if (globals().json) write(io.out, `${jsonText(delivery)}\n`);
          else
            write(
              io.out,
              `${delivery.id} ${delivery.deliveredAt ? `delivered ${delivery.deliveredAt}` : 'queued'}\n`,
            );
        },
      ),
    );

  program
    .command('post')
    .description("post a user's message to a conversation: a turn now, or the policy when it is busy")
    .argument('<conversationId>')
    .argument('<text>')
    .option('--request-id <id>', 'idempotency key: the same id returns the same receipt')
    .addOption(
      new Option('--policy <policy>', "when the conversation is busy (default: the agent's)").choices([
        ...POST_POLICIES,
      ]),
    )
    .option('--principal <json>', 'who is posting (JSON)')
    .action(
      action(
        async (
          session,
          conversationId: string,
          text: string,
          opts: { requestId?: string; policy?: PostPolicy; principal?: string },
        ) => {
          const client = await session.client(await session.module(false));
          const principal = parseJson('--principal', opts.principal);
          const receipt = await client.post(conversationId, text, {
            ...(opts.requestId ? { requestId: opts.requestId } : {}),
            ...(opts.policy ? { policy: opts.policy } : {}),
            ...(principal === undefined ? {} : { principal }),
          });
          if (globals().json) write(io.out, `${jsonText(receipt)}\n`);
          else
            write(
              io.out,
              `${receipt.disposition} ${receipt.requestId} message ${receipt.messageId ?? '-'} turn ${receipt.turnId ?? '-'}\n`,
            );
        },
      ),
    );

  program
    .command('repair')
    .description('fail the unfinished turns whose workflow is gone, start the ones never started')
    .option('--dry-run', 'list what would be repaired, change nothing')
    .option(
      '--fail-missing',
      'fail the turns that ran and whose workflow is not found even when no workflow of the store is found in this namespace',
    )
    .action(
      action(async (session, opts: { dryRun?: boolean; failMissing?: boolean }) => {
        const client = await session.client(await session.module(false));
        const findings = await client.repair({
          dryRun: opts.dryRun === true,
          failMissing: opts.failMissing === true,
        });
        if (globals().json) write(io.out, `${jsonText(findings)}\n`);
        else
          for (const finding of findings)
            write(io.out, terminalSafe(repairLine(finding, opts.dryRun)) + '\n');
        const acted = findings.filter((finding) => finding.action !== 'hold');
        const held = findings.length - acted.length;
        write(
          io.err,
          terminalSafe(
            `${acted.length} turn${acted.length === 1 ? '' : 's'} ${opts.dryRun ? 'to repair' : 'repaired'}` +
              (held > 0
                ? `; ${held} held: their workflow is not found in namespace ${client.temporal.options.namespace}, nor any other of this store's (wrong --namespace or --address?)`
                : ''),
          ) + '\n',
        );
        // Held turns are an operator's decision: a script must not take them for repaired.
        return held > 0 ? EXIT_CODES.error : 0;
      }),
    );

  const commands: ScheduleCommandContext = {
    out: io.out,
    err: io.err,
    json: () => globals().json === true,
    parseJson,
    run: (agents, fn) =>
      action(async (session, ...args) => {
        const module = await session.module(agents);
        return fn(await session.client(module), module, ...args);
      }),
  };
  addScheduleCommands(program, commands);
  addForkCommands(program, commands);
  addEvalCommand(program, commands);
  addConsoleCommand(program, commands);
  addCodecServerCommand(program, io, globals);
  addPruneCommand(program, commands, (fn) =>
    action(async (session, ...args) => fn(await session.readStore(), ...args)),
  );
  addServeCommand(program, commands);
  addEraseCommand(program, commands);

  return program;
}

/** One line of `turnkit repair` per finding. */
function repairLine(finding: RepairFinding, dryRun: boolean | undefined): string {
  const head = `${finding.turnId} ${finding.status} in ${finding.conversationId}: workflow ${finding.workflow}; `;
  if (finding.action === 'hold') return `${head}held: ${finding.held ?? 'not confirmed'}`;
  const what = finding.action === 'fail' ? 'fail (WorkflowClosed)' : 'start its workflow';
  if (dryRun) return `${head}would ${what}`;
  return `${head}${what}: ${finding.done ? 'done' : 'skipped, it moved'}`;
}

/** TURNKIT_SIGNING_KEY: the key controls and cancels are signed with (workers verify it). */
function signingKey(): { signingKey?: string } {
  const key = process.env['TURNKIT_SIGNING_KEY'];
  return key ? { signingKey: key } : {};
}

/** Runs the command line; returns the exit code. Errors are one line unless --debug. */
export async function main(
  argv: readonly string[],
  io: Io = { out: process.stdout, err: process.stderr },
): Promise<number> {
  let code = 0;
  const program = buildProgram(io, (c) => (code = c));
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return code;
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? 0 : EXIT_CODES.usage;
    }
    const debug = argv.includes('--debug');
    if (debug && error instanceof Error) write(io.err, `${error.stack}\n`);
    else if (error instanceof CliError) write(io.err, `turnkit: ${terminalSafe(error.message)}\n`);
    else if (error instanceof TurnKitError)
      write(io.err, `turnkit: ${error.name}: ${terminalSafe(error.message)}\n`);
    else
      write(
        io.err,
        `turnkit: ${terminalSafe(error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error))}\n`,
      );
    return error instanceof CliError ? error.exitCode : EXIT_CODES.error;
  }
}
