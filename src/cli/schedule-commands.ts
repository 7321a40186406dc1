/**
 * `turnkit schedule ls|create|pause|unpause|trigger|delete`: scheduled agents on Temporal
 * Schedules (docs/scheduling.md). `create` needs the agents module (the agent must
 * exist); the others only Temporal.
 */
import type { Command } from 'commander';
import { Option } from 'commander';
import { SCHEDULE_OVERLAPS } from '../contract/schedule.js';
import type { ScheduleOverlap } from '../contract/schedule.js';
import type { ScheduleOptions } from '../client/schedules.js';
import type { Json } from '../store/types.js';
import type { TurnKitClient } from '../client/turnkit-client.js';
import type { AgentsModule } from './project.js';
import { CliError } from './project.js';
import { EXIT_CODES, jsonText, terminalSafe, write } from './render.js';

/** What the command table lends these commands (main.ts). */
export interface ScheduleCommandContext {
  out: NodeJS.WriteStream;
  err: NodeJS.WriteStream;
  json(): boolean;
  parseJson(what: string, text: string | undefined): Json | undefined;
  /** Runs a command with a client: `agents` loads the agents module (required). */
  run<A extends unknown[]>(
    agents: boolean,
    fn: (client: TurnKitClient, module: AgentsModule | undefined, ...args: A) => Promise<number | void>,
  ): (...args: A) => Promise<void>;
}

interface CreateFlags {
  cron?: string;
  every?: string;
  conversation?: string;
  overlap?: ScheduleOverlap;
  catchupWindow?: string;
  maxSpend?: string;
  maxSpendPerDay?: string;
  maxIterations?: string;
  principal?: string;
  paused?: boolean;
}

/** A number flag, or a usage error that names it. */
function numberFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (value.trim() === '' || !Number.isFinite(number))
    throw new CliError(`${flag} must be a number, got ${value}`, EXIT_CODES.usage);
  return number;
}

/** A duration flag: milliseconds, or a string such as `15m` or `'1 hour'`. */
function durationFlag(value: string | undefined): string | number | undefined {
  if (value === undefined) return undefined;
  return /^\d+$/.test(value) ? Number(value) : value;
}

function createOptions(ctx: ScheduleCommandContext, id: string, flags: CreateFlags): ScheduleOptions {
  const budget = {
    ...(flags.maxSpend !== undefined ? { maxSpend: numberFlag('--max-spend', flags.maxSpend) } : {}),
    ...(flags.maxSpendPerDay !== undefined
      ? { maxSpendPerDay: numberFlag('--max-spend-per-day', flags.maxSpendPerDay) }
      : {}),
    ...(flags.maxIterations !== undefined
      ? { maxIterations: numberFlag('--max-iterations', flags.maxIterations) }
      : {}),
  };
  const principal = ctx.parseJson('--principal', flags.principal);
  const every = durationFlag(flags.every);
  const catchupWindow = durationFlag(flags.catchupWindow);
  return {
    id,
    ...(flags.cron !== undefined ? { cron: flags.cron } : {}),
    ...(every !== undefined ? { every: every as ScheduleOptions['every'] } : {}),
    ...(flags.conversation !== undefined ? { conversation: flags.conversation } : {}),
    ...(flags.overlap !== undefined ? { overlap: flags.overlap } : {}),
    ...(catchupWindow !== undefined
      ? { catchupWindow: catchupWindow as ScheduleOptions['catchupWindow'] }
      : {}),
    ...(Object.keys(budget).length > 0 ? { budget } : {}),
    ...(principal !== undefined ? { principal } : {}),
    ...(flags.paused ? { paused: true } : {}),
  };
}

export function addScheduleCommands(program: Command, ctx: ScheduleCommandContext): void {
  const schedule = program
    .command('schedule')
    .description('scheduled agents on Temporal Schedules: ls, create, pause, unpause, trigger, delete');

  schedule
    .command('ls')
    .description("TurnKit's schedules: id, agent, state, next firing")
    .action(
      ctx.run(false, async (client) => {
        const schedules = await client.listSchedules();
        if (ctx.json()) return void write(ctx.out, `${jsonText(schedules)}\n`);
        if (schedules.length === 0) write(ctx.err, 'no schedules\n');
        for (const row of schedules)
          write(
            ctx.out,
            terminalSafe(
              `${row.id}  ${row.agent.padEnd(16)} ${(row.paused ? 'paused' : 'active').padEnd(7)} next ${row.nextRunAt?.toISOString() ?? '-'}`,
            ) + '\n',
          );
      }),
    );

  schedule
    .command('create')
    .description('schedule <agent> on <task>, with --cron or --every')
    .argument('<id>')
    .argument('<agent>')
    .argument('<task>')
    .option('--cron <expression>', 'a cron expression Temporal accepts (e.g. "0 7 * * MON-FRI")')
    .option('--every <duration>', 'an interval: milliseconds, or e.g. 15m, "1 hour"')
    .option('--conversation <id>', "'new' (default: a new conversation per firing) or a conversation id")
    .addOption(new Option('--overlap <policy>', 'while the previous run works').choices(SCHEDULE_OVERLAPS))
    .option('--catchup-window <duration>', 'how late a missed firing may still be taken')
    .option('--max-spend <usd>', 'cap of each run (USD)')
    .option('--max-spend-per-day <usd>', "cap of the schedule's runs per UTC day (USD)")
    .option('--max-iterations <n>', 'cap of each run (model calls)')
    .option('--principal <json>', 'who every run is (JSON)')
    .option('--paused', 'create it paused')
    .action(
      ctx.run(true, async (client, module, id: string, agent: string, task: string, flags: CreateFlags) => {
        if (!module!.agents.has(agent))
          throw new CliError(`unknown agent ${agent}: the module has ${module!.agents.names.join(', ')}`);
        const handle = await client.schedule(agent, task, createOptions(ctx, id, flags));
        if (ctx.json()) write(ctx.out, `${jsonText({ id: handle.id, scheduleId: handle.scheduleId })}\n`);
        else
          write(
            ctx.out,
            `${terminalSafe(handle.id)}\n  temporal schedule: ${terminalSafe(handle.scheduleId)}\n`,
          );
      }),
    );

  const simple = (
    name: string,
    description: string,
    act: (id: string, client: TurnKitClient) => Promise<void>,
  ) =>
    schedule
      .command(name)
      .description(description)
      .argument('<id>')
      .action(
        ctx.run(false, async (client, _module, id: string) => {
          await act(id, client);
          write(ctx.err, `${terminalSafe(`schedule ${id}: ${name} done`)}\n`);
        }),
      );
  simple('pause', 'pause a schedule (no firings until unpaused)', (id, client) =>
    client.getSchedule(id).pause(),
  );
  simple('unpause', 'unpause a schedule', (id, client) => client.getSchedule(id).unpause());
  simple('trigger', 'fire a schedule now (under its overlap policy)', (id, client) =>
    client.getSchedule(id).trigger(),
  );
  simple('delete', 'delete a schedule (its runs stay)', (id, client) => client.getSchedule(id).delete());
}
