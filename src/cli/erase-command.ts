/**
 * `turnkit erase --principal <json> | --conversation <id> [--dry-run]` (decision 78,
 * docs/data-lifecycle.md, "Erasure"): removes a principal's or a conversation's data from the
 * store and from Temporal through the erasure workflow (a worker must run on the task queue),
 * or, with `--dry-run`, prints what would go and changes nothing.
 */
import type { Command } from 'commander';
import type { ErasedKind, ErasureReport, ErasureSubject } from '../erasure/erasure-types.js';
import { CliError } from './project.js';
import { EXIT_CODES, jsonText, write } from './render.js';
import type { ScheduleCommandContext } from './schedule-commands.js';

interface EraseFlags {
  principal?: string;
  conversation?: string;
  dryRun?: boolean;
  batchSize?: string;
  by?: string;
}

/** Each kind's noun, singular and plural. */
const NOUNS: readonly [ErasedKind, string, string][] = [
  ['conversations', 'conversation', 'conversations'],
  ['messages', 'message', 'messages'],
  ['turns', 'turn', 'turns'],
  ['toolExecutions', 'tool execution', 'tool executions'],
  ['events', 'event', 'events'],
  ['streamParts', 'stream part', 'stream parts'],
  ['deliveries', 'delivery', 'deliveries'],
  ['waits', 'wait', 'waits'],
  ['scheduleSpend', 'schedule spend row', 'schedule spend rows'],
  ['budgetLedger', 'budget ledger row', 'budget ledger rows'],
];

const counted = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The report in one line: `erase removed 4 conversations, 10 messages, …, 5 workflows, 1 schedule`. */
function eraseSummary(report: ErasureReport): string {
  const rows = NOUNS.filter(([kind]) => report.rows[kind] > 0).map(([kind, one, many]) =>
    counted(report.rows[kind], one, many),
  );
  const any = rows.length > 0 || report.workflows + report.schedules > 0;
  const what = any
    ? [
        ...rows,
        counted(report.workflows, 'workflow', 'workflows'),
        counted(report.schedules, 'schedule', 'schedules'),
      ].join(', ')
    : 'nothing';
  const verb = report.dryRun ? 'would remove' : 'removed';
  return `erase ${verb} ${what}${report.dryRun ? '' : ` (erasure ${report.erasureId})`}\n`;
}

function subjectOf(flags: EraseFlags, ctx: ScheduleCommandContext): ErasureSubject {
  if ((flags.principal === undefined) === (flags.conversation === undefined))
    throw new CliError(
      'erase needs exactly one of --principal <json> and --conversation <id>',
      EXIT_CODES.usage,
    );
  if (flags.conversation !== undefined) return { conversationId: flags.conversation };
  return { principal: ctx.parseJson('--principal', flags.principal)! };
}

export function addEraseCommand(program: Command, ctx: ScheduleCommandContext): void {
  program
    .command('erase')
    .description("remove a principal's or a conversation's data from the store and from Temporal")
    .option(
      '--principal <json>',
      'erase every conversation of this principal (JSON), its schedules and forks',
    )
    .option('--conversation <id>', 'erase this conversation, its forks and its sub-agents’ conversations')
    .option('--dry-run', 'print what would be removed, change nothing')
    .option('--batch-size <n>', 'rows deleted per transaction (default 500)')
    .option('--by <json>', 'who erases (JSON): the principal the authorization policy is asked about')
    .action(
      ctx.run(false, async (client, _module, flags: EraseFlags) => {
        const subject = subjectOf(flags, ctx);
        if (flags.batchSize !== undefined && !/^\d+$/.test(flags.batchSize))
          throw new CliError(`--batch-size must be a whole number, got ${flags.batchSize}`, EXIT_CODES.usage);
        const by = ctx.parseJson('--by', flags.by);
        const report = await client.erase(subject, {
          dryRun: flags.dryRun === true,
          ...(flags.batchSize !== undefined ? { batchSize: Number(flags.batchSize) } : {}),
          ...(by !== undefined ? { by } : {}),
        });
        write(ctx.out, ctx.json() ? `${jsonText(report)}\n` : eraseSummary(report));
      }),
    );
}
